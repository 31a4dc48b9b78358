// The device the emulated GPU stands for, as the runtime describes it: one H100 SXM per process
// (device 0), its properties and the toolkit's version as both the runtime's and the driver's.
// LLMC_EMU_COMPUTE_CAPABILITY ("major.minor", default 9.0) makes it report another compute
// capability, so that a program's checks of it (FP8 needs sm_89) can be run on the emulated GPU.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

}  // extern "C"
