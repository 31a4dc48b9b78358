// The block runner's internals (block_runner.h is its interface), shared by its four files:
// worker_pool.cpp (the worker threads and the launches they take blocks from), block_fibers.cpp
// (a block's CUDA threads as fibers, and its barriers), warp_operations.cpp and shared_memory.cpp.
// A Worker is one worker thread's state; a CudaThread is one CUDA thread of the block it runs.
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "emulator/runtime/block_runner.h"
#include "emulator/runtime/fiber.h"
#include "emulator/runtime/shared_view.h"

namespace emu {

// 0, 1, ..., n-1 in an order drawn from `seed`, into `order`: the order of a launch's blocks and
// of a block's warps.
void permutation(std::vector<uint32_t>& order, uint32_t n, uint64_t seed);

// "0x0000ffff", as the errors print warp masks.
std::string mask_text(unsigned mask);

enum class Status { ready, at_barrier, at_warp_op, exited };

struct CudaThread {
  Context context;
  std::unique_ptr<FiberStack> stack;
  uint3 index{};
  int linear = 0;
  Status status = Status::exited;
  bool started = false;  // has entered the kernel in the current block
  // At a barrier: where.
  const char* barrier_file = nullptr;
  int barrier_line = 0;
  // At a warp operation: which, and this lane's operands; `result` is filled when the warp meets.
  WarpOp op = WarpOp::sync;
  const char* op_name = nullptr;
  unsigned mask = 0;
  uint64_t value = 0;
  int operand = 0;
  int width = kWarp;
  uint64_t result = 0;
};

// The TSan sync objects of one launch: a distinct address per block (block start, its barrier, its
// 32 warps), so that nothing released in one block is acquired in another (blocks are unordered).
struct SyncObjects {
#if defined(LLMC_EMU_TSAN)
  static constexpr size_t kPerBlock = 2 + kWarp;
  explicit SyncObjects(size_t blocks) : bytes(new char[blocks * kPerBlock]) {}
  std::unique_ptr<char[]> bytes;
  char* block_start(size_t b) { return &bytes[b * kPerBlock]; }
  char* barrier(size_t b) { return &bytes[b * kPerBlock + 1]; }
  char* warp(size_t b, int w) { return &bytes[b * kPerBlock + 2 + size_t(w)]; }
  char done = 0;  // every CUDA thread releases it at its end; the host acquires it
#else
  explicit SyncObjects(size_t) {}
#endif
};

// The shared memory of the block a worker runs: [dynamic][redzone][static array][redzone]...
// (shared_memory.cpp).
class SharedArena {
 public:
  SharedArena();
  ~SharedArena();
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  void begin_block(size_t dynamic_bytes, size_t limit);
  void end_block();
  void* dynamic() { return bytes_; }
  size_t capacity() const;
  void* allocate_static(const void* tag, size_t bytes);

 private:
  void fresh(size_t offset, size_t bytes);
  void poison(size_t offset, size_t bytes);
  void unpoison(size_t offset, size_t bytes);

  unsigned char* bytes_;
  size_t limit_ = 0, dynamic_bytes_ = 0, static_bytes_ = 0, used_ = 0;
  std::vector<std::pair<const void*, size_t>> statics_;  // (declaration, offset)
};

// A kernel on its way through the pool.
struct Launch {
  Launch(const KernelJob& j, uint64_t s)
      : job(j), blocks(size_t(j.grid.x) * j.grid.y * j.grid.z), seed(s), sync(blocks) {
    permutation(order, uint32_t(blocks), seed);
  }
  const KernelJob& job;
  size_t blocks;
  std::vector<uint32_t> order;
  uint64_t seed;
  SyncObjects sync;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex fault_mutex;
  cudaError_t code = cudaSuccess;
};

// Thrown in the suspended CUDA threads of a block that a fault ends, so that each unwinds its kernel
// frames and leaves through its fiber's entry function as it would at the kernel's end.
struct BlockCancelled {};

// One worker thread's state: its own context, the fibers of the block it runs, their shared memory.
// run_block and the barrier are block_fibers.cpp's, the warp operations warp_operations.cpp's.
class Worker {
 public:
  Worker() { init_worker_context(context_); }
  ~Worker() {
    for (auto& t : threads_) destroy_context(t->context);
  }

  void run_block(Launch& launch, uint32_t linear);

  bool running() const { return current_ != nullptr; }
  // For the device functions, running in one of this worker's fibers.
  CudaThread& current() {
    if (!current_) throw std::logic_error("emulated GPU: a device function was called outside a kernel");
    return *current_;
  }
  // Suspends the current CUDA thread (its status says why) and returns when it is resumed.
  void suspend(CudaThread& t) { switch_context(t.context, context_); }
  // In a barrier or warp operation, after suspend(): the block has faulted, end this thread.
  void end_if_cancelled() {
    if (cancelling_) throw BlockCancelled{};
  }
  SharedArena& arena() { return arena_; }
  Launch& launch() { return *launch_; }
  uint32_t block() const { return block_; }
  Context& context() { return context_; }

  // The first fault of a launch is printed and becomes its error; later ones are dropped.
  void fault(cudaError_t code, const std::string& what);
  // The race check found a race in the running thread: the block fails when that thread stops.
  void shared_race(const std::string& what) {
    if (race_.empty()) race_ = what + " in " + where(current());
  }
  // "kernel K, block (x,y,z), thread (x,y,z)"
  std::string where(const CudaThread& t) const;

 private:
  void ensure_threads(int n);
  void resume(CudaThread& t);
  void complete_warp(int warp, int n, CudaThread& arrived);
  void lane_exited(int warp, int n, const CudaThread& t);
  void release_barrier(int n);
  [[noreturn]] void block_error(const CudaThread& t, const std::string& what) {
    throw DeviceFault(cudaErrorLaunchFailure, what + " in " + where(t));
  }

  Context context_;
  std::vector<std::unique_ptr<CudaThread>> threads_;
  SharedArena arena_;
  std::vector<uint32_t> warp_order_;         // the order the block's warps run in
  std::vector<unsigned> waiting_, exited_;  // per warp: lanes at a warp operation, lanes that ended
  int live_ = 0;                             // threads of the block that have not ended
  bool cancelling_ = false;
  std::vector<uint32_t> warp_syncs_;  // shared_view.warp_syncs
  std::string race_;                  // a shared-memory race the running thread made (racecheck.cpp)
  CudaThread* current_ = nullptr;
  Launch* launch_ = nullptr;
  uint32_t block_ = 0;
#if defined(LLMC_EMU_TSAN)
  std::vector<std::string> fiber_names_;
#endif
};

// The worker the calling thread is; null on every other thread.
inline thread_local Worker* tls_worker = nullptr;

// The calling worker, for the device functions: there is none outside a kernel.
inline Worker& worker(const char* what) {
  if (!tls_worker) throw std::logic_error(std::string("emulated GPU: ") + what + " outside a kernel");
  return *tls_worker;
}

}  // namespace emu
