// What must run before a stuck process is torn down. The watchdog (llmc/train/watchdog.h) ends a
// job whose ranks wait in a collective that will never complete; objects it cannot see, such as
// the NcclCommunicator the CUDA backend creates, register here how to release what they hold
// (ncclCommAbort), and the watchdog's stop action runs every hook before MPI_Abort or the exit.
#pragma once
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace llmc {

class AbortHooks {
 public:
  using Id = uint64_t;

  // Adds a hook; returns the id that removes it. Thread-safe.
  Id add(std::function<void()> hook);
  // Removes the hook with this id (an unknown id is ignored). Waits while run() is calling the
  // hooks, so that once remove() returns, the hook's object can be destroyed safely.
  void remove(Id id);
  // Calls every hook in the order they were added, holding the lock. Thread-safe; a hook must not
  // add or remove hooks.
  void run();

 private:
  std::mutex mutex_;
  Id next_id_ = 1;
  std::vector<std::pair<Id, std::function<void()>>> hooks_;
};

// The process's hooks: the ones the watchdog's stop action runs.
AbortHooks& abort_hooks();

}  // namespace llmc
