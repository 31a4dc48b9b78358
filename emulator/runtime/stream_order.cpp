// The queue of work on the emulated GPU and the orders it may run in (stream_order.h). Every piece
// of work gets an id in issue order; its prerequisites are the earlier work of its stream and the
// ids in `deps` (event waits, the legacy stream's implicit waits). Prerequisites always have
// smaller ids, so no order can deadlock.
#include "emulator/runtime/stream_order.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "emulator/runtime/block_runner.h"
#include "emulator/runtime/device_memory.h"

namespace emu {
namespace {

struct Work {
  uint64_t id;
  std::function<void()> run;
  std::vector<uint64_t> deps;  // ids of other streams' work that must have run first
};

struct Queue {
  bool blocking;    // the legacy default stream and streams created without cudaStreamNonBlocking
  uint64_t serial;  // creation order: the seed's draws do not depend on where handles live
  std::deque<Work> pending;
};

class Scheduler {
 public:
  explicit Scheduler(StreamOrder order) : order_(order), random_(emulator_seed() ^ 0x5eed5eed5eedull) {
    queues_[nullptr] = Queue{true, 0, {}};
  }

  void created(cudaStream_t s, bool blocking) {
    std::lock_guard<std::mutex> lock(mutex_);
    queues_[s] = Queue{blocking, ++streams_created_, {}};
  }

  void destroyed(cudaStream_t s) {
    std::lock_guard<std::mutex> lock(mutex_);
    finish_queue(s);
    queues_.erase(s);
  }

  void enqueue(cudaStream_t s, std::function<void()> run) {
    std::lock_guard<std::mutex> lock(mutex_);
    add(s, std::move(run), {});
  }

  void record(cudaEvent_t e, cudaStream_t s, std::function<void()> on_complete) {
    std::lock_guard<std::mutex> lock(mutex_);
    last_record_[e] = add(s, std::move(on_complete), {});
  }

  void wait(cudaStream_t s, cudaEvent_t e) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = last_record_.find(e);
    if (it != last_record_.end() && where_.count(it->second)) add(s, [] {}, {it->second});
  }

  void event_destroyed(cudaEvent_t e) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = last_record_.find(e);
    if (it == last_record_.end()) return;
    run_through(it->second);
    last_record_.erase(it);
  }

  void finish_stream(cudaStream_t s) {
    std::lock_guard<std::mutex> lock(mutex_);
    finish_queue(s);
  }

