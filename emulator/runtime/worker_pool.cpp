// The worker threads of the emulated GPU (one per core, or LLMC_EMU_WORKERS): a launch's blocks go
// to them in an order drawn from LLMC_EMU_SEED, and the emulated libraries' host work
// (parallel_for) runs on the same threads.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include "emulator/runtime/block_worker.h"
#include "llmc/rng.h"

#if defined(LLMC_EMU_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(LLMC_EMU_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace emu {

void permutation(std::vector<uint32_t>& order, uint32_t n, uint64_t seed) {
  order.resize(n);
  std::iota(order.begin(), order.end(), 0u);
  llmc::Rng rng(seed);
  llmc::shuffle(order, rng);
}

namespace {

#if defined(LLMC_EMU_ASAN)
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
#if defined(LLMC_EMU_ASAN)
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

}  // namespace

uint64_t emulator_seed() {
  static const uint64_t value = [] {
    const char* env = std::getenv("LLMC_EMU_SEED");
    return env ? std::strtoull(env, nullptr, 0) : uint64_t(0);
  }();
  return value;
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

}  // namespace emu

#if defined(LLMC_EMU_TSAN)
// TSan's defaults for the emulated programs (TSAN_OPTIONS still overrides them): no sleep at exit.
// TSan waits a second there (atexit_sleep_ms) for threads still running to race with the exit;
// the workers here run only while the host waits for them (run_on_workers), so at exit none runs.
extern "C" const char* __tsan_default_options() { return "atexit_sleep_ms=0"; }
#endif
