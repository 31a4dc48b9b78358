#include "llmc/dist/mpi_communicator.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <mpi.h>
#include <stdexcept>
#include <vector>

namespace llmc {

namespace {

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char message[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, message, &length);
  throw std::runtime_error(fmt::format("MPI {} failed: {}", what, std::string(message, size_t(length))));
}

// Calls piece(offset, count) over [0, n) in pieces of at most `limit` elements, in order: one MPI
// call takes an int count.
template <class Piece>
void for_each_piece(size_t n, size_t limit, Piece piece) {
  for (size_t done = 0; done < n;) {
    const size_t m = std::min(limit, n - done);
    piece(done, m);
    done += m;
  }
}

}  // namespace

struct MpiCommunicator::PendingRequests {
  std::vector<MPI_Request> requests;
};

MpiCommunicator::MpiCommunicator(size_t max_elements_per_call)
    : pending_(std::make_unique<PendingRequests>()),
      max_elements_(std::min<size_t>(std::max<size_t>(max_elements_per_call, 1), size_t(1) << 30)) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) throw std::runtime_error("MpiCommunicator: MPI is not initialised (create a ProcessGroup first)");
  check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "Comm_set_errhandler");
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world_size_), "Comm_size");
}

// Out of line for PendingRequests, complete only here. Operations still pending were started by a
// caller that then failed; MPI_Finalize or MPI_Abort follows, so they are neither waited for nor
// cancelled.
MpiCommunicator::~MpiCommunicator() = default;

void MpiCommunicator::all_reduce_sum(float* buf, size_t n) {
  for_each_piece(n, max_elements_, [&](size_t at, size_t m) {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, buf + at, int(m), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "Allreduce");
  });
}

double MpiCommunicator::all_reduce_sum(double value) {
  double sum = 0.0;
  check_mpi(MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "Allreduce");
  return sum;
}

float MpiCommunicator::all_reduce_sum(float value) {
  float sum = 0.0f;
  check_mpi(MPI_Allreduce(&value, &sum, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "Allreduce");
  return sum;
}

double MpiCommunicator::all_reduce_max(double value) {
  double result = 0.0;
  check_mpi(MPI_Allreduce(&value, &result, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "Allreduce");
  return result;
}

// A chunk longer than one call allows is cut into pieces [a, a+m); piece a of every rank's chunk
// is gathered into one contiguous staging buffer, since MPI_Reduce_scatter_block wants the W
// pieces side by side.
void MpiCommunicator::reduce_scatter_sum(const float* send, float* recv, size_t recv_count) {
  const size_t W = size_t(world_size_);
  if (recv_count <= max_elements_) {
    check_mpi(MPI_Reduce_scatter_block(send, recv, int(recv_count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
              "Reduce_scatter_block");
    return;
  }
  std::vector<float> staging(W * max_elements_);
  for_each_piece(recv_count, max_elements_, [&](size_t a, size_t m) {
    for (size_t r = 0; r < W; ++r) std::memcpy(&staging[r * m], send + r * recv_count + a, m * sizeof(float));
    check_mpi(MPI_Reduce_scatter_block(staging.data(), recv + a, int(m), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
              "Reduce_scatter_block");
  });
}

void MpiCommunicator::all_gather(const float* send, float* recv, size_t send_count) {
  const size_t W = size_t(world_size_);
  if (send_count <= max_elements_) {
    check_mpi(MPI_Allgather(send, int(send_count), MPI_FLOAT, recv, int(send_count), MPI_FLOAT, MPI_COMM_WORLD),
              "Allgather");
    return;
  }
  std::vector<float> staging(W * max_elements_);
  for_each_piece(send_count, max_elements_, [&](size_t a, size_t m) {
    check_mpi(MPI_Allgather(send + a, int(m), MPI_FLOAT, staging.data(), int(m), MPI_FLOAT, MPI_COMM_WORLD),
              "Allgather");
    for (size_t r = 0; r < W; ++r) std::memcpy(recv + r * send_count + a, &staging[r * m], m * sizeof(float));
  });
}

void MpiCommunicator::broadcast(void* buf, size_t bytes, int root) {
  check_root(root, "broadcast");
  auto* p = static_cast<char*>(buf);
  for_each_piece(bytes, max_elements_ * sizeof(float), [&](size_t at, size_t m) {
    check_mpi(MPI_Bcast(p + at, int(m), MPI_BYTE, root, MPI_COMM_WORLD), "Bcast");
  });
}

void MpiCommunicator::barrier() { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "Barrier"); }

void MpiCommunicator::start_all_reduce_sum(float* buf, size_t n) {
  for_each_piece(n, max_elements_, [&](size_t at, size_t m) {
    MPI_Request request;
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, buf + at, int(m), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request),
              "Iallreduce");
    pending_->requests.push_back(request);
  });
}

void MpiCommunicator::start_reduce_sum(float* buf, size_t n, int root) {
  check_root(root, "reduce");
  for_each_piece(n, max_elements_, [&](size_t at, size_t m) {
    MPI_Request request;
    const void* send = rank_ == root ? MPI_IN_PLACE : buf + at;
    check_mpi(MPI_Ireduce(send, buf + at, int(m), MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD, &request), "Ireduce");
    pending_->requests.push_back(request);
  });
}

void MpiCommunicator::progress() {
  std::vector<MPI_Request>& r = pending_->requests;
  if (r.empty()) return;
  int all_done = 0;
  check_mpi(MPI_Testall(int(r.size()), r.data(), &all_done, MPI_STATUSES_IGNORE), "Testall");
  if (all_done) r.clear();
}

void MpiCommunicator::wait_all() {
  std::vector<MPI_Request>& r = pending_->requests;
  if (r.empty()) return;
  check_mpi(MPI_Waitall(int(r.size()), r.data(), MPI_STATUSES_IGNORE), "Waitall");
  r.clear();
}

}  // namespace llmc