  void finish_event(cudaEvent_t e) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = last_record_.find(e);
    if (it != last_record_.end()) run_through(it->second);
  }

  void finish_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<uint64_t> lasts;
    for (auto& [s, q] : queues_)
      if (!q.pending.empty()) lasts.push_back(q.pending.back().id);
    run_through(lasts);
  }

  bool stream_idle(cudaStream_t s) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue(s).pending.empty()) return true;
    finish_queue(s);
    return false;
  }

  bool event_done(cudaEvent_t e) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = last_record_.find(e);
    if (it == last_record_.end() || !where_.count(it->second)) return true;
    run_through(it->second);
    return false;
  }

 private:
  Queue& queue(cudaStream_t s) {
    auto it = queues_.find(s);
    if (it == queues_.end()) {
      std::fprintf(stderr, "emulated GPU: work on stream %p, which the runtime does not know\n", static_cast<void*>(s));
      std::abort();
    }
    return it->second;
  }

  uint64_t add(cudaStream_t s, std::function<void()> run, std::vector<uint64_t> deps) {
    Queue& q = queue(s);
    // The legacy default stream waits for every blocking stream's work, and they wait for it.
    if (s == nullptr) {
      for (auto& [other, oq] : queues_)
        if (other != nullptr && oq.blocking && !oq.pending.empty()) deps.push_back(oq.pending.back().id);
    } else if (q.blocking) {
      Queue& legacy = queue(nullptr);
      if (!legacy.pending.empty()) deps.push_back(legacy.pending.back().id);
    }
    const uint64_t id = ++last_id_;
    q.pending.push_back(Work{id, std::move(run), std::move(deps)});
    where_[id] = s;
    if (order_ == StreamOrder::issue) {
      run_through(id);
    } else if (order_ == StreamOrder::seeded) {
      // A GPU runs ahead of the host by a varying amount: on average one piece of ready work per
      // piece issued.
      const DeviceWorkBatch batch;
      while (random_() % 2 == 0 && run_one_ready(nullptr)) {
      }
    }
    return id;
  }

  void finish_queue(cudaStream_t s) {
    Queue& q = queue(s);
    if (!q.pending.empty()) run_through(q.pending.back().id);
  }

  // Runs the front of `s`'s queue, whose prerequisites have all run.
  void run_front(cudaStream_t s) {
    Queue& q = queue(s);
    Work w = std::move(q.pending.front());
    q.pending.pop_front();
    where_.erase(w.id);
    w.run();
  }

  void run_through(uint64_t id) { run_through(std::vector<uint64_t>{id}); }

  // Runs the given work and everything it needs, in the mode's order.
  void run_through(const std::vector<uint64_t>& targets) {
    const DeviceWorkBatch batch;
    if (order_ == StreamOrder::seeded) {
      std::unordered_set<uint64_t> needed;
      for (uint64_t id : targets) add_needed(id, needed);
      while (!needed.empty())
        if (!run_one_ready(&needed)) {
          std::fprintf(stderr, "emulated GPU: queued work waits for work that cannot run\n");
          std::abort();
        }
      return;
    }
    for (uint64_t id : targets) run_latest(id);
  }

  // Latest order: before each piece of the target's stream, the other streams' work it waits for,
  // and nothing else.
  void run_latest(uint64_t id) {
    auto it = where_.find(id);
    if (it == where_.end()) return;
    const cudaStream_t s = it->second;
    for (;;) {
      Work& front = queue(s).pending.front();
      const uint64_t front_id = front.id;
      const std::vector<uint64_t> deps = front.deps;
      for (uint64_t d : deps) run_latest(d);
      run_front(s);
      if (front_id == id) return;
    }
  }

  // Adds `id`, the earlier pending work of its stream and their prerequisites to `needed`.
  void add_needed(uint64_t id, std::unordered_set<uint64_t>& needed) {
    auto it = where_.find(id);
    if (it == where_.end() || needed.count(id)) return;
    for (const Work& w : queue(it->second).pending) {
      if (w.id > id) break;
      if (!needed.insert(w.id).second) continue;
      for (uint64_t d : w.deps) add_needed(d, needed);
    }
  }

  // Runs one piece of work chosen by the seed among the ready ones (the front of a queue whose
  // prerequisites have run), restricted to `among` when given; false when none is ready.
  bool run_one_ready(std::unordered_set<uint64_t>* among) {
    std::vector<std::pair<uint64_t, cudaStream_t>> ready;  // (serial, stream)
    for (auto& [s, q] : queues_) {
      if (q.pending.empty()) continue;
      const Work& w = q.pending.front();
      if (among && !among->count(w.id)) continue;
      bool deps_done = true;
      for (uint64_t d : w.deps) deps_done = deps_done && !where_.count(d);
      if (deps_done) ready.emplace_back(q.serial, s);
    }
    if (ready.empty()) return false;
    std::sort(ready.begin(), ready.end());
    const cudaStream_t s = ready[random_() % ready.size()].second;
    if (among) among->erase(queue(s).pending.front().id);
    run_front(s);
    return true;
  }

  const StreamOrder order_;
  std::mt19937_64 random_;
  std::mutex mutex_;
  std::map<cudaStream_t, Queue> queues_;  // the legacy default stream under nullptr
  std::unordered_map<uint64_t, cudaStream_t> where_;  // pending work -> its stream
  std::map<cudaEvent_t, uint64_t> last_record_;
  uint64_t last_id_ = 0;
  uint64_t streams_created_ = 0;
};

Scheduler& scheduler() {
  static Scheduler* s = new Scheduler(stream_order());  // never destroyed: work may be freed at exit
  return *s;
}

}  // namespace

StreamOrder stream_order() {
  static const StreamOrder order = [] {
    const char* env = std::getenv("LLMC_EMU_STREAMS");
    if (!env || std::strcmp(env, "latest") == 0) return StreamOrder::latest;
    if (std::strcmp(env, "seeded") == 0) return StreamOrder::seeded;
    if (std::strcmp(env, "issue") == 0) return StreamOrder::issue;
    std::fprintf(stderr, "emulated GPU: LLMC_EMU_STREAMS is '%s'; it must be latest, seeded or issue\n", env);
    std::exit(2);
  }();
  return order;
}

void stream_created(cudaStream_t stream, bool blocking) { scheduler().created(stream, blocking); }
void stream_destroyed(cudaStream_t stream) { scheduler().destroyed(stream); }
void enqueue(cudaStream_t stream, std::function<void()> work) { scheduler().enqueue(stream, std::move(work)); }
void record_event(cudaEvent_t event, cudaStream_t stream, std::function<void()> on_complete) {
  scheduler().record(event, stream, std::move(on_complete));
}
void wait_event(cudaStream_t stream, cudaEvent_t event) { scheduler().wait(stream, event); }
void event_destroyed(cudaEvent_t event) { scheduler().event_destroyed(event); }
void finish_stream(cudaStream_t stream) { scheduler().finish_stream(stream); }
void finish_event(cudaEvent_t event) { scheduler().finish_event(event); }
void finish_all() { scheduler().finish_all(); }
bool stream_idle(cudaStream_t stream) { return scheduler().stream_idle(stream); }
bool event_done(cudaEvent_t event) { return scheduler().event_done(event); }

}  // namespace emu
