// A CUDA graph on the emulated GPU, as stream capture records it (stream_capture.h): its nodes in
// the order they were captured, each with the earlier nodes it depends on. A graph holds only work
// that was issued to streams, so instantiating it copies the nodes and launching it queues them.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <vector>

namespace emu {

struct GraphNode {
  std::function<void()> run;            // the captured work, or empty for an external event wait
  cudaEvent_t external_wait = nullptr;  // cudaEventWaitExternal: each launch waits for the event
  std::vector<size_t> deps;             // indices of earlier nodes
};

struct GraphNodes {
  std::vector<GraphNode> nodes;
  // A library call whose host waits for its own work (the emulated NCCL's exchange between ranks)
  // was captured: each launch then runs the graph before it returns.
  bool host_waits = false;
};

}  // namespace emu

struct CUgraph_st {
  emu::GraphNodes graph;
};
struct CUgraphExec_st {
  emu::GraphNodes graph;
};

namespace emu {
// A graph cudaStreamEndCapture returns: known to the graph calls until cudaGraphDestroy.
void graph_created(cudaGraph_t graph);

}  // namespace emu
