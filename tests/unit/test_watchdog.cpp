// The watchdog of --step-timeout (llmc/train/watchdog.h) with its stop action replaced by a
// recorder, and the abort hooks (llmc/dist/abort_hooks.h). Timeouts are fractions of a second; the
// waits for a firing allow seconds, so a loaded machine only makes the tests slower.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "llmc/dist/abort_hooks.h"
#include "llmc/train/watched_communicator.h"
#include "llmc/train/watchdog.h"
#include "tests/unit/test_support.h"

using test_support::contains;
using test_support::ends_with;
using test_support::starts_with;

namespace {

using std::chrono::milliseconds;

// Collects the messages of a watchdog's stop action.
class StopRecorder {
 public:
  llmc::Watchdog::StopAction action() {
    return [this](const std::string& message) {
      const std::lock_guard<std::mutex> lock(mutex_);
      messages_.push_back(message);
      changed_.notify_all();
    };
  }
  // Waits up to `limit` for at least one message; returns all of them.
  std::vector<std::string> wait_for_first(std::chrono::seconds limit) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, limit, [this] { return !messages_.empty(); });
    return messages_;
  }
  std::vector<std::string> messages() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return messages_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> messages_;
};

}  // namespace

TEST_CASE("watchdog: no firing while beats keep coming, for several timeouts; firing once they stop") {
  StopRecorder stops;
  llmc::Watchdog watchdog(0.5, "", stops.action());
  watchdog.enter("step", 0);
  const auto until = std::chrono::steady_clock::now() + milliseconds(2000);
  for (int step = 1; std::chrono::steady_clock::now() < until; ++step) {
    std::this_thread::sleep_for(milliseconds(10));
    watchdog.enter("step", step);
  }
  CHECK(stops.messages().empty());
  const std::vector<std::string> fired = stops.wait_for_first(std::chrono::seconds(10));
  REQUIRE(fired.size() == 1);
  CHECK(contains(fired[0], "(--step-timeout 0.5 s): phase \"step\", step "));
}

TEST_CASE("watchdog: the message says the phase, the step, the collective and the backend call") {
  StopRecorder stops;
  llmc::Watchdog watchdog(0.2, "rank 1: ", stops.action());
  watchdog.enter("evaluation", 7);
  const llmc::Watchdog::InBackendCall call(watchdog, "forward_losses");
  const llmc::Watchdog::InCollective collective(watchdog, "all_reduce_sum");
  const std::vector<std::string> fired = stops.wait_for_first(std::chrono::seconds(10));
  REQUIRE(fired.size() == 1);
  CHECK_MESSAGE(starts_with(fired[0], "rank 1: no progress for "), fired[0]);
  CHECK_MESSAGE(ends_with(fired[0], " s (--step-timeout 0.2 s): phase \"evaluation\", step 7, waiting in all_reduce_sum "
                                    "inside the backend's forward_losses; ending the job"),
                fired[0]);
  // The stop action runs once: a watchdog that fired watches no more.
  std::this_thread::sleep_for(milliseconds(600));
  CHECK(stops.messages().size() == 1);
}

TEST_CASE("watchdog: the marks end with their scope, and each is said only while it holds") {
  StopRecorder stops;
  llmc::Watchdog watchdog(0, "", stops.action());
  CHECK(ends_with(watchdog.describe(1.0), "phase \"start-up\", outside any collective or backend call; ending the job"));
  watchdog.enter("checkpoint", 12);
  {
    const llmc::Watchdog::InCollective collective(watchdog, "barrier");
    CHECK(watchdog.describe(1.0) ==
          "no progress for 1.0 s (--step-timeout 0 s): phase \"checkpoint\", step 12, waiting in barrier; ending the job");
  }
  {
    const llmc::Watchdog::InBackendCall call(watchdog, "get_parameters");
    CHECK(ends_with(watchdog.describe(1.0), "step 12, inside the backend's get_parameters; ending the job"));
  }
  CHECK(ends_with(watchdog.describe(1.0), "step 12, outside any collective or backend call; ending the job"));
}

TEST_CASE("watchdog: timeout 0 never fires") {
  StopRecorder stops;
  llmc::Watchdog watchdog(0, "", stops.action());
  const llmc::Watchdog::InCollective collective(watchdog, "all_reduce_max");
  std::this_thread::sleep_for(milliseconds(500));
  CHECK(stops.messages().empty());
}

TEST_CASE("abort hooks: run in the order added; a removed hook no longer runs") {
  llmc::AbortHooks hooks;
  std::vector<int> order;
  const llmc::AbortHooks::Id first = hooks.add([&] { order.push_back(1); });
  const llmc::AbortHooks::Id second = hooks.add([&] { order.push_back(2); });
  hooks.add([&] { order.push_back(3); });
  CHECK(first != second);
  hooks.run();
  CHECK(order == std::vector<int>{1, 2, 3});
  hooks.remove(second);
  hooks.remove(second);  // an id removed twice, or never added, is ignored
  order.clear();
  hooks.run();
  CHECK(order == std::vector<int>{1, 3});
}

TEST_CASE("abort hooks: remove() waits for a hook that is running") {
  llmc::AbortHooks hooks;
  std::atomic<bool> started{false}, finished{false};
  const llmc::AbortHooks::Id id = hooks.add([&] {
    started = true;
    std::this_thread::sleep_for(milliseconds(200));
    finished = true;
  });
  std::thread aborting([&] { hooks.run(); });
  while (!started) std::this_thread::yield();
  hooks.remove(id);
  CHECK(finished);
  aborting.join();
}

namespace {

// A communicator of one rank that records which of its methods ran (the non-blocking ones have
// blocking defaults in Communicator, so a decorator that forgot to forward them would still work,
// only without overlap).
class CallRecorder final : public llmc::Communicator {
 public:
  std::vector<std::string> calls;
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void all_reduce_sum(float*, size_t) override { calls.emplace_back("all_reduce_sum"); }
  double all_reduce_sum(double value) override { return value; }
  float all_reduce_sum(float value) override { return value; }
  double all_reduce_max(double value) override { return value; }
  void reduce_scatter_sum(const float*, float*, size_t) override { calls.emplace_back("reduce_scatter_sum"); }
  void all_gather(const float*, float*, size_t) override { calls.emplace_back("all_gather"); }
  void broadcast(void*, size_t, int) override { calls.emplace_back("broadcast"); }
  void barrier() override { calls.emplace_back("barrier"); }
  void start_all_reduce_sum(float*, size_t) override { calls.emplace_back("start_all_reduce_sum"); }
  void start_reduce_sum(float*, size_t, int) override { calls.emplace_back("start_reduce_sum"); }
  void progress() override { calls.emplace_back("progress"); }
  void wait_all() override { calls.emplace_back("wait_all"); }
};

}  // namespace

TEST_CASE("watched communicator: the non-blocking sums reach the wrapped communicator's own") {
  StopRecorder stops;
  llmc::Watchdog watchdog(0.0, "", stops.action());
  CallRecorder inner;
  llmc::WatchedCommunicator watched(inner, watchdog);
  float x[4] = {};
  watched.start_all_reduce_sum(x, 4);
  watched.start_reduce_sum(x, 4, 0);
  watched.progress();
  watched.wait_all();
  CHECK(inner.calls == std::vector<std::string>{"start_all_reduce_sum", "start_reduce_sum", "progress", "wait_all"});
}
