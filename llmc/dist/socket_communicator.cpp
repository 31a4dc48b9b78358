#include "llmc/dist/socket_communicator.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <functional>
#include <stdexcept>

namespace llmc {

namespace {

constexpr uint32_t kMessageMagic = 0x434d4c4c;  // "LLMC" on the wire
// Rank 0 receives a payload in pieces of this many bytes (and combines each as it arrives).
constexpr size_t kPieceBytes = size_t(1) << 18;

const char* op_name(uint32_t op) {
  switch (op) {
    case 1: return "a sum";
    case 2: return "a max";
    case 3: return "reduce_scatter_sum";
    case 4: return "all_gather";
    case 5: return "broadcast";
    case 6: return "barrier";
    case 7: return "start_reduce_sum";
    default: return "an unknown collective";
  }
}

}  // namespace

SocketCommunicator::SocketCommunicator(int rank, int world_size, std::vector<TcpSocket> peers)
    : rank_(rank), world_size_(world_size), peers_(std::move(peers)) {
  const size_t expected = rank == 0 ? size_t(world_size) : 1;
  if (world_size < 2 || rank < 0 || rank >= world_size || peers_.size() != expected)
    throw std::invalid_argument(fmt::format("SocketCommunicator: rank {} of {} with {} connections", rank, world_size,
                                            peers_.size()));
}

void SocketCommunicator::send_message(TcpSocket& to, Op op, const void* data, size_t bytes) {
  const Header h{kMessageMagic, op, sequence_, bytes};
  to.send_all(&h, sizeof h);
  to.send_all(data, bytes);
}

void SocketCommunicator::expect_header(TcpSocket& from, Op op, size_t bytes) {
  Header h{};
  from.recv_all(&h, sizeof h);
  if (h.magic != kMessageMagic)
    throw std::runtime_error(fmt::format("{} sent bytes that are no message of this trainer's collectives (during {} "
                                         "#{}): a stray connection, or a rank of another version",
                                         from.peer(), op_name(uint32_t(op)), sequence_));
  if (h.op != op || h.sequence != sequence_ || h.bytes != bytes)
    throw std::runtime_error(fmt::format("{} is in {} #{} of {} bytes while this rank is in {} #{} of {} bytes: the "
                                         "ranks ran different collectives (started with different flags?)",
                                         from.peer(), op_name(uint32_t(h.op)), h.sequence, h.bytes,
                                         op_name(uint32_t(op)), sequence_, bytes));
}

template <class T, class Combine>
void SocketCommunicator::accumulate_from(TcpSocket& from, T* acc, size_t count, Combine combine) {
  std::vector<T> piece(std::min(count, kPieceBytes / sizeof(T)));
  for (size_t done = 0; done < count;) {
    const size_t m = std::min(piece.size(), count - done);
    from.recv_all(piece.data(), m * sizeof(T));
    for (size_t i = 0; i < m; ++i) acc[done + i] = combine(acc[done + i], piece[i]);
    done += m;
  }
}

template <class T, class Combine>
void SocketCommunicator::reduce_to_all(T* buf, size_t n, Op op, Combine combine) {
  ++sequence_;
  const size_t bytes = n * sizeof(T);
  if (rank_ != 0) {
    send_message(peers_[0], op, buf, bytes);
    expect_header(peers_[0], op, bytes);
    peers_[0].recv_all(buf, bytes);
    return;
  }
  for (int r = 1; r < world_size_; ++r) {
    expect_header(peers_[size_t(r)], op, bytes);
    accumulate_from(peers_[size_t(r)], buf, n, combine);
  }
  for (int r = 1; r < world_size_; ++r) send_message(peers_[size_t(r)], op, buf, bytes);
}

void SocketCommunicator::all_reduce_sum(float* buf, size_t n) { reduce_to_all(buf, n, Op::kSum, std::plus<float>()); }

double SocketCommunicator::all_reduce_sum(double value) {
  reduce_to_all(&value, 1, Op::kSum, std::plus<double>());
  return value;
}

float SocketCommunicator::all_reduce_sum(float value) {
  reduce_to_all(&value, 1, Op::kSum, std::plus<float>());
  return value;
}

double SocketCommunicator::all_reduce_max(double value) {
  reduce_to_all(&value, 1, Op::kMax, [](double a, double b) { return std::max(a, b); });
  return value;
}

void SocketCommunicator::barrier() {
  reduce_to_all(static_cast<float*>(nullptr), 0, Op::kBarrier, std::plus<float>());
}

// Rank 0 sums into a copy of its buffer unless it is the root, then hands the sum to the root.
void SocketCommunicator::start_reduce_sum(float* buf, size_t n, int root) {
  check_root(root, "reduce");
  ++sequence_;
  const size_t bytes = n * sizeof(float);
  if (rank_ != 0) {
    send_message(peers_[0], Op::kReduce, buf, bytes);
    if (rank_ == root) {
      expect_header(peers_[0], Op::kReduce, bytes);
      peers_[0].recv_all(buf, bytes);
    }
    return;
  }
  std::vector<float> copy;
  if (root != 0) copy.assign(buf, buf + n);
  float* sum = root == 0 ? buf : copy.data();
  for (int r = 1; r < world_size_; ++r) {
    expect_header(peers_[size_t(r)], Op::kReduce, bytes);
    accumulate_from(peers_[size_t(r)], sum, n, std::plus<float>());
  }
  if (root != 0) send_message(peers_[size_t(root)], Op::kReduce, sum, bytes);
}

// Rank 0 sums every rank's whole buffer (a copy of its own, as large as the send buffer) before
// it hands out the chunks.
void SocketCommunicator::reduce_scatter_sum(const float* send, float* recv, size_t recv_count) {
  ++sequence_;
  const size_t W = size_t(world_size_);
  const size_t chunk_bytes = recv_count * sizeof(float);
  if (rank_ != 0) {
    send_message(peers_[0], Op::kReduceScatter, send, W * chunk_bytes);
    expect_header(peers_[0], Op::kReduceScatter, chunk_bytes);
    peers_[0].recv_all(recv, chunk_bytes);
    return;
  }
  std::vector<float> sum(send, send + W * recv_count);
  for (size_t r = 1; r < W; ++r) {
    expect_header(peers_[r], Op::kReduceScatter, W * chunk_bytes);
    accumulate_from(peers_[r], sum.data(), W * recv_count, std::plus<float>());
  }
  std::memcpy(recv, sum.data(), chunk_bytes);
  for (size_t r = 1; r < W; ++r) send_message(peers_[r], Op::kReduceScatter, sum.data() + r * recv_count, chunk_bytes);
}

void SocketCommunicator::all_gather(const float* send, float* recv, size_t send_count) {
  ++sequence_;
  const size_t W = size_t(world_size_);
  const size_t piece_bytes = send_count * sizeof(float);
  if (rank_ != 0) {
    send_message(peers_[0], Op::kAllGather, send, piece_bytes);
    expect_header(peers_[0], Op::kAllGather, W * piece_bytes);
    peers_[0].recv_all(recv, W * piece_bytes);
    return;
  }
  if (send != recv) std::memmove(recv, send, piece_bytes);
  for (size_t r = 1; r < W; ++r) {
    expect_header(peers_[r], Op::kAllGather, piece_bytes);
    peers_[r].recv_all(recv + r * send_count, piece_bytes);
  }
  for (size_t r = 1; r < W; ++r) send_message(peers_[r], Op::kAllGather, recv, W * piece_bytes);
}

// A root other than 0 sends to rank 0, which passes the bytes on to the rest.
void SocketCommunicator::broadcast(void* buf, size_t bytes, int root) {
  check_root(root, "broadcast");
  ++sequence_;
  if (rank_ == root && root != 0) {
    send_message(peers_[0], Op::kBroadcast, buf, bytes);
    return;
  }
  if (rank_ != 0) {
    expect_header(peers_[0], Op::kBroadcast, bytes);
    peers_[0].recv_all(buf, bytes);
    return;
  }
  if (root != 0) {
    expect_header(peers_[size_t(root)], Op::kBroadcast, bytes);
    peers_[size_t(root)].recv_all(buf, bytes);
  }
  for (int r = 1; r < world_size_; ++r)
    if (r != root) send_message(peers_[size_t(r)], Op::kBroadcast, buf, bytes);
}

}  // namespace llmc
