// NCCL on the emulated GPU: the calls the project makes, against the toolkit's own nccl.h, with one
// process per emulated GPU and MPI between the processes (one rank needs no MPI at all). A
// collective is checked when it is called, queued on its stream (stream_order.h) and run at once,
// after the work it waits for; other streams' work stays queued. When it runs, it first compares
// what every rank asked for (the collective, count, type, operation and root): ranks that disagree
// fail the CUDA context (a sticky error) with a message naming both sides, where real NCCL would
// hang or corrupt memory. The data then moves through host copies: every rank gathers every
// contribution and reduces them in rank order in fp32 (fp64 for doubles), rounding once to the
// type, so that all ranks hold bit-identical results. A group (ncclGroupStart/End) only has to be
// closed.
#include <cuda_bf16.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "emulator/runtime/device_memory.h"
#include "emulator/runtime/stream_capture.h"
#include "emulator/runtime/stream_order.h"

struct ncclComm {
  int rank, nranks;
  MPI_Comm mpi;  // MPI_COMM_NULL for one rank
  bool aborted;
};

namespace emu {
namespace {

constexpr char kIdTag[] = "emulated NCCL id";
thread_local int group_depth = 0;

std::mutex& comms_mutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}
std::set<ncclComm_t>& live_comms() {
  static std::set<ncclComm_t>* s = new std::set<ncclComm_t>();
  return *s;
}
bool alive(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(comms_mutex());
  return live_comms().count(comm) != 0;
}

ncclResult_t fail(ncclResult_t result, const std::string& what) {
  std::fprintf(stderr, "emulated NCCL: %s (%s)\n", what.c_str(), ncclGetErrorString(result));
  return result;
}

size_t type_bytes(ncclDataType_t t) {
  switch (t) {
    case ncclUint8: return 1;
    case ncclBfloat16: return 2;
    case ncclFloat32: return 4;
    case ncclFloat64: return 8;
    default: return 0;  // not emulated
  }
}
const char* type_name(ncclDataType_t t) {
  switch (t) {
    case ncclUint8: return "uint8";
    case ncclBfloat16: return "bf16";
    case ncclFloat32: return "fp32";
    case ncclFloat64: return "fp64";
    default: return "an unemulated type";
  }
}

enum class Kind { all_reduce, reduce, reduce_scatter, all_gather, broadcast };
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::all_reduce: return "ncclAllReduce";
    case Kind::reduce: return "ncclReduce";
    case Kind::reduce_scatter: return "ncclReduceScatter";
    case Kind::all_gather: return "ncclAllGather";
    default: return "ncclBroadcast";
  }
}

// What one rank asked for; every rank's must be the same.
struct Request {
  int64_t kind, count, type, op, root;
  bool operator!=(const Request& o) const {
    return kind != o.kind || count != o.count || type != o.type || op != o.op || root != o.root;
  }
};
std::string describe(const Request& r) {
  return std::string(kind_name(Kind(r.kind))) + " of " + std::to_string(r.count) + " " +
         type_name(ncclDataType_t(r.type)) + " (op " + std::to_string(r.op) + ", root " + std::to_string(r.root) + ")";
}

// Every rank's `bytes` bytes at `mine`, in rank order.
std::vector<unsigned char> gather(const ncclComm& c, const void* mine, size_t bytes) {
  std::vector<unsigned char> all(bytes * size_t(c.nranks));
  if (c.nranks == 1) {
    std::memcpy(all.data(), mine, bytes);
    return all;
  }
  // MPI counts are ints: large messages go as chunks of at most 1 GiB per rank.
  const size_t chunk = size_t(1) << 30;
  std::vector<unsigned char> part(std::min(bytes, chunk) * size_t(c.nranks));
  for (size_t at = 0; at < bytes; at += chunk) {
    const size_t n = std::min(chunk, bytes - at);
    MPI_Allgather(static_cast<const unsigned char*>(mine) + at, int(n), MPI_BYTE, part.data(), int(n), MPI_BYTE,
                  c.mpi);
    for (int r = 0; r < c.nranks; ++r) std::memcpy(&all[size_t(r) * bytes + at], &part[size_t(r) * n], n);
  }
  return all;
}

double element(const unsigned char* p, ncclDataType_t t, size_t i) {
  switch (t) {
    case ncclBfloat16: return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(p)[i]);
    case ncclFloat32: return reinterpret_cast<const float*>(p)[i];
    case ncclFloat64: return reinterpret_cast<const double*>(p)[i];
    default: return p[i];
  }
}
void set_element(void* p, ncclDataType_t t, size_t i, double v) {
  switch (t) {
    case ncclBfloat16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(float(v)); break;
    case ncclFloat32: static_cast<float*>(p)[i] = float(v); break;
    case ncclFloat64: static_cast<double*>(p)[i] = v; break;
    default: static_cast<unsigned char*>(p)[i] = static_cast<unsigned char>(v);
  }
}

