// One block on a worker: its CUDA threads as fibers (fiber.h), run one at a time until each
// reaches a barrier, a warp operation or its end; __syncthreads; and the faults raised inside a
// kernel, named with the kernel, block and thread. The built-in variables live here too: the
// worker sets them for every block and at every switch to a fiber.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "emulator/runtime/block_worker.h"

#if defined(LLMC_EMU_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

// The built-in variables (declared in emulator.h): a worker sets blockIdx, blockDim and gridDim per
// block, and threadIdx at every switch to a fiber.
extern "C" {
thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;
thread_local int warpSize = emu::kWarp;
}

namespace emu {

thread_local SharedView shared_view{0, 0, 0, -1, 0, nullptr};

namespace {

#if defined(LLMC_EMU_ASAN)
constexpr size_t kFiberStackBytes = 256 * 1024;  // ASan's redzones make frames larger
#else
constexpr size_t kFiberStackBytes = 64 * 1024;
#endif

// Every fiber's entry: runs the kernel body for its CUDA thread, once per block, and switches back
// to the worker at the end of each.
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

}  // namespace

std::string dim_text(dim3 d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

void Worker::fault(cudaError_t code, const std::string& what) {
  std::lock_guard<std::mutex> lock(launch_->fault_mutex);
  if (launch_->code != cudaSuccess) return;
  launch_->code = code;
  launch_->failed.store(true);
  std::fprintf(stderr, "emulated GPU: %s\n", what.c_str());
}

std::string Worker::where(const CudaThread& t) const {
  return std::string("kernel ") + launch_->job.name + ", block " + dim_text(dim3(blockIdx.x, blockIdx.y, blockIdx.z)) +
         ", thread " + dim_text(dim3(t.index.x, t.index.y, t.index.z));
}

void Worker::ensure_threads(int n) {
  while (int(threads_.size()) < n) {
    auto t = std::make_unique<CudaThread>();
    t->stack = std::make_unique<FiberStack>(kFiberStackBytes);
    prepare_context(t->context, *t->stack, fiber_main, t.get());
    threads_.push_back(std::move(t));
  }
}

void Worker::resume(CudaThread& t) {
  current_ = &t;
  threadIdx = t.index;
  shared_view.thread = t.linear;
  switch_context(context_, t.context);
  shared_view.thread = -1;
  current_ = nullptr;
  if (!race_.empty() && !cancelling_) throw DeviceFault(cudaErrorLaunchFailure, std::move(race_));
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
      block_error(t, std::string(t.op_name) + " with mask " + mask_text(t.mask) + " never completes: lanes " +
                         missing +
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

void thread_fence() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#if defined(LLMC_EMU_TSAN)
  // TSan does not model fences. Each one releases into and acquires from one device-wide object, so
  // TSan orders every fence after all earlier ones: what a fence on each side of an atomic that one
  // side saw the other's value of establishes (and more: see __threadfence in device_functions.h).
  static char device_fences;
  __tsan_release(&device_fences);
  __tsan_acquire(&device_fences);
#endif
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

void report_shared_race(const std::string& what) {
  if (tls_worker) tls_worker->shared_race(what);
}

}  // namespace emu
