#include "llmc/train/watchdog.h"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <utility>

namespace llmc {

Watchdog::Watchdog(double timeout_seconds, std::string rank_prefix, StopAction stop)
    : timeout_(timeout_seconds), rank_prefix_(std::move(rank_prefix)), stop_(std::move(stop)) {
  if (timeout_ > 0) thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::enter(const char* phase, int step) noexcept {
  phase_.store(phase, std::memory_order_relaxed);
  step_.store(step, std::memory_order_relaxed);
  beat();
}

Watchdog::Mark::Mark(Watchdog& watchdog, std::atomic<const char*>& slot, const char* name) noexcept
    : watchdog_(watchdog), slot_(slot) {
  slot_.store(name, std::memory_order_relaxed);
}

Watchdog::Mark::~Mark() {
  slot_.store(nullptr, std::memory_order_relaxed);
  watchdog_.beat();
}

std::string Watchdog::describe(double idle_seconds) const {
  const char* collective = collective_.load(std::memory_order_relaxed);
  const char* call = backend_call_.load(std::memory_order_relaxed);
  const int step = step_.load(std::memory_order_relaxed);
  std::string where;
  if (collective != nullptr) where = fmt::format("waiting in {}", collective);
  if (call != nullptr) where += fmt::format("{}inside the backend's {}", where.empty() ? "" : " ", call);
  if (where.empty()) where = "outside any collective or backend call";
  return fmt::format("{}no progress for {:.1f} s (--step-timeout {:g} s): phase \"{}\"{}, {}; ending the job",
                     rank_prefix_, idle_seconds, timeout_, phase_.load(std::memory_order_relaxed),
                     step >= 0 ? fmt::format(", step {}", step) : "", where);
}

void Watchdog::watch() {
  using Clock = std::chrono::steady_clock;
  using Seconds = std::chrono::duration<double>;
  // A few checks per timeout, at most one a second: the message comes at most a quarter of the
  // timeout late, and a long timeout costs one wake-up a second.
  const Seconds poll(std::min(1.0, timeout_ / 4));
  uint64_t seen = beats_.load(std::memory_order_relaxed);
  double idle = 0.0;
  Clock::time_point last = Clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, poll, [this] { return stopping_; })) {
    const Clock::time_point now = Clock::now();
    const uint64_t beats = beats_.load(std::memory_order_relaxed);
    // One check adds at most two polls of idle time: a process stopped as a whole (Ctrl-Z, then
    // fg) has not hung, and its waiting peers' watchdogs judge it on their own clocks.
    idle = beats != seen ? 0.0 : idle + std::min(Seconds(now - last).count(), 2 * poll.count());
    seen = beats;
    last = now;
    if (idle < timeout_) continue;
    const std::string message = describe(idle);
    lock.unlock();
    stop_(message);
    return;
  }
}

}  // namespace llmc