// out[i] = the ranks' contributions (each `stride` elements apart in `all`, from `offset`)
// combined by `op` in rank order, in Acc: fp32 for fp32 and bf16, as their reductions accumulate,
// fp64 for doubles.
template <class Acc>
void reduce_into(void* out, const std::vector<unsigned char>& all, size_t stride, size_t offset, size_t count,
                 ncclDataType_t t, ncclRedOp_t op, int nranks) {
  const size_t e = type_bytes(t);
  for (size_t i = 0; i < count; ++i) {
    Acc acc = Acc(element(all.data(), t, offset + i));
    for (int r = 1; r < nranks; ++r) {
      const Acc v = Acc(element(all.data() + size_t(r) * stride * e, t, offset + i));
      acc = op == ncclMax ? std::max(acc, v) : acc + v;
    }
    set_element(out, t, i, double(acc));
  }
}
void reduce_into(void* out, const std::vector<unsigned char>& all, size_t stride, size_t offset, size_t count,
                 ncclDataType_t t, ncclRedOp_t op, int nranks) {
  if (t == ncclFloat64)
    reduce_into<double>(out, all, stride, offset, count, t, op, nranks);
  else
    reduce_into<float>(out, all, stride, offset, count, t, op, nranks);
}

// The checks every collective makes, then the agreement of the ranks, then the data.
ncclResult_t collective(Kind kind, const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  const std::string call = kind_name(kind);
  if (!alive(comm)) return fail(ncclInvalidArgument, call + ": a communicator that is null or destroyed");
  ncclComm& c = *comm;
  if (c.aborted) return fail(ncclInvalidUsage, call + ": the communicator was aborted");
  if (type_bytes(type) == 0) return fail(ncclInvalidArgument, call + ": data type " + std::to_string(int(type)) +
                                                                  " is not emulated (uint8, bf16, fp32, fp64 are)");
  const bool reduces = kind == Kind::all_reduce || kind == Kind::reduce || kind == Kind::reduce_scatter;
  if (reduces && op != ncclSum && op != ncclMax)
    return fail(ncclInvalidArgument, call + ": only ncclSum and ncclMax are emulated");
  if ((kind == Kind::reduce || kind == Kind::broadcast) && (root < 0 || root >= c.nranks))
    return fail(ncclInvalidArgument, call + ": root " + std::to_string(root) + " of " + std::to_string(c.nranks));
  if (!valid_stream(stream)) return fail(ncclInvalidArgument, call + ": no such stream");
  if (context_error() != cudaSuccess) return fail(ncclUnhandledCudaError, call + ": the CUDA context has an error");
  // What each side holds, in elements: reduce-scatter sends nranks chunks, all-gather receives them.
  const size_t e = type_bytes(type), n = size_t(c.nranks);
  const size_t send_count = kind == Kind::reduce_scatter ? count * n : count;
  const size_t recv_count = kind == Kind::all_gather ? count * n : count;
  const bool sends = kind != Kind::broadcast || c.rank == root;
  const bool receives = kind != Kind::reduce || c.rank == root;
  const struct {
    const char* name;
    const void* p;
    size_t bytes;
    bool used;
  } sides[] = {{"send buffer", send, send_count * e, sends}, {"receive buffer", recv, recv_count * e, receives}};
  for (const auto& s : sides)
    if (s.used && s.bytes > 0 && !inside_device_allocation(s.p, s.bytes)) {
      char text[200];
      std::snprintf(text, sizeof text, "%s on rank %d: the %s %p (+%zu bytes) is not inside one device allocation",
                    call.c_str(), c.rank, s.name, s.p, s.bytes);
      library_fault(cudaErrorIllegalAddress, text);
      return ncclUnhandledCudaError;
    }
  const Request mine{int64_t(kind), int64_t(count), int64_t(type), reduces ? int64_t(op) : -1,
                     kind == Kind::reduce || kind == Kind::broadcast ? int64_t(root) : -1};
  const cudaError_t issued = device_work(stream, [=] {
    // Alive: ncclCommDestroy waits for queued work. A captured collective runs when its graph is
    // launched, so, as with NCCL, no graph holding one may be launched after its ncclCommDestroy.
    const ncclComm& c = *comm;
    if (c.aborted) return;
    const std::vector<unsigned char> asked = gather(c, &mine, sizeof mine);
    for (int r = 0; r < c.nranks; ++r) {
      Request theirs;
      std::memcpy(&theirs, &asked[size_t(r) * sizeof(Request)], sizeof theirs);
      if (theirs != mine) {
        library_fault(cudaErrorLaunchFailure, "emulated NCCL: invalid usage: rank " + std::to_string(c.rank) +
                                                  " called " + describe(mine) + ", rank " + std::to_string(r) + " " +
                                                  describe(theirs));
        return;
      }
    }
    with_device_memory({send, recv}, [&] {
      // Broadcast: only the root's buffer counts, the others send zeros of the same size.
      std::vector<unsigned char> zeros(sends ? 0 : send_count * e, 0);
      const std::vector<unsigned char> all = gather(c, sends ? send : zeros.data(), send_count * e);
      switch (kind) {
        case Kind::all_reduce:
          reduce_into(recv, all, count, 0, count, type, op, c.nranks);
          break;
        case Kind::reduce:
          if (receives) reduce_into(recv, all, count, 0, count, type, op, c.nranks);
          break;
        case Kind::reduce_scatter:
          reduce_into(recv, all, count * n, size_t(c.rank) * count, count, type, op, c.nranks);
          break;
        case Kind::all_gather:
          std::memcpy(recv, all.data(), all.size());
          break;
        case Kind::broadcast:
          std::memcpy(recv, &all[size_t(root) * count * e], count * e);
          break;
      }
    });
  });
  // The exchange blocks the calling host thread until every rank has reached it, so it cannot wait
  // for a later synchronisation: a rank's host may first enter a host-side MPI call that the other
  // ranks' hosts can reach only after this collective. It runs now, after the work it waits for,
  // as if the device had caught up; ranks that call collectives in the same order (as NCCL
  // requires) then always meet. Captured into a graph, it runs when the graph is launched.
  if (issued != cudaSuccess) return fail(ncclUnhandledCudaError, call + ": " + cudaGetErrorString(issued));
  if (!capture_host_waits(stream)) finish_stream(stream);
  return ncclSuccess;
}

}  // namespace
}  // namespace emu

