// One small kernel per failure a GPU (or compute-sanitizer) would report, for tests/emu/check_emu.sh:
// `emu_faults CASE` runs one case, which is expected to fail in a given way. Every case prints
// "reached the end" if nothing stopped it, so a fault that goes unnoticed fails the check.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "llmc/cuda/common.cuh"

using llmc::launch;

namespace {

__global__ void noop_kernel(float*) {}

// 16-byte load from an address 8 bytes past a 16-byte boundary.
__global__ void misaligned_load_kernel(float* data) {
  if (threadIdx.x == 3) data[0] = llmc::load128(data + 2)[0];
}

// One element past the end of an allocation of n floats.
__global__ void out_of_bounds_kernel(float* data, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) data[i] = 1.0f;
}

// An index far past the end of `data`, beyond its redzone, into another allocation: memory the
// kernel was not given, which stays poisoned while it runs.
__global__ void other_allocation_kernel(float* out, const float* data, long long index) {
  if (threadIdx.x == 0) out[0] = data[index];
}

// An index past a static shared array's 32 floats, through a pointer (which UBSan's bounds check
// cannot follow: ASan's poisoned redzone after the array catches it).
__global__ void shared_out_of_bounds_kernel(float* out, int index) {
  LLMC_SHARED(float, scratch, [32]);
  scratch[threadIdx.x % 32] = 1.0f;
  __syncthreads();
  const float* p = scratch;
  if (threadIdx.x == 0) out[0] = p[index];
}

// Past the launch's dynamic shared memory (`floats` of them).
__global__ void dynamic_shared_out_of_bounds_kernel(float* out, int floats) {
  float* dyn = llmc::dynamic_shared<float>();
  if (threadIdx.x == 0) out[0] = dyn[floats];
}

// Half the block at one barrier, half at another.
__global__ void divergent_barrier_kernel(float* out) {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1.0f;
}

// Lane 31 has returned; the others shuffle with the full mask.
__global__ void shuffle_exited_lane_kernel(float* out) {
  if (threadIdx.x == 31) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

// The low half of a warp shuffles among itself but reads lane 20.
__global__ void shuffle_outside_mask_kernel(float* out) {
  if (threadIdx.x < 16) out[threadIdx.x] = __shfl_sync(0x0000ffffu, float(threadIdx.x), 20);
}

// Lane 0 of warp 1 waits at a shuffle with its whole warp, which went on to __syncthreads.
__global__ void shuffle_barrier_deadlock_kernel(float* out) {
  float x = 1.0f;
  if (threadIdx.x == 32) x = __shfl_xor_sync(0xffffffffu, x, 1);
  __syncthreads();
  out[threadIdx.x] = x;
}

// Thread 32 reads what thread 0 wrote to shared memory, with no __syncthreads between.
__global__ void shared_race_kernel(float* out) {
  LLMC_SHARED(float, cell, [1]);
  if (threadIdx.x == 0) cell[0] = 2.0f;
  if (threadIdx.x == 32) out[0] = cell[0];
}

// The same, with the barrier: no race.
__global__ void shared_synced_kernel(float* out) {
  LLMC_SHARED(float, cell, [1]);
  if (threadIdx.x == 0) cell[0] = 2.0f;
  __syncthreads();
  if (threadIdx.x == 32) out[0] = cell[0];
}

// Lanes of one warp exchange through shared memory without __syncwarp (racy since Volta).
__global__ void warp_race_kernel(float* out) {
  LLMC_SHARED(float, cell, [32]);
  cell[threadIdx.x] = float(threadIdx.x);
  out[threadIdx.x] = cell[(threadIdx.x + 1) % 32];
}

// Where each block (thread 0) and each warp of block 0 (lane 0) comes in the order of execution.
__global__ void order_kernel(int* block_order, int* warp_order, int* counters) {
  if (threadIdx.x == 0) block_order[atomicAdd(&counters[0], 1)] = blockIdx.x;
  if (blockIdx.x == 0 && threadIdx.x % 32 == 0) warp_order[atomicAdd(&counters[1], 1)] = threadIdx.x / 32;
}

// Appends `tag` to the log of the order in which work ran.
__global__ void log_kernel(int* log, int* counter, int tag) { log[atomicAdd(counter, 1)] = tag; }

// Every block writes the same global element.
__global__ void blocks_race_kernel(float* out) {
  if (threadIdx.x == 0) out[0] = float(blockIdx.x);
}

float* device_floats(size_t n) {
  float* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, n * sizeof(float)));
  return p;
}

