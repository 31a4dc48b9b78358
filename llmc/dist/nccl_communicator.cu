#include "llmc/dist/nccl_communicator.h"

#include <fmt/format.h>
#include <stdexcept>
#include <string>

namespace llmc {

namespace {

void check_cuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw std::runtime_error(fmt::format("CUDA {} failed: {}", what, cudaGetErrorString(rc)));
}

void check_nccl(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) throw std::runtime_error(fmt::format("NCCL {} failed: {}", what, ncclGetErrorString(rc)));
}

}  // namespace

NcclCommunicator::NcclCommunicator(Communicator& host, cudaStream_t stream)
    : host_(host), stream_(stream), rank_(host.rank()), world_size_(host.world_size()) {
  ncclUniqueId id;
  if (rank_ == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  host_.broadcast(&id, sizeof id, 0);
  check_nccl(ncclCommInitRank(&comm_, world_size_, id, rank_), "ncclCommInitRank");
  try {
    check_cuda(cudaMalloc(&scalar_, sizeof(double)), "cudaMalloc");
  } catch (...) {
    ncclCommDestroy(comm_);
    throw;
  }
  // ncclCommAbort is NCCL's way to end collectives that will never complete, from another thread.
  abort_hook_ = abort_hooks().add([comm = comm_] { ncclCommAbort(comm); });
}

NcclCommunicator::~NcclCommunicator() {
  // Before the communicator goes: remove() waits for a running abort, so the hook never sees a
  // destroyed communicator.
  abort_hooks().remove(abort_hook_);
  cudaFree(scalar_);
  ncclCommDestroy(comm_);
}

void NcclCommunicator::all_reduce_sum(float* buf, size_t n) { all_reduce_sum(buf, n, ncclFloat); }

void NcclCommunicator::reduce_scatter_sum(const float* send, float* recv, size_t recv_count) {
  reduce_scatter_sum(send, recv, recv_count, ncclFloat);
}

void NcclCommunicator::all_gather(const float* send, float* recv, size_t send_count) {
  all_gather(send, recv, send_count, ncclFloat);
}

void NcclCommunicator::all_reduce_sum(void* buf, size_t n, ncclDataType_t type) { all_reduce_sum(buf, n, type, stream_); }

void NcclCommunicator::reduce_scatter_sum(const void* send, void* recv, size_t recv_count, ncclDataType_t type) {
  check_nccl(ncclReduceScatter(send, recv, recv_count, type, ncclSum, comm_, stream_), "ncclReduceScatter");
}

void NcclCommunicator::all_reduce_sum(void* buf, size_t n, ncclDataType_t type, cudaStream_t stream) {
  check_nccl(ncclAllReduce(buf, buf, n, type, ncclSum, comm_, stream), "ncclAllReduce");
}

void NcclCommunicator::reduce_sum(void* buf, size_t n, ncclDataType_t type, int root, cudaStream_t stream) {
  check_root(root, "reduce");
  check_nccl(ncclReduce(buf, buf, n, type, ncclSum, root, comm_, stream), "ncclReduce");
}

void NcclCommunicator::group_start() { check_nccl(ncclGroupStart(), "ncclGroupStart"); }

void NcclCommunicator::group_end() { check_nccl(ncclGroupEnd(), "ncclGroupEnd"); }

void NcclCommunicator::all_gather(const void* send, void* recv, size_t send_count, ncclDataType_t type) {
  check_nccl(ncclAllGather(send, recv, send_count, type, comm_, stream_), "ncclAllGather");
}

void NcclCommunicator::broadcast(void* buf, size_t bytes, int root) {
  check_root(root, "broadcast");
  check_nccl(ncclBroadcast(buf, buf, bytes, ncclUint8, root, comm_, stream_), "ncclBroadcast");
}

double NcclCommunicator::reduce_scalar(double value, ncclRedOp_t op) {
  check_cuda(cudaMemcpyAsync(scalar_, &value, sizeof value, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
  check_nccl(ncclAllReduce(scalar_, scalar_, 1, ncclDouble, op, comm_, stream_), "ncclAllReduce");
  double result = 0.0;
  check_cuda(cudaMemcpyAsync(&result, scalar_, sizeof result, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  return result;
}

double NcclCommunicator::all_reduce_sum(double value) { return reduce_scalar(value, ncclSum); }

double NcclCommunicator::all_reduce_max(double value) { return reduce_scalar(value, ncclMax); }

// Summed in double and rounded once: at least as accurate as a float sum over the ranks.
float NcclCommunicator::all_reduce_sum(float value) { return float(all_reduce_sum(double(value))); }

void NcclCommunicator::barrier() {
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  host_.barrier();
}

}  // namespace llmc
