// Checks every collective of the communicator a ProcessGroup builds, run by tests/dist/check_mpi.sh
// under `mpirun -np 1/2/4` and as a plain process, and by tests/dist/check_nompi.sh as processes
// started without mpirun that meet over -pi tcp or -pi fs. Inputs depend on the rank so that every
// expected value is known in closed form (sums of small integers, exact in float); one check
// uses random floats against a double-precision sum and checks that all ranks get the same bits.
//   test_collectives EXPECTED_WORLD_SIZE openmpi|none SCRATCH_DIR
//   test_collectives EXPECTED_WORLD_SIZE tcp SCRATCH_DIR RANK HOST:PORT
//   test_collectives EXPECTED_WORLD_SIZE fs SCRATCH_DIR RANK            (-pf SCRATCH_DIR)
// Prints "collectives: N checks passed on W ranks (launcher)" from rank 0; exits 1 on a failure.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <memory>
#include <mpi.h>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "llmc/dist/mpi_communicator.h"
#include "llmc/dist/process_group.h"
#include "llmc/dist/zero_sharding.h"
#include "llmc/rng.h"

using namespace llmc;

namespace {

struct Checker {
  int rank = 0;
  int checks = 0;
  int failures = 0;
  void operator()(bool ok, const std::string& what) {
    ++checks;
    if (ok) return;
    ++failures;
    std::fprintf(stderr, "FAIL rank %d: %s\n", rank, what.c_str());
  }
};

// Counts the elements of `got` that differ from expected(i).
template <class F>
size_t mismatches(const std::vector<float>& got, F expected) {
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) bad += got[i] != expected(i);
  return bad;
}

void check_all_reduce(Communicator& c, Checker& check, const std::string& name) {
  const int r = c.rank(), W = c.world_size();
  const float S = float(W * (W + 1) / 2);  // sum over ranks of (r+1)
  std::vector<float> buf(1003);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = float(r + 1) * float(i % 97 + 1);
  c.all_reduce_sum(buf.data(), buf.size());
  check(mismatches(buf, [&](size_t i) { return S * float(i % 97 + 1); }) == 0, name + ": all_reduce_sum(buffer)");
  // sum of (r + 0.5) = W(W-1)/2 + W/2 = W^2/2; sum of (r+1)/4 = W(W+1)/8
  check(c.all_reduce_sum(double(r) + 0.5) == double(W) * W / 2, name + ": all_reduce_sum(double)");
  check(c.all_reduce_sum(float(r + 1) * 0.25f) == float(W * (W + 1)) / 8.0f, name + ": all_reduce_sum(float)");
}

// One ZeRO-1 step on a padded buffer: reduce-scatter the gradients, update the owned part,
// all-gather the parameters.
void check_zero_step(Communicator& c, Checker& check, const std::string& name) {
  const int r = c.rank(), W = c.world_size();
  const float S = float(W * (W + 1) / 2);
  const size_t n = 1003;
  const ZeroLayout z = make_zero_layout(n, W, 4);
  std::vector<float> grads(z.padded_size(), 0.0f);
  for (size_t i = 0; i < n; ++i) grads[i] = float(r + 1) * float(i % 13 + 1);
  std::vector<float> grad_shard(z.shard_size, -1.0f);
  c.reduce_scatter_sum(grads.data(), grad_shard.data(), z.shard_size);
  const ElementRange chunk = z.chunk(r);
  check(mismatches(grad_shard, [&](size_t j) {
          const size_t i = chunk.begin + j;
          return i < n ? S * float(i % 13 + 1) : 0.0f;
        }) == 0,
        name + ": reduce_scatter_sum of a padded buffer");

  std::vector<float> param_shard(z.shard_size, 0.0f);
  const ElementRange owned = z.owned(r);
  for (size_t i = owned.begin; i < owned.end; ++i)
    param_shard[i - chunk.begin] = float(1000 + i) - 0.5f * grad_shard[i - chunk.begin];
  std::vector<float> params(z.padded_size(), -1.0f);
  c.all_gather(param_shard.data(), params.data(), z.shard_size);
  check(mismatches(params, [&](size_t i) { return i < n ? float(1000 + i) - 0.5f * S * float(i % 13 + 1) : 0.0f; }) == 0,
        name + ": all_gather of the updated shards");

  std::vector<float> mine(5), all(5 * size_t(W), -1.0f);
  for (size_t k = 0; k < mine.size(); ++k) mine[k] = float(r * 1000 + int(k));
  c.all_gather(mine.data(), all.data(), mine.size());
  check(mismatches(all, [&](size_t j) { return float(int(j / 5) * 1000 + int(j % 5)); }) == 0, name + ": all_gather");
}

