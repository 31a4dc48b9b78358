// The device the emulated GPU stands for, as the runtime describes it: one H100 SXM per process
// (device 0), its properties and the toolkit's version as both the runtime's and the driver's.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "emulator/runtime/runtime_state.h"
#include "emulator/runtime/device_limits.h"

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
  prop->major = 9;
  prop->minor = 0;
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
