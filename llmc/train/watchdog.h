// --step-timeout: ends a job that has stopped making progress, instead of letting it wait forever.
//
// A rank whose peer stopped (a crashed GPU, a SIGSTOPped process, a dead node) waits inside a
// collective that will never complete, and a hung kernel leaves its rank waiting on the GPU; the
// launcher sees nothing wrong. The training loop tells the Watchdog where it is (enter(): phase and
// step; the marks: collective, backend call), and each of these is progress, as is a mark's end (a
// collective returned, a backend call done). A thread checks the
// beats a few times per timeout; when none came for the timeout, it calls the stop action once
// with a message that says where the rank was waiting. trainer_main's stop action prints it, runs
// the abort hooks (llmc/dist/abort_hooks.h: ncclCommAbort) and ends every rank (MPI_Abort).
//
// Cost on the loop: a beat is one relaxed atomic increment, the marks two or three relaxed atomic
// stores; the thread sleeps in between its checks.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace llmc {

class Watchdog {
 public:
  using StopAction = std::function<void(const std::string& message)>;

  // timeout_seconds > 0 starts the watching thread; 0 turns the watchdog off (the marks still work,
  // nothing ever fires). rank_prefix starts the message ("rank 1: ", or "" for a single process).
  // stop runs on the watchdog's thread, at most once; in a trainer it does not return.
  Watchdog(double timeout_seconds, std::string rank_prefix, StopAction stop);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // The part of the run that follows (a string literal, read by the other thread: "step",
  // "evaluation", "checkpoint", ...) and its step, -1 for none. Counts as progress.
  void enter(const char* phase, int step) noexcept;

  // Marks, for its lifetime, where a rank waits (InCollective, InBackendCall); its end is progress.
  class Mark {
   public:
    ~Mark();
    Mark(const Mark&) = delete;
    Mark& operator=(const Mark&) = delete;

   protected:
    Mark(Watchdog& watchdog, std::atomic<const char*>& slot, const char* name) noexcept;

   private:
    Watchdog& watchdog_;
    std::atomic<const char*>& slot_;
  };
  // The collective a rank is in.
  struct InCollective : Mark {
    InCollective(Watchdog& watchdog, const char* name) noexcept : Mark(watchdog, watchdog.collective_, name) {}
  };
  // A call into the backend (a kernel that never finishes leaves its rank there).
  struct InBackendCall : Mark {
    InBackendCall(Watchdog& watchdog, const char* name) noexcept : Mark(watchdog, watchdog.backend_call_, name) {}
  };

  // The stop message for the marks as they are now, after `idle_seconds` without progress:
  // "<rank prefix>no progress for 3.2 s (--step-timeout 3 s): phase "step", step 4, waiting in
  // all_reduce_sum inside the backend's all_reduce_gradients; ending the job".
  std::string describe(double idle_seconds) const;

 private:
  // Progress: the time until the watchdog fires starts again.
  void beat() noexcept { beats_.fetch_add(1, std::memory_order_relaxed); }
  void watch();

  const double timeout_;
  const std::string rank_prefix_;
  const StopAction stop_;
  std::atomic<uint64_t> beats_{0};
  std::atomic<const char*> phase_{"start-up"};
  std::atomic<int> step_{-1};
  std::atomic<const char*> collective_{nullptr};
  std::atomic<const char*> backend_call_{nullptr};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;  // under mutex_: the destructor ends the thread
  std::thread thread_;
};

}  // namespace llmc
