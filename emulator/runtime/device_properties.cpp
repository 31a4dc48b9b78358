// The device the emulated GPU stands for, as the runtime describes it: one H100 SXM per process
// (device 0), its properties and the toolkit's version as both the runtime's and the driver's.
// LLMC_EMU_COMPUTE_CAPABILITY ("major.minor", default 9.0) makes it report another compute
// capability, so that a program's checks of it (FP8 needs sm_89) can be run on the emulated GPU;
// LLMC_EMU_KERNEL_IMAGES names the GPU code the program stands for holding, so that a GPU none of it
// fits (cudaErrorNoKernelImageForDevice) can be too.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

#include "emulator/runtime/device_limits.h"
#include "emulator/runtime/device_memory.h"
#include "emulator/runtime/runtime_state.h"

namespace emu {

// Read at every call rather than once, so that a test may set the variable around one check; a
// malformed value stops the program, naming the variable, as LLMC_EMU_STREAMS's does.
int compute_capability() {
  const char* env = std::getenv("LLMC_EMU_COMPUTE_CAPABILITY");
  if (env == nullptr) return 90;
  // One or two digits of major version, a dot, one digit of minor (as NVIDIA writes them: 8.9, 10.0).
  const size_t n = std::strlen(env), dot = n >= 3 ? n - 2 : 0;
  bool well_formed = (n == 3 || n == 4) && env[dot] == '.' && std::isdigit((unsigned char)env[n - 1]);
  for (size_t i = 0; well_formed && i < dot; ++i) well_formed = std::isdigit((unsigned char)env[i]);
  const int major = well_formed ? std::atoi(env) : 0;
  if (major < 1) {
    std::fprintf(stderr, "emulated GPU: LLMC_EMU_COMPUTE_CAPABILITY is '%s'; it must be major.minor, as 8.0, 8.9, 9.0\n",
                 env);
    std::exit(2);
  }
  return major * 10 + (env[n - 1] - '0');
}

std::string kernel_images() {
  const char* env = std::getenv("LLMC_EMU_KERNEL_IMAGES");
  return env ? env : "code for every GPU (LLMC_EMU_KERNEL_IMAGES unset)";
}

namespace {
// Whether a driver runs `image` (sm_XY[a|f]: machine code; compute_XY[a|f]: PTX) on a GPU of
// compute capability `cc` (major * 10 + minor), by NVIDIA's rules: plain machine code runs on its
// major version from its minor up; PTX, compiled by the driver, on every later GPU; an "a" image
// (sm_90a, compute_90a) on that GPU alone; an "f" image on its family (its major version, from its
// minor up). A word that is neither stops the program, naming the variable.
bool image_runs_on(const std::string& image, int cc) {
  const bool ptx = image.rfind("compute_", 0) == 0;
  const size_t digits = image.find('_') + 1;
  size_t end = digits;
  while (end < image.size() && std::isdigit((unsigned char)image[end])) ++end;
  const std::string suffix = image.substr(end);
  if ((!ptx && image.rfind("sm_", 0) != 0) || end - digits < 2 || (suffix != "" && suffix != "a" && suffix != "f")) {
    std::fprintf(stderr, "emulated GPU: LLMC_EMU_KERNEL_IMAGES has '%s'; its words must be sm_XY or compute_XY, "
                         "optionally with a or f (sm_90a)\n", image.c_str());
    std::exit(2);
  }
  const int arch = std::atoi(image.substr(digits, end - digits).c_str());
  if (suffix == "a") return cc == arch;
  if (suffix == "f" || !ptx) return cc / 10 == arch / 10 && cc >= arch;
  return cc >= arch;
}
}  // namespace

}  // namespace emu

using namespace emu;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice, "cudaSetDevice(" + std::to_string(device) + "): one device");
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties: device " + std::to_string(device));
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof(prop->name), "NVIDIA H100 80GB HBM3 (emulated on the CPU)");
  prop->totalGlobalMem = kGlobalMemory;
  prop->sharedMemPerBlock = kDefaultSharedPerBlock;
  prop->sharedMemPerBlockOptin = kOptInSharedPerBlock;
  prop->sharedMemPerMultiprocessor = 233472;
  prop->regsPerBlock = 65536;
  prop->regsPerMultiprocessor = 65536;
  prop->warpSize = emu::kWarp;
  prop->maxThreadsPerBlock = int(kMaxThreadsPerBlock);
  prop->maxThreadsPerMultiProcessor = 2048;
  for (int i = 0; i < 3; ++i) {
    prop->maxThreadsDim[i] = int(kMaxBlockDim[i]);
    prop->maxGridSize[i] = int(kMaxGridDim[i]);
  }
  prop->totalConstMem = 65536;
  prop->major = compute_capability() / 10;
  prop->minor = compute_capability() % 10;
  prop->multiProcessorCount = 132;
  prop->l2CacheSize = 50 * 1024 * 1024;
  prop->memoryBusWidth = 5120;
  prop->unifiedAddressing = 1;
  // Each process is its own emulated GPU (NCCL's ranks on the emulated GPU are processes), so the
  // UUID that tells GPUs apart is this process's: "EMUGPU" and the process id.
  std::memcpy(prop->uuid.bytes, "EMUGPU", 6);
  const uint32_t pid = uint32_t(getpid());
  std::memcpy(prop->uuid.bytes + 6, &pid, sizeof pid);
  return cudaSuccess;
}

// Loading a kernel: every kernel of the program is compiled alike, so the images of
// LLMC_EMU_KERNEL_IMAGES answer for each.
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
  if (func == nullptr) return fail(cudaErrorInvalidDeviceFunction, "cudaFuncGetAttributes: no kernel");
  const int cc = compute_capability();
  if (const char* env = std::getenv("LLMC_EMU_KERNEL_IMAGES")) {
    std::istringstream words(env);
    std::string image;
    bool runs = false;
    while (words >> image) runs = image_runs_on(image, cc) || runs;
    if (!runs)
      return fail(cudaErrorNoKernelImageForDevice, "cudaFuncGetAttributes: none of '" + std::string(env) +
                                                       "' runs on compute capability " + std::to_string(cc / 10) +
                                                       "." + std::to_string(cc % 10));
  }
  *attr = cudaFuncAttributes{};
  attr->maxThreadsPerBlock = int(kMaxThreadsPerBlock);
  attr->binaryVersion = cc;
  attr->ptxVersion = cc;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

}  // extern "C"
