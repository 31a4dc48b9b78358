// Runs a kernel's blocks on the emulated GPU: a pool of worker threads (one per core) takes blocks
// in an order chosen by the seed; inside a block every CUDA thread is a fiber, and a block's fibers
// run one at a time until each reaches a barrier, a warp operation or its end. This header is also
// what the device functions (device_functions.h) call into for barriers, shuffles and shared memory.
// What its source files share, and which file holds what: block_worker.h.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace emu {

// One kernel launch as the block runner sees it: `invoke(args)` runs the kernel body for the
// CUDA thread the calling fiber stands for.
struct KernelJob {
  const char* name;
  dim3 grid, block;
  size_t dynamic_shared;  // bytes, as launched
  size_t shared_limit;    // dynamic + static shared bytes allowed per block
  void (*invoke)(const void* args);
  const void* args;
};

// Runs every block of `job`; returns cudaSuccess, or the error a GPU would leave (sticky), having
// printed on stderr what went wrong and in which kernel, block and thread.
cudaError_t run_kernel(const KernelJob& job);

// LLMC_EMU_SEED (default 0): orders the blocks of every launch, the warps of every block and, with
// LLMC_EMU_STREAMS=seeded, the work of the streams (stream_order.h).
uint64_t emulator_seed();

// Host-side work of the emulated libraries (the GEMMs under cuBLAS) on the same worker threads:
// body(begin, end) for consecutive ranges of at most `chunk` indices covering [0, n), each range
// once, in any order and in parallel; returns when all have run. Not from inside a kernel. (One
// pool for both, with threads that sleep when idle: OpenMP's threads would spin after each GEMM
// and take the cores from the workers running the next kernel.)
void parallel_for(long long n, long long chunk, const std::function<void(long long, long long)>& body);

// "(x,y,z)", as the errors name blocks, threads and launch shapes.
std::string dim_text(dim3 d);

// A fault inside a kernel: thrown in the faulting CUDA thread, it ends the kernel with `code`.
struct DeviceFault : std::runtime_error {
  DeviceFault(cudaError_t code_, const std::string& what) : std::runtime_error(what), code(code_) {}
  cudaError_t code;
};
// Throws a DeviceFault whose message names the current kernel, block and thread.
[[noreturn]] void device_fault(cudaError_t code, const std::string& what);

// __syncthreads at file:line: waits for every live thread of the block.
void block_barrier(const char* file, int line);

// __threadfence: a sequentially consistent fence; under LLMC_EMU_TSAN also what it orders, for TSan
// (device_functions.h).
void thread_fence();

// The warp-level operations. Each waits for every lane named in `mask` to reach the same
// operation with the same mask, then returns this lane's result.
enum class WarpOp { sync, shfl_idx, shfl_xor, shfl_down, shfl_up, ballot, any, all };
uint64_t warp_op(WarpOp op, const char* name, unsigned mask, uint64_t value, int operand, int width);

// Shared memory of the running block: the dynamic part (launch argument) and one static array per
// declaration (`tag` tells declarations apart), each fresh for every block and filled with 0xFF.
void* dynamic_shared();
void* static_shared(const void* tag, size_t bytes);

// Where a GPU faults with "misaligned address": an access of `bytes` at an address that is not a
// multiple of `bytes`.
[[noreturn]] void misaligned_fault(const void* p, size_t bytes, const char* access);
inline void check_aligned(const void* p, size_t bytes, const char* access) {
  if (reinterpret_cast<uintptr_t>(p) % bytes != 0) misaligned_fault(p, bytes, access);
}

}  // namespace emu