// Non-blocking sums as the gradient buckets use them: several in flight at once, a blocking
// collective and progress() between them, all complete after wait_all(); a reduce writes only
// its root's buffer.
void check_non_blocking(Communicator& c, Checker& check, const std::string& name) {
  const int r = c.rank(), W = c.world_size();
  const float S = float(W * (W + 1) / 2);
  const int root = W - 1;
  std::vector<float> a(1003), b(17), reduced(23);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(r + 1) * float(i % 97 + 1);
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(r + 1) * float(i + 3);
  for (size_t i = 0; i < reduced.size(); ++i) reduced[i] = float(r + 1) * float(i % 5 + 2);
  c.start_all_reduce_sum(a.data(), a.size());
  c.progress();
  c.start_reduce_sum(reduced.data(), reduced.size(), root);
  const double blocking = c.all_reduce_sum(double(r + 1));
  c.start_all_reduce_sum(b.data(), b.size());
  c.progress();
  c.wait_all();
  check(blocking == double(S), name + ": a blocking sum between non-blocking ones");
  check(mismatches(a, [&](size_t i) { return S * float(i % 97 + 1); }) == 0, name + ": start_all_reduce_sum (first)");
  check(mismatches(b, [&](size_t i) { return S * float(i + 3); }) == 0, name + ": start_all_reduce_sum (last)");
  const float factor = r == root ? S : float(r + 1);
  check(mismatches(reduced, [&](size_t i) { return factor * float(i % 5 + 2); }) == 0,
        name + ": start_reduce_sum (the root has the sum, the others their input)");
  c.wait_all();  // nothing pending: returns at once
  bool threw = false;
  try {
    c.start_reduce_sum(reduced.data(), 1, W);
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  check(threw, name + ": a reduce to a root that is not a rank throws");
}

void check_broadcast(Communicator& c, Checker& check, const std::string& name) {
  const int r = c.rank(), W = c.world_size();
  const int root = W - 1;
  std::vector<unsigned char> bytes(1001, 0);
  if (r == root)
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = (unsigned char)(i * 7 + 3);
  c.broadcast(bytes.data(), bytes.size(), root);
  size_t bad = 0;
  for (size_t i = 0; i < bytes.size(); ++i) bad += bytes[i] != (unsigned char)(i * 7 + 3);
  check(bad == 0, name + ": broadcast from the last rank");
  bool threw = false;
  try {
    c.broadcast(bytes.data(), 1, W);
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  check(threw, name + ": broadcast from a root that is not a rank throws");
}

// Random inputs: the sum is within float rounding of the double-precision sum, and every rank
// holds the same bits (the loop's clipping relies on it).
void check_random_sum(Communicator& c, Checker& check, const std::string& name) {
  const int r = c.rank(), W = c.world_size();
  const size_t n = 4099;
  auto inputs = [n](int rank) {
    Rng rng(1000 + uint64_t(rank));
    std::vector<float> x(n);
    for (float& v : x) v = rng.normal();
    return x;
  };
  std::vector<float> sum = inputs(r);
  c.all_reduce_sum(sum.data(), n);
  std::vector<double> exact(n, 0.0), magnitude(n, 0.0);
  for (int q = 0; q < W; ++q) {
    const std::vector<float> x = inputs(q);
    for (size_t i = 0; i < n; ++i) exact[i] += x[i], magnitude[i] += std::fabs(x[i]);
  }
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += std::fabs(double(sum[i]) - exact[i]) > 1e-6 * magnitude[i];
  check(bad == 0, name + fmt::format(": random sums within 1e-6 of double ({} off)", bad));
  std::vector<float> root_sum = sum;
  c.broadcast(root_sum.data(), n * sizeof(float), 0);
  check(std::memcmp(root_sum.data(), sum.data(), n * sizeof(float)) == 0, name + ": every rank has rank 0's bits");
}

// Rank 0 creates a file only after a delay; no rank may leave the barrier before it exists.
void check_barrier(Communicator& c, Checker& check, const std::string& name, const std::string& dir) {
  const std::string marker = dir + "/barrier_marker";
  if (c.rank() == 0) {
    std::remove(marker.c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::ofstream(marker) << "here\n";
  }
  c.barrier();
  check(access(marker.c_str(), F_OK) == 0, name + ": barrier waited for rank 0");
  c.barrier();
  if (c.rank() == 0) std::remove(marker.c_str());
}

// Over sockets (-pi tcp|fs) rank 0 sums in rank order: the bits of ((x0 + x1) + x2) + ..., which
// every rank can compute, since it knows every rank's inputs.
void check_fixed_order(Communicator& c, Checker& check, const std::string& name) {
  const size_t n = 4099;
  auto inputs = [n](int rank) {
    Rng rng(2000 + uint64_t(rank));
    std::vector<float> x(n);
    for (float& v : x) v = rng.normal();
    return x;
  };
  std::vector<float> sum = inputs(c.rank()), expected = inputs(0);
  c.all_reduce_sum(sum.data(), n);
  for (int q = 1; q < c.world_size(); ++q) {
    const std::vector<float> x = inputs(q);
    for (size_t i = 0; i < n; ++i) expected[i] += x[i];
  }
  check(std::memcmp(sum.data(), expected.data(), n * sizeof(float)) == 0, name + ": sums in rank order, bit for bit");
}

// Buffers far larger than a socket's buffers (megabytes per rank): rank 0 must read every input
// before it answers, or ranks would wait on each other's full buffers forever.
void check_large(Communicator& c, Checker& check, const std::string& name) {
  const int r = c.rank(), W = c.world_size();
  const float S = float(W * (W + 1) / 2);
  const size_t n = size_t(3) << 20;
  std::vector<float> buf(n);
  for (size_t i = 0; i < n; ++i) buf[i] = float(r + 1) * float(i % 97 + 1);
  c.all_reduce_sum(buf.data(), n);
  check(mismatches(buf, [&](size_t i) { return S * float(i % 97 + 1); }) == 0, name + ": all_reduce_sum of 12 MB");
  const size_t chunk = size_t(1) << 20;
  std::vector<float> send(chunk * size_t(W)), part(chunk), all(chunk * size_t(W));
  for (size_t i = 0; i < send.size(); ++i) send[i] = float(r + 1) * float(i % 89 + 1);
  c.reduce_scatter_sum(send.data(), part.data(), chunk);
  check(mismatches(part, [&](size_t j) { return S * float((size_t(r) * chunk + j) % 89 + 1); }) == 0,
        name + ": reduce_scatter_sum of 4 MB chunks");
  c.all_gather(part.data(), all.data(), chunk);
  check(mismatches(all, [&](size_t i) { return S * float(i % 89 + 1); }) == 0, name + ": all_gather of 4 MB chunks");
}

// What NcclCommunicator does with its host communicator at start-up: rank 0's 128-byte unique id
// to every rank.
void check_id_exchange(Communicator& c, Checker& check, const std::string& name) {
  unsigned char id[128] = {};
  if (c.rank() == 0)
    for (size_t i = 0; i < sizeof id; ++i) id[i] = (unsigned char)(255 - i);
  c.broadcast(id, sizeof id, 0);
  size_t bad = 0;
  for (size_t i = 0; i < sizeof id; ++i) bad += id[i] != (unsigned char)(255 - i);
  check(bad == 0, name + ": a 128-byte id from rank 0 (NCCL's unique id)");
}

void check_layout(const ProcessGroup& group, Checker& check, int expected_world, const std::string& expected_launcher,
                  int expected_rank) {
  const ProcessLayout& l = group.layout();
  const bool openmpi = expected_launcher == "openmpi";
  if (expected_launcher == "tcp" || expected_launcher == "fs") {
    check(l.launcher == Launcher::kNone && std::string(init_method_name(group.method())) == expected_launcher,
          fmt::format("-pi {}: launcher {}, method {}", expected_launcher, launcher_name(l.launcher),
                      init_method_name(group.method())));
    check(l.rank == expected_rank && l.world_size == expected_world && l.local_rank == expected_rank % 8,
          fmt::format("layout rank {} of {} (local {}), expected {} of {}", l.rank, l.world_size, l.local_rank,
                      expected_rank, expected_world));
    return;
  }
  check(l.launcher == (openmpi ? Launcher::kOpenMpi : Launcher::kNone),
        fmt::format("launcher is {}, expected {}", launcher_name(l.launcher), expected_launcher));
  check(l.world_size == expected_world, fmt::format("world size {} (expected {})", l.world_size, expected_world));
  if (!openmpi) {
    check(l.rank == 0 && l.local_rank == 0, "a single process is rank 0, local rank 0");
    return;
  }
  // MPI's own view, independent of the environment variables the group read.
  int mpi_rank = -1, mpi_size = -1, node_rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_free(&node);
  check(l.rank == mpi_rank && l.world_size == mpi_size,
        fmt::format("layout rank {} of {} vs MPI's {} of {}", l.rank, l.world_size, mpi_rank, mpi_size));
  check(l.local_rank == node_rank, fmt::format("local rank {} vs MPI's node rank {}", l.local_rank, node_rank));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 2 ? argv[2] : "";
  const bool sockets = mode == "tcp" || mode == "fs";
  if (argc != (mode == "tcp" ? 6 : mode == "fs" ? 5 : 4)) {
    std::fprintf(stderr, "usage: %s EXPECTED_WORLD_SIZE openmpi|none|tcp|fs SCRATCH_DIR [RANK [HOST:PORT]]\n", argv[0]);
    return 2;
  }
  RankOptions options;
  if (sockets) {
    options.method = mode == "tcp" ? InitMethod::kTcp : InitMethod::kFs;
    options.num_processes = std::stoi(argv[1]);
    options.process_rank = std::stoi(argv[4]);
    if (mode == "tcp") options.server = argv[5];
    else options.fs_dir = argv[3];
  }
  std::unique_ptr<ProcessGroup> group_owner;
  try {
    group_owner = std::make_unique<ProcessGroup>(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  ProcessGroup& group = *group_owner;
  try {
    Checker check;
    check.rank = group.rank();
    check_layout(group, check, std::stoi(argv[1]), mode, sockets ? std::stoi(argv[4]) : 0);
    Communicator& c = group.communicator();
    check(c.rank() == group.rank() && c.world_size() == group.world_size(), "communicator matches the group");
    check_all_reduce(c, check, "default");
    check_zero_step(c, check, "default");
    check_broadcast(c, check, "default");
    check_non_blocking(c, check, "default");
    check_random_sum(c, check, "default");
    check_barrier(c, check, "default", argv[3]);
    check_id_exchange(c, check, "default");
    if (sockets) {
      check_fixed_order(c, check, "sockets");
      check_large(c, check, "sockets");
    }
    if (group.layout().launcher != Launcher::kNone) {
      // At most 7 floats per MPI call: every collective goes through its splitting path.
      MpiCommunicator split(7);
      check_all_reduce(split, check, "split");
      check_zero_step(split, check, "split");
      check_broadcast(split, check, "split");
      check_non_blocking(split, check, "split");
      check_random_sum(split, check, "split");
    }
    const double failures = c.all_reduce_sum(double(check.failures));
    if (group.rank() == 0) {
      if (failures > 0) std::printf("collectives: %.0f failed checks over %d ranks\n", failures, group.world_size());
      else std::printf("collectives: %d checks passed on %d ranks (%s)\n", check.checks, group.world_size(),
                       (sockets ? "-pi " + mode : std::string(launcher_name(group.layout().launcher))).c_str());
    }
    return failures > 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: rank %d: %s\n", group.rank(), e.what());
    group.abort(1);
  }
}
