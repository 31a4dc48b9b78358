// The worker pool, the fibers of a block, barriers, warp operations and shared memory.
#include "emulator/runtime/block_runner.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "emulator/runtime/fiber.h"
#include "emulator/runtime/shared_view.h"
#include "llmc/rng.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(LLMC_EMU_TSAN)
#include <sanitizer/tsan_interface.h>
// In libtsan, not in its header: accesses (and intercepted memset) by the current fiber are not seen.
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
#endif

// The built-in variables (declared in emulator.h): a worker sets blockIdx, blockDim and gridDim per
// block, and threadIdx at every switch to a fiber.
extern "C" {
thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;
thread_local int warpSize = 32;
}

namespace emu {

thread_local SharedView shared_view{0, 0, 0, -1, 0, nullptr};

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kFiberStackBytes = 256 * 1024;  // ASan's redzones make frames larger
#else
constexpr size_t kFiberStackBytes = 64 * 1024;
#endif
// The largest per-block shared memory of any GPU the project targets (H100: 227 KiB opt-in).
constexpr size_t kArenaBytes = 232448;
// Between shared arrays: an access past one array's end lands here, where ASan reports it.
constexpr size_t kSharedRedzone = 256;

// 0, 1, ..., n-1 in an order drawn from `seed`, into `order`.
void permutation(std::vector<uint32_t>& order, uint32_t n, uint64_t seed) {
  order.resize(n);
  std::iota(order.begin(), order.end(), 0u);
  llmc::Rng rng(seed);
  llmc::shuffle(order, rng);
}

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
class SharedArena {
 public:
  SharedArena() : bytes_(allocate()) { poison(0, kArenaBytes + kSharedRedzone); }
  ~SharedArena() {
    unpoison(0, kArenaBytes + kSharedRedzone);
    munmap(bytes_, kArenaBytes + kSharedRedzone);
  }
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  void begin_block(size_t dynamic_bytes, size_t limit) {
    limit_ = limit;
    dynamic_bytes_ = dynamic_bytes;
    statics_.clear();
    static_bytes_ = 0;
#if defined(LLMC_EMU_TSAN)
    // A new mapping over what the previous block used is how TSan forgets its fibers' accesses
    // (TSan's AnnotateNewMemory does nothing): to TSan too, this block's shared memory is new.
    const size_t page = 4096, dirty = (used_ + page - 1) / page * page;
    if (dirty > 0 && mmap(bytes_, dirty, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != bytes_)
      throw std::runtime_error("emulated GPU: cannot renew the shared memory arena");
#endif
    used_ = round16(dynamic_bytes) + kSharedRedzone;
    fresh(0, dynamic_bytes);
  }
  void end_block() { poison(0, used_); }

  void* dynamic() { return bytes_; }
  size_t capacity() const { return kArenaBytes; }

  void* allocate_static(const void* tag, size_t bytes) {
    for (const auto& s : statics_)
      if (s.first == tag) return bytes_ + s.second;
    const size_t offset = used_;
    if (dynamic_bytes_ + static_bytes_ + bytes > limit_ || offset + bytes + kSharedRedzone > kArenaBytes)
      device_fault(cudaErrorInvalidValue, "shared memory: " + std::to_string(dynamic_bytes_) + " dynamic + " +
                                              std::to_string(static_bytes_ + bytes) +
                                              " static bytes exceed the block's limit of " + std::to_string(limit_));
    statics_.push_back({tag, offset});
    static_bytes_ += bytes;
    used_ = offset + round16(bytes) + kSharedRedzone;
    fresh(offset, bytes);
    return bytes_ + offset;
  }

 private:
  static size_t round16(size_t n) { return (n + 15) / 16 * 16; }
  static unsigned char* allocate() {
    void* p = mmap(nullptr, kArenaBytes + kSharedRedzone, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<unsigned char*>(p);
  }
  // Uninitialised, as on a GPU: 0xFF bytes (NaN in fp32 and bf16); under ASan usable exactly. TSan
  // does not see the fill: it is no CUDA thread's write.
  void fresh(size_t offset, size_t bytes) {
    unpoison(offset, bytes);
#if defined(LLMC_EMU_TSAN)
    __tsan_ignore_thread_begin();
    std::memset(bytes_ + offset, 0xFF, bytes);
    __tsan_ignore_thread_end();
#else
    std::memset(bytes_ + offset, 0xFF, bytes);
#endif
  }
  void poison([[maybe_unused]] size_t offset, [[maybe_unused]] size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
    __asan_poison_memory_region(bytes_ + offset, bytes);
#endif
  }
  void unpoison([[maybe_unused]] size_t offset, [[maybe_unused]] size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
    __asan_unpoison_memory_region(bytes_ + offset, bytes);
#endif
  }

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

class Worker;
thread_local Worker* tls_worker = nullptr;

void fiber_main(void* arg);

// Thrown in the suspended CUDA threads of a block that a fault ends, so that each unwinds its kernel
// frames and leaves through fiber_main as it would at the kernel's end.
struct BlockCancelled {};

// One worker thread's state: its own context, the fibers of the block it runs, their shared memory.
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
  void fault(cudaError_t code, const std::string& what) {
    std::lock_guard<std::mutex> lock(launch_->fault_mutex);
    if (launch_->code != cudaSuccess) return;
    launch_->code = code;
    launch_->failed.store(true);
    std::fprintf(stderr, "emulated GPU: %s\n", what.c_str());
  }
  // The race check found a race in the running thread: the block fails when that thread stops.
  void shared_race(const std::string& what) {
    if (race_.empty()) race_ = what + " in " + where(current());
  }
  // "kernel K, block (x,y,z), thread (x,y,z)"
  std::string where(const CudaThread& t) const {
    return std::string("kernel ") + launch_->job.name + ", block " +
           dim_text(dim3(blockIdx.x, blockIdx.y, blockIdx.z)) + ", thread " +
           dim_text(dim3(t.index.x, t.index.y, t.index.z));
  }

 private:
  void ensure_threads(int n);
  void resume(CudaThread& t) {
    current_ = &t;
    threadIdx = t.index;
    shared_view.thread = t.linear;
    switch_context(context_, t.context);
    shared_view.thread = -1;
    current_ = nullptr;
    if (!race_.empty() && !cancelling_) throw DeviceFault(cudaErrorLaunchFailure, std::move(race_));
  }
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

void fiber_main(void* arg) {
  CudaThread& t = *static_cast<CudaThread*>(arg);
  Worker& w = *tls_worker;
  fiber_started(w.context());
  for (;;) {
    Launch& launch = w.launch();
#if defined(LLMC_EMU_TSAN)
    __tsan_acquire(launch.sync.block_start(w.block()));
#endif
    t.started = true;
    try {
      launch.job.invoke(launch.job.args);
    } catch (const BlockCancelled&) {
    } catch (const DeviceFault& f) {
      w.fault(f.code, f.what());
    } catch (const std::exception& e) {
      w.fault(cudaErrorLaunchFailure, std::string(e.what()) + " in " + w.where(t));
    }
#if defined(LLMC_EMU_TSAN)
    __tsan_release(&launch.sync.done);
#endif
    t.started = false;
    t.status = Status::exited;
    w.suspend(t);
  }
}

void Worker::ensure_threads(int n) {
  while (int(threads_.size()) < n) {
    auto t = std::make_unique<CudaThread>();
    t->stack = std::make_unique<FiberStack>(kFiberStackBytes);
    prepare_context(t->context, *t->stack, fiber_main, t.get());
    threads_.push_back(std::move(t));
  }
}

void Worker::run_block(Launch& launch, uint32_t linear) {
  const KernelJob& job = launch.job;
  launch_ = &launch;
  block_ = linear;
  blockIdx = uint3{linear % job.grid.x, (linear / job.grid.x) % job.grid.y, linear / (job.grid.x * job.grid.y)};
  blockDim = job.block;
  gridDim = job.grid;
  const int n = int(job.block.x * job.block.y * job.block.z);
  ensure_threads(n);
  arena_.begin_block(job.dynamic_shared, job.shared_limit);
  for (int i = 0; i < n; ++i) {
    CudaThread& t = *threads_[i];
    t.status = Status::ready;
    t.linear = i;
    t.index = uint3{i % job.block.x, (i / job.block.x) % job.block.y, i / (job.block.x * job.block.y)};
  }
#if defined(LLMC_EMU_TSAN)
  fiber_names_.resize(threads_.size());
  for (int i = 0; i < n; ++i) {
    fiber_names_[i] = std::string(job.name) + " block " + dim_text(dim3(blockIdx.x, blockIdx.y, blockIdx.z)) +
                      " thread " + dim_text(dim3(threads_[i]->index.x, threads_[i]->index.y, threads_[i]->index.z));
    __tsan_set_fiber_name(threads_[i]->context.tsan_fiber, fiber_names_[i].c_str());
  }
  __tsan_release(launch.sync.block_start(linear));
#endif
  const int warps = (n + kWarp - 1) / kWarp;
  waiting_.assign(warps, 0);
  exited_.assign(warps, 0);
  warp_syncs_.assign(warps, 0);
  race_.clear();
  shared_view.begin = reinterpret_cast<uintptr_t>(arena_.dynamic());
  shared_view.end = shared_view.begin + arena_.capacity();
  ++shared_view.block;
  shared_view.barriers = 0;
  shared_view.warp_syncs = warp_syncs_.data();
  permutation(warp_order_, uint32_t(warps), launch.seed ^ (uint64_t(linear) << 20));
  live_ = n;
  try {
    while (live_ > 0) {
      bool progressed = false;
      for (uint32_t w : warp_order_) {
        for (int i = int(w) * kWarp; i < std::min(n, int(w + 1) * kWarp); ++i) {
          CudaThread& t = *threads_[i];
          if (t.status != Status::ready) continue;
          resume(t);
          progressed = true;
          if (launch.failed.load(std::memory_order_relaxed)) throw DeviceFault(launch.code, "");
          if (t.status == Status::at_warp_op) complete_warp(int(w), n, t);
          if (t.status == Status::exited) lane_exited(int(w), n, t);
        }
      }
      if (live_ > 0 && !progressed) release_barrier(n);
    }
  } catch (const DeviceFault& f) {
    if (f.what()[0] != 0) fault(f.code, f.what());  // empty: another block's fault, already reported
    // The threads stopped inside the kernel unwind it; those that never started stay as they are.
    cancelling_ = true;
    for (int i = 0; i < n; ++i) {
      CudaThread& t = *threads_[i];
      if (t.started) resume(t);
      t.status = Status::exited;
    }
    cancelling_ = false;
  }
  arena_.end_block();
}

std::string hex(unsigned mask) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", mask);
  return text;
}

// `arrived` has just reached a warp operation: if every lane of its mask is there too, the
// operation completes and they all become ready with their results. The per-warp bit masks of
// waiting and exited lanes keep this O(1) until the last lane arrives.
void Worker::complete_warp(int warp, int n, CudaThread& arrived) {
  const unsigned mask = arrived.mask;
  const int lane = arrived.linear % kWarp;
  auto op = [&] { return std::string(arrived.op_name) + " with mask " + hex(mask); };
  auto lane_error = [&](const std::string& what, unsigned lanes) {
    block_error(arrived, op() + " names lane " + std::to_string(__builtin_ctz(lanes)) + ", which " + what);
  };
  const int first = warp * kWarp;
  const unsigned existing = n - first >= kWarp ? 0xffffffffu : (1u << (n - first)) - 1u;
  if (!(mask >> lane & 1u)) block_error(arrived, op() + " does not name its own lane " + std::to_string(lane));
  if (arrived.width < 1 || arrived.width > kWarp || (arrived.width & (arrived.width - 1)) != 0)
    block_error(arrived, op() + ": width " + std::to_string(arrived.width) + " is not a power of 2 up to 32");
  if (mask & ~existing) lane_error("does not exist in a block of " + std::to_string(n) + " threads", mask & ~existing);
  if (mask & exited_[warp]) lane_error("has exited", mask & exited_[warp]);
  waiting_[warp] |= 1u << lane;
  if ((waiting_[warp] & mask) != mask) return;  // not all there yet

  uint64_t ballot = 0;
  for (int j = 0; j < kWarp; ++j) {
    if (!(mask >> j & 1u)) continue;
    const CudaThread& u = *threads_[first + j];
    if (u.op != arrived.op || u.mask != mask || u.width != arrived.width)
      block_error(arrived, "lanes " + std::to_string(lane) + " and " + std::to_string(j) +
                               " of a warp meet at different warp operations: " + op() + " and " + u.op_name +
                               " with mask " + hex(u.mask));
    if (u.value != 0) ballot |= uint64_t(1) << j;
  }
  for (int j = 0; j < kWarp; ++j) {
    if (!(mask >> j & 1u)) continue;
    CudaThread& u = *threads_[first + j];
    const int width = u.width;
    const int segment = j & ~(width - 1);
    int source = j;
    switch (u.op) {
      case WarpOp::sync: u.result = 0; continue;
      case WarpOp::ballot: u.result = ballot; continue;
      case WarpOp::any: u.result = ballot != 0; continue;
      case WarpOp::all: u.result = ballot == uint64_t(mask); continue;
      case WarpOp::shfl_idx: source = segment + (u.operand & (width - 1)); break;
      case WarpOp::shfl_xor: source = j ^ u.operand; break;
      case WarpOp::shfl_down: source = j + u.operand; break;
      case WarpOp::shfl_up: source = j - u.operand; break;
    }
    // Outside the lane's width segment a shuffle returns the lane's own value.
    if (source < segment || source >= segment + width) source = j;
    if (!(mask >> source & 1u))
      block_error(u, op() + ": lane " + std::to_string(j) + " reads lane " + std::to_string(source) +
                         ", which is outside the mask");
    u.result = threads_[first + source]->value;
  }
  waiting_[warp] &= ~mask;
  ++warp_syncs_[warp];
  for (int j = 0; j < kWarp; ++j)
    if (mask >> j & 1u) threads_[first + j]->status = Status::ready;
}

// A lane that ends while others of its warp wait for it at a warp operation fails that operation.
void Worker::lane_exited(int warp, int n, const CudaThread& t) {
  const int lane = t.linear % kWarp;
  exited_[warp] |= 1u << lane;
  --live_;
  for (int j = 0; j < kWarp && warp * kWarp + j < n; ++j) {
    const CudaThread& u = *threads_[warp * kWarp + j];
    if ((waiting_[warp] >> j & 1u) && (u.mask >> lane & 1u))
      block_error(u, std::string(u.op_name) + " with mask " + hex(u.mask) + " names lane " + std::to_string(lane) +
                         ", which has exited");
  }
}

// Every live thread is waiting: at one __syncthreads, which then completes, or (an error) at
// different barriers or warp operations that can never complete.
void Worker::release_barrier(int n) {
  const CudaThread* at_barrier = nullptr;
  for (int i = 0; i < n && !at_barrier; ++i)
    if (threads_[i]->status == Status::at_barrier) at_barrier = threads_[i].get();
  for (int i = 0; i < n; ++i) {
    const CudaThread& t = *threads_[i];
    if (t.status == Status::at_warp_op) {
      std::string missing;
      for (int j = 0; j < kWarp; ++j) {
        const int k = (i / kWarp) * kWarp + j;
        if ((t.mask >> j & 1u) && k < n && threads_[k]->status != Status::at_warp_op)
          missing += (missing.empty() ? "" : ", ") + std::to_string(j);
      }
      block_error(t, std::string(t.op_name) + " with mask " + hex(t.mask) + " never completes: lanes " + missing +
                         (at_barrier ? " wait at __syncthreads (" + std::string(at_barrier->barrier_file) + ":" +
                                           std::to_string(at_barrier->barrier_line) + ")"
                                     : " never reach it"));
    }
  }
  for (int i = 0; i < n; ++i) {
    const CudaThread& t = *threads_[i];
    if (t.status == Status::at_barrier &&
        (t.barrier_line != at_barrier->barrier_line || std::strcmp(t.barrier_file, at_barrier->barrier_file) != 0))
      block_error(t, "threads of a block wait at different __syncthreads: this one at " + std::string(t.barrier_file) +
                         ":" + std::to_string(t.barrier_line) + ", thread " +
                         dim_text(dim3(at_barrier->index.x, at_barrier->index.y, at_barrier->index.z)) + " at " +
                         at_barrier->barrier_file + ":" + std::to_string(at_barrier->barrier_line));
  }
  for (int i = 0; i < n; ++i)
    if (threads_[i]->status == Status::at_barrier) threads_[i]->status = Status::ready;
  ++shared_view.barriers;
}

#if defined(__SANITIZE_ADDRESS__)
// After an ASan or UBSan report from kernel code: which kernel, block and thread it was.
void name_faulting_thread() {
  Worker* w = tls_worker;
  if (w && w->running())
    std::fprintf(stderr, "emulated GPU: the report above came from %s\n", w->where(w->current()).c_str());
}
#endif

// The worker threads, created at the first launch and kept for the life of the process.
class Pool {
 public:
  static Pool& get() {
    static Pool* pool = new Pool();  // never destroyed: its threads wait until the process ends
    return *pool;
  }

  // Every worker takes blocks until none is left.
  void run(Launch& launch) {
    run_on_workers([&launch] {
      Worker& worker = *tls_worker;
      // Relaxed: taking a block orders nothing between blocks, as on a GPU (TSan sees them unordered).
      for (size_t i; !launch.failed.load(std::memory_order_relaxed) &&
                     (i = launch.next.fetch_add(1, std::memory_order_relaxed)) < launch.blocks;)
        worker.run_block(launch, launch.order[i]);
    });
  }

  // Runs `job` once on every worker; returns when all have returned. The lock and the condition
  // variables order the job's writes before the caller's next reads.
  void run_on_workers(const std::function<void()>& job) {
    std::unique_lock<std::mutex> lock(mutex_);
    job_ = &job;
    ++generation_;
    busy_ = int(threads_.size());
    work_.notify_all();
    done_.wait(lock, [&] { return busy_ == 0; });
    job_ = nullptr;
  }

 private:
  Pool() {
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_set_death_callback(&name_faulting_thread);
#endif
    int count = int(std::thread::hardware_concurrency());
    if (const char* env = std::getenv("LLMC_EMU_WORKERS")) count = std::atoi(env);
    if (count < 1) count = 1;
    for (int i = 0; i < count; ++i) threads_.emplace_back([this] { work(); });
  }

  void work() {
    Worker worker;
    tls_worker = &worker;
    uint64_t seen = 0;
    for (;;) {
      const std::function<void()>* job = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        work_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        job = job_;
      }
      (*job)();
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable work_, done_;
  const std::function<void()>* job_ = nullptr;
  uint64_t generation_ = 0;
  int busy_ = 0;
};

// The calling worker, for the device functions: there is none outside a kernel.
Worker& worker(const char* what) {
  if (!tls_worker) throw std::logic_error(std::string("emulated GPU: ") + what + " outside a kernel");
  return *tls_worker;
}

}  // namespace

uint64_t emulator_seed() {
  static const uint64_t value = [] {
    const char* env = std::getenv("LLMC_EMU_SEED");
    return env ? std::strtoull(env, nullptr, 0) : uint64_t(0);
  }();
  return value;
}

std::string dim_text(dim3 d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

cudaError_t run_kernel(const KernelJob& job) {
  Launch launch(job, emulator_seed());
  Pool::get().run(launch);
#if defined(LLMC_EMU_TSAN)
  __tsan_acquire(&launch.sync.done);
#endif
  return launch.code;
}

void parallel_for(long long n, long long chunk, const std::function<void(long long, long long)>& body) {
  // A worker would wait for itself.
  if (tls_worker) throw std::logic_error("emulated GPU: parallel_for called on a worker thread");
  std::atomic<long long> next{0};
  Pool::get().run_on_workers([&] {
    for (long long begin; (begin = next.fetch_add(chunk, std::memory_order_relaxed)) < n;)
      body(begin, std::min(n, begin + chunk));
  });
}

void device_fault(cudaError_t code, const std::string& what) {
  Worker& w = worker(what.c_str());
  throw DeviceFault(code, what + " in " + w.where(w.current()));
}

void misaligned_fault(const void* p, size_t bytes, const char* access) {
  char text[96];
  std::snprintf(text, sizeof(text), "misaligned address: %zu-byte %s at %p", bytes, access, p);
  device_fault(cudaErrorMisalignedAddress, text);
}

void block_barrier(const char* file, int line) {
  Worker& w = worker("__syncthreads");
  CudaThread& t = w.current();
  t.status = Status::at_barrier;
  t.barrier_file = file;
  t.barrier_line = line;
#if defined(LLMC_EMU_TSAN)
  __tsan_release(w.launch().sync.barrier(w.block()));
  w.suspend(t);
  __tsan_acquire(w.launch().sync.barrier(w.block()));
#else
  w.suspend(t);
#endif
  w.end_if_cancelled();
}

uint64_t warp_op(WarpOp op, const char* name, unsigned mask, uint64_t value, int operand, int width) {
  Worker& w = worker(name);
  CudaThread& t = w.current();
  t.status = Status::at_warp_op;
  t.op = op;
  t.op_name = name;
  t.mask = mask;
  t.value = value;
  t.operand = operand;
  t.width = width;
#if defined(LLMC_EMU_TSAN)
  char* sync = w.launch().sync.warp(w.block(), t.linear / kWarp);
  __tsan_release(sync);
  w.suspend(t);
  __tsan_acquire(sync);
#else
  w.suspend(t);
#endif
  w.end_if_cancelled();
  return t.result;
}

void report_shared_race(const std::string& what) {
  if (tls_worker) tls_worker->shared_race(what);
}

void* dynamic_shared() { return worker("shared memory").arena().dynamic(); }

void* static_shared(const void* tag, size_t bytes) {
  return worker("shared memory").arena().allocate_static(tag, bytes);
}

}  // namespace emu
