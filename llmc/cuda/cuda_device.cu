// The CUDA trainer's device and library queries (llmc/cuda/cuda_backend.h): precision, attention
// kind, devices, whether this binary has code for the GPU, the peak MFU is counted against, versions.
#include <fmt/format.h>

#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "llmc/cuda/common.cuh"
#include "llmc/cuda/cublaslt_handle.cuh"
#include "llmc/cuda/cuda_backend.h"

// cuDNN's and NCCL's headers only where their libraries are (llmc/cuda/device_platform.cuh), for
// their versions below.
#if defined(LLMC_CUDNN_LIBRARY)
#include <cudnn.h>
#endif
#if defined(LLMC_NCCL_LIBRARY)
#include <nccl.h>
#endif

namespace llmc {

const char* cuda_precision_name() { return precision_name(cuda_precision()); }

Precision cuda_precision() { return std::is_same_v<floatX, float> ? Precision::kFp32 : Precision::kBf16; }

namespace {
// The environment variable's value, "" when unset.
std::string env_value(const char* name) {
  const char* env = std::getenv(name);
  return env ? env : "";
}

cudaDeviceProp current_device_properties() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop;
}

// Compiled like every kernel of the binary (the same CUDA_ARCHS), so whether the driver can load it
// on this GPU answers for all of them.
__global__ void kernel_image_probe() {}
}  // namespace

void check_kernel_image() {
  cudaFuncAttributes attributes{};
  const cudaError_t err = cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(&kernel_image_probe));
  if (err != cudaErrorNoKernelImageForDevice && err != cudaErrorUnsupportedPtxVersion) {
    CUDA_CHECK(err);
    return;
  }
  cudaGetLastError();  // not sticky; cleared so that nothing later reports it again
  const cudaDeviceProp prop = current_device_properties();
  const std::string gpu = fmt::format("{} (compute capability {}.{})", prop.name, prop.major, prop.minor);
  const std::string rebuild = fmt::format("make CUDA_ARCHS=\"-gencode arch=compute_{0}{1},code=sm_{0}{1}\"",
                                          prop.major, prop.minor);
  if (err == cudaErrorNoKernelImageForDevice)
    throw std::runtime_error(fmt::format(
        "CUDA backend: this binary has no code that runs on the {}: it holds {} (CUDA_ARCHS). Build for this "
        "GPU: {} (with a CUDA toolkit that knows it: 12.8 or later for Blackwell)",
        gpu, kernel_images(), rebuild));
  int driver = 0;
  cudaDriverGetVersion(&driver);
  throw std::runtime_error(fmt::format(
      "CUDA backend: the {} would run this binary's PTX ({}), but its driver (CUDA {}.{}) is older than the "
      "toolkit that compiled it (CUDA {}.{}): update the driver, or build this GPU's own code: {}",
      gpu, kernel_images(), driver / 1000, driver % 1000 / 10, CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10,
      rebuild));
}

bool cuda_build_has_nccl() {
#if defined(LLMC_NCCL_LIBRARY)
  return true;
#else
  return false;
#endif
}

AttentionKind default_attention_kind() {
#if defined(LLMC_CUDNN)
  AttentionKind kind = AttentionKind::kCudnn;
#else
  AttentionKind kind = AttentionKind::kFallback;
#endif
  const std::string value = env_value("LLMC_ATTENTION");
  if (value.empty()) return kind;
  if (value == "fallback") return AttentionKind::kFallback;
  if (value == "cudnn") return AttentionKind::kCudnn;
  throw std::runtime_error(fmt::format("LLMC_ATTENTION: '{}' is neither 'cudnn' nor 'fallback'", value));
}

bool attention_kind_forced() { return !env_value("LLMC_ATTENTION").empty(); }

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver/device" error for later calls
    return 0;
  }
  return count;
}

std::string cuda_device_description() {
  const cudaDeviceProp prop = current_device_properties();
  return fmt::format("{} (sm_{}{}, {} SMs, {:.1f} GiB)", prop.name, prop.major, prop.minor, prop.multiProcessorCount,
                     double(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
}

int cuda_compute_capability() {
  const cudaDeviceProp prop = current_device_properties();
  return prop.major * 10 + prop.minor;
}

PeakFlops cuda_device_peak() {
  return device_peak_flops(current_device_properties().name, cuda_precision() == Precision::kBf16,
                           std::getenv("LLMC_PEAK_TFLOPS"));
}

std::string cuda_library_versions() {
  // major*1000 + minor*10 (CUDA); major*10000 + minor*100 + patch (cuBLASLt, cuDNN 9, NCCL >= 2.9).
  const auto dotted = [](long long v, long long major_unit, long long minor_unit) {
    return fmt::format("{}.{}.{}", v / major_unit, v % major_unit / minor_unit, v % minor_unit);
  };
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
#if defined(LLMC_CUDNN_LIBRARY)
  const std::string cudnn = dotted(static_cast<long long>(cudnnGetVersion()), 10000, 100);
#else
  const std::string cudnn = fmt::format("none ({})", kNoCudnnReason);
#endif
#if defined(LLMC_NCCL_LIBRARY)
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  const std::string nccl = dotted(nccl_version, 10000, 100);
#else
  const std::string nccl = fmt::format("none ({})", kNoNcclReason);
#endif
  return fmt::format("driver {}.{}, runtime {}.{}, cuBLASLt {}, cuDNN {}, NCCL {}", driver / 1000, driver % 1000 / 10,
                     runtime / 1000, runtime % 1000 / 10, dotted(static_cast<long long>(cublasLtGetVersion()), 10000, 100),
                     cudnn, nccl);
}

int cuda_device_for_local_rank(int local_rank) {
  const int devices = cuda_device_count();
  if (devices == 0) throw std::runtime_error("CUDA backend: no CUDA device");
  return local_rank % devices;
}

std::string cuda_device_uuid(int device) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::string hex;
  for (char byte : prop.uuid.bytes) hex += fmt::format("{:02x}", static_cast<unsigned char>(byte));
  return hex;
}

std::optional<size_t> cuda_free_memory() {
  if (cuda_device_count() == 0) return std::nullopt;
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  return free_bytes;
}

bool cuda_device_emulated() { return kEmulatedGpu; }

std::optional<std::vector<size_t>> cuda_live_allocation_sizes() { return live_device_allocation_sizes(); }

}  // namespace llmc