using namespace emu;

extern "C" {

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

ncclResult_t ncclGetVersion(int* version) {
  if (!version) return fail(ncclInvalidArgument, "ncclGetVersion: null pointer");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (!id) return fail(ncclInvalidArgument, "ncclGetUniqueId: null pointer");
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, kIdTag, sizeof kIdTag);
  std::random_device entropy;
  for (size_t i = sizeof kIdTag; i < sizeof id->internal; ++i) id->internal[i] = char(entropy());
  return ncclSuccess;
}

// One rank: no MPI. Several: the ranks are MPI_COMM_WORLD's, each process being one emulated GPU,
// and every rank must pass the id rank 0 made.
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  if (!comm) return fail(ncclInvalidArgument, "ncclCommInitRank: null communicator pointer");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  if (std::memcmp(id.internal, kIdTag, sizeof kIdTag) != 0)
    return fail(ncclInvalidArgument, "ncclCommInitRank: the id does not come from ncclGetUniqueId");
  MPI_Comm mpi = MPI_COMM_NULL;
  if (nranks > 1) {
    int initialized = 0, world_size = 0, world_rank = 0;
    MPI_Initialized(&initialized);
    if (!initialized)
      return fail(ncclInvalidUsage, "ncclCommInitRank: " + std::to_string(nranks) +
                                        " ranks need MPI (one process per emulated GPU, under mpirun)");
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    if (world_size != nranks || world_rank != rank)
      return fail(ncclInvalidUsage, "ncclCommInitRank: rank " + std::to_string(rank) + " of " +
                                        std::to_string(nranks) + " must be MPI rank " + std::to_string(world_rank) +
                                        " of " + std::to_string(world_size) + " on the emulated GPU");
    MPI_Comm_dup(MPI_COMM_WORLD, &mpi);
    std::vector<char> ids(sizeof id.internal * size_t(nranks));
    MPI_Allgather(id.internal, int(sizeof id.internal), MPI_BYTE, ids.data(), int(sizeof id.internal), MPI_BYTE, mpi);
    for (int r = 0; r < nranks; ++r)
      if (std::memcmp(&ids[size_t(r) * sizeof id.internal], id.internal, sizeof id.internal) != 0) {
        MPI_Comm_free(&mpi);
        return fail(ncclInvalidUsage, "ncclCommInitRank: rank " + std::to_string(r) + " passed another unique id");
      }
  }
  ncclComm_t c = new ncclComm{rank, nranks, mpi, false};
  std::lock_guard<std::mutex> lock(comms_mutex());
  live_comms().insert(c);
  *comm = c;
  return ncclSuccess;
}

// Waits for the device's queued work first, as ncclCommDestroy finishes the communicator's operations.
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  cudaDeviceSynchronize();
  {
    std::lock_guard<std::mutex> lock(comms_mutex());
    if (!live_comms().erase(comm)) return fail(ncclInvalidArgument, "ncclCommDestroy: no such communicator");
  }
  if (comm->mpi != MPI_COMM_NULL) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm->mpi);
  }
  delete comm;
  return ncclSuccess;
}

// From another thread (the watchdog): later calls fail. A collective already blocked in MPI stays
// blocked; the watchdog ends the process next.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(comms_mutex());
  if (!live_comms().count(comm)) return fail(ncclInvalidArgument, "ncclCommAbort: no such communicator");
  comm->aborted = true;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  ++group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group_depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  --group_depth;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return collective(Kind::all_reduce, send, recv, count, type, op, 0, comm, stream);
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  return collective(Kind::reduce, send, recv, count, type, op, root, comm, stream);
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recv_count, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  return collective(Kind::reduce_scatter, send, recv, recv_count, type, op, 0, comm, stream);
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t send_count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective(Kind::all_gather, send, recv, send_count, type, ncclSum, 0, comm, stream);
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective(Kind::broadcast, send, recv, count, type, ncclSum, root, comm, stream);
}

}  // extern "C"
