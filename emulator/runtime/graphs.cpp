// The graph calls of the emulated CUDA runtime (graph.h): a captured graph is instantiated by
// copying its nodes, and launched by queuing them on the launch stream, each as the work it was
// captured from. The nodes run in capture order, or under LLMC_EMU_STREAMS=seeded in an order drawn
// from the seed among those their dependencies allow, so that a fork or a join missing from the
// capture reads stale memory as a GPU running the branches side by side may.
#include <cuda_runtime.h>

#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "emulator/runtime/block_runner.h"
#include "emulator/runtime/graph.h"
#include "emulator/runtime/runtime_state.h"
#include "emulator/runtime/stream_capture.h"
#include "emulator/runtime/stream_order.h"

namespace emu {
namespace {

std::mutex graphs_mutex;
std::set<cudaGraph_t> live_graphs;
std::set<cudaGraphExec_t> live_execs;
uint64_t launches = 0;

bool graph_live(cudaGraph_t g) {
  std::lock_guard<std::mutex> lock(graphs_mutex);
  return live_graphs.count(g) != 0;
}

// The order the launch queues the nodes in.
std::vector<size_t> launch_order(const GraphNodes& g, uint64_t launch) {
  std::vector<size_t> order;
  const size_t n = g.nodes.size();
  if (stream_order() != StreamOrder::seeded) {
    for (size_t i = 0; i < n; ++i) order.push_back(i);
    return order;
  }
  std::mt19937_64 random(emulator_seed() ^ (0x9a9f5eedull + launch));
  std::vector<size_t> waiting(n);
  std::vector<std::vector<size_t>> users(n);
  for (size_t i = 0; i < n; ++i) {
    waiting[i] = g.nodes[i].deps.size();
    for (size_t d : g.nodes[i].deps) users[d].push_back(i);
  }
  std::vector<size_t> ready;
  for (size_t i = 0; i < n; ++i)
    if (waiting[i] == 0) ready.push_back(i);
  while (!ready.empty()) {
    const size_t pick = random() % ready.size();
    const size_t node = ready[pick];
    ready.erase(ready.begin() + long(pick));
    order.push_back(node);
    for (size_t u : users[node])
      if (--waiting[u] == 0) ready.push_back(u);
  }
  return order;
}

}  // namespace

void graph_created(cudaGraph_t graph) {
  std::lock_guard<std::mutex> lock(graphs_mutex);
  live_graphs.insert(graph);
}

}  // namespace emu

using namespace emu;

extern "C" {

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  if (!exec) return fail(cudaErrorInvalidValue, "cudaGraphInstantiate: a null pointer for the executable graph");
  if (!graph_live(graph))
    return fail(cudaErrorInvalidValue, "cudaGraphInstantiate: graph " + pointer_text(graph) +
                                           " was not captured or is destroyed");
  if (flags & ~static_cast<unsigned long long>(cudaGraphInstantiateFlagUpload))
    return fail(cudaErrorInvalidValue, "cudaGraphInstantiate: flags " + std::to_string(flags) +
                                           " (the emulated GPU takes 0 or cudaGraphInstantiateFlagUpload)");
  *exec = new CUgraphExec_st{graph->graph};
  std::lock_guard<std::mutex> lock(graphs_mutex);
  live_execs.insert(*exec);
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  uint64_t launch = 0;
  {
    std::lock_guard<std::mutex> lock(graphs_mutex);
    if (!live_execs.count(exec))
      return fail(cudaErrorInvalidValue, "cudaGraphLaunch: executable graph " + pointer_text(exec) +
                                             " was not instantiated or is destroyed");
    launch = ++launches;
  }
  if (cudaError_t e = check_stream("cudaGraphLaunch", stream)) return e;
  if (cudaError_t e = sticky_error()) return e;
  for (size_t i : launch_order(exec->graph, launch)) {
    const GraphNode& node = exec->graph.nodes[i];
    const cudaError_t e = node.run ? issue_work(stream, node.run)
                                   : cudaStreamWaitEvent(stream, node.external_wait, cudaEventWaitExternal);
    if (e != cudaSuccess) return e;
  }
  if (exec->graph.host_waits && !capture_host_waits(stream)) finish_stream(stream);
  return sticky_error();
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  {
    std::lock_guard<std::mutex> lock(graphs_mutex);
    if (!live_execs.erase(exec))
      return fail(cudaErrorInvalidValue, "cudaGraphExecDestroy: executable graph " + pointer_text(exec) +
                                             " was not instantiated or is destroyed");
  }
  delete exec;  // queued launches hold copies of the nodes' work
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  {
    std::lock_guard<std::mutex> lock(graphs_mutex);
    if (!live_graphs.erase(graph))
      return fail(cudaErrorInvalidValue, "cudaGraphDestroy: graph " + pointer_text(graph) +
                                             " was not captured or is destroyed");
  }
  delete graph;
  return cudaSuccess;
}

}  // extern "C"