// Runs a launch and then synchronises, as a program would; the error then ends the program.
void run(const std::function<void()>& launch_it) {
  launch_it();
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
}

const std::map<std::string, std::function<void()>> kCases = {
    {"too_many_threads", [] { run([] { launch<noop_kernel>(1, 1025, 0, 0, nullptr); }); }},
    {"block_z_over_64", [] { run([] { launch<noop_kernel>(1, dim3(1, 1, 65), 0, 0, nullptr); }); }},
    {"grid_y_over_65535", [] { run([] { launch<noop_kernel>(dim3(1, 65536), 32, 0, 0, nullptr); }); }},
    {"shared_over_default", [] { run([] { launch<noop_kernel>(1, 32, 48 * 1024 + 16, 0, nullptr); }); }},
    {"shared_over_opt_in",
     [] {
       CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(&noop_kernel),
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024 + 16));
     }},
    {"misaligned",
     [] {
       float* p = device_floats(64);
       try {
         run([&] { launch<misaligned_load_kernel>(2, 64, 0, 0, p); });
       } catch (const std::exception& e) {
         // The error is sticky: the context is lost, as on a GPU.
         std::printf("first error: %s\n", e.what());
         void* q = nullptr;
         std::printf("then cudaMalloc: %s\n", cudaGetErrorString(cudaMalloc(&q, 16)));
         throw;
       }
     }},
    {"out_of_bounds",
     [] {
       float* p = device_floats(1000);
       run([&] { launch<out_of_bounds_kernel>(4, 256, 0, 0, p, 1000); });
     }},
    {"use_after_free",
     [] {
       float* p = device_floats(256);
       CUDA_CHECK(cudaFree(p));
       run([&] { launch<out_of_bounds_kernel>(1, 256, 0, 0, p, 100); });
     }},
    {"other_allocation",
     [] {
       float* out = device_floats(1);
       float* mine = device_floats(64);
       const float* other = device_floats(64);
       // The distance in floats from the addresses: subtracting pointers into two allocations is
       // undefined in C++ (the allocations are 256-byte aligned, so it is whole floats).
       const long long index = (static_cast<long long>(reinterpret_cast<uintptr_t>(other)) -
                                static_cast<long long>(reinterpret_cast<uintptr_t>(mine))) /
                               static_cast<long long>(sizeof(float));
       run([&] { launch<other_allocation_kernel>(1, 32, 0, 0, out, mine, index); });
     }},
    {"shared_out_of_bounds",
     [] {
       float* p = device_floats(1);
       run([&] { launch<shared_out_of_bounds_kernel>(1, 64, 0, 0, p, 40); });
     }},
    {"dynamic_shared_out_of_bounds",
     [] {
       float* p = device_floats(1);
       run([&] { launch<dynamic_shared_out_of_bounds_kernel>(1, 32, 64 * sizeof(float), 0, p, 64); });
     }},
    {"host_reads_device",
     [] {
       float* p = device_floats(16);
       std::printf("%f\n", p[3]);
     }},
    {"host_reads_device_after_work",  // poisoned again once the work the host waited for has run
     [] {
       float* p = device_floats(64);
       CUDA_CHECK(cudaMemset(p, 0, 64 * sizeof(float)));
       run([&] { launch<shared_synced_kernel>(1, 64, 0, 0, p); });
       std::printf("%f\n", p[0]);
     }},
    {"divergent_barrier",
     [] {
       float* p = device_floats(64);
       run([&] { launch<divergent_barrier_kernel>(1, 64, 0, 0, p); });
     }},
    {"shuffle_exited_lane",
     [] {
       float* p = device_floats(32);
       run([&] { launch<shuffle_exited_lane_kernel>(1, 32, 0, 0, p); });
     }},
    {"shuffle_outside_mask",
     [] {
       float* p = device_floats(32);
       run([&] { launch<shuffle_outside_mask_kernel>(1, 32, 0, 0, p); });
     }},
    {"shuffle_barrier_deadlock",
     [] {
       float* p = device_floats(64);
       run([&] { launch<shuffle_barrier_deadlock_kernel>(1, 64, 0, 0, p); });
     }},
    {"shared_race",
     [] {
       float* p = device_floats(1);
       run([&] { launch<shared_race_kernel>(1, 64, 0, 0, p); });
     }},
    {"shared_synced",
     [] {
       float* p = device_floats(1);
       run([&] { launch<shared_synced_kernel>(1, 64, 0, 0, p); });
     }},
    {"warp_race",
     [] {
       float* p = device_floats(32);
       run([&] { launch<warp_race_kernel>(1, 32, 0, 0, p); });
     }},
    {"print_order",
     [] {
       const int blocks = 64, warps = 16;
       int* block_order = nullptr;
       int* warp_order = nullptr;
       int* counters = nullptr;
       CUDA_CHECK(cudaMalloc(&block_order, blocks * sizeof(int)));
       CUDA_CHECK(cudaMalloc(&warp_order, warps * sizeof(int)));
       CUDA_CHECK(cudaMalloc(&counters, 2 * sizeof(int)));
       CUDA_CHECK(cudaMemset(counters, 0, 2 * sizeof(int)));
       run([&] { launch<order_kernel>(blocks, warps * 32, 0, 0, block_order, warp_order, counters); });
       std::vector<int> host(blocks + warps);
       CUDA_CHECK(cudaMemcpy(host.data(), block_order, blocks * sizeof(int), cudaMemcpyDeviceToHost));
       CUDA_CHECK(cudaMemcpy(host.data() + blocks, warp_order, warps * sizeof(int), cudaMemcpyDeviceToHost));
       for (int x : host) std::printf("%d ", x);
       std::printf("\n");
     }},
    {"print_stream_order",
     [] {
       // Three non-blocking streams of 8 kernels each, nothing ordering the streams: the order they
       // ran in, as stream * 100 + position.
       const int streams = 3, per_stream = 8;
       int* log = nullptr;
       int* counter = nullptr;
       CUDA_CHECK(cudaMalloc(&log, streams * per_stream * sizeof(int)));
       CUDA_CHECK(cudaMalloc(&counter, sizeof(int)));
       CUDA_CHECK(cudaMemset(counter, 0, sizeof(int)));
       CUDA_CHECK(cudaDeviceSynchronize());
       std::vector<cudaStream_t> s(streams);
       for (cudaStream_t& x : s) CUDA_CHECK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
       for (int i = 0; i < per_stream; ++i)
         for (int k = 0; k < streams; ++k) launch<log_kernel>(1, 1, 0, s[size_t(k)], log, counter, k * 100 + i);
       CUDA_CHECK(cudaDeviceSynchronize());
       std::vector<int> host(streams * per_stream);
       CUDA_CHECK(cudaMemcpy(host.data(), log, host.size() * sizeof(int), cudaMemcpyDeviceToHost));
       for (int x : host) std::printf("%d ", x);
       std::printf("\n");
     }},
    {"blocks_race",
     [] {
       float* p = device_floats(1);
       run([&] { launch<blocks_race_kernel>(8, 32, 0, 0, p); });
     }},
};

}  // namespace

int main(int argc, char** argv) {
  auto it = argc == 2 ? kCases.find(argv[1]) : kCases.end();
  if (it == kCases.end()) {
    std::fprintf(stderr, "usage: %s CASE, one of:", argv[0]);
    for (const auto& c : kCases) std::fprintf(stderr, " %s", c.first.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  try {
    it->second();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  std::printf("reached the end\n");
  return 0;
}
