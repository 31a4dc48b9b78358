// Per-rank streaming of the training data (tests/dist/check_streaming.sh): every rank's DataLoader
// (llmc/data/dataloader.h) reads only its own windows, and its memory does not grow with the dataset.
//
//   test_streaming generate DIR FIRST_INDEX TOKENS...   writes DIR/stream_<index>.bin, one per count
//   test_streaming read GLOB B T STEPS|epoch SHUFFLE     run under mpirun -np W, or alone
//
// Token i of shard s is token_at(s, i), so every batch is checked against values computed here,
// not by the loader. The binary is linked with -Wl,--wrap=pread: every pread the library makes
// (ShardReader's, the only reader of shard payloads) goes through __wrap_pread, which records fd,
// offset and size. After the loader is built, rank r's payload reads must be exactly one read of
// B*T+1 tokens per step, (B*T+1)*2 bytes, at the window the data order (docs/training.md) gives;
// rank 0 gathers every rank's reads and checks that over a whole epoch each window of every
// shard is read exactly once by exactly one rank. Peak memory (VmHWM) is printed for the RSS
// comparison of a 1x and a 10x dataset.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <vector>

#include "llmc/data/dataloader.h"
#include "llmc/data/shard.h"
#include "llmc/dist/process_group.h"

using namespace llmc;

namespace {

struct Read {
  int64_t shard;   // the N of stream_N.bin
  int64_t offset;  // byte offset in the file
  int64_t bytes;
};

bool g_recording = false;
struct RawRead {
  int fd;
  int64_t offset;
  int64_t bytes;
};
std::vector<RawRead> g_reads;

}  // namespace

extern "C" ssize_t __real_pread(int fd, void* buf, size_t count, off_t offset);
extern "C" ssize_t __wrap_pread(int fd, void* buf, size_t count, off_t offset) {
  const ssize_t got = __real_pread(fd, buf, count, offset);
  if (g_recording && got > 0) g_reads.push_back({fd, int64_t(offset), int64_t(got)});
  return got;
}

namespace {

constexpr int64_t kHeaderBytes = 256 * 4;

// A mix of (shard, position) into the vocabulary: neighbouring windows never look alike.
uint16_t token_at(int64_t shard, int64_t i) {
  uint64_t z = uint64_t(i) * 0x9E3779B97F4A7C15ull + uint64_t(shard) * 0xD1B54A32D192ED03ull;
  z ^= z >> 29;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 32;
  return uint16_t(z % uint64_t(kGpt2VocabSize));
}

std::string shard_name(const std::string& dir, int64_t index) { return fmt::format("{}/stream_{:03d}.bin", dir, index); }

// The N of ".../stream_N.bin", or -1.
int64_t shard_index(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string name = path.substr(slash == std::string::npos ? 0 : slash + 1);
  int64_t index = -1;
  if (std::sscanf(name.c_str(), "stream_%ld.bin", &index) != 1) return -1;
  return index;
}

int64_t shard_tokens(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw std::runtime_error(path + ": cannot stat");
  return (int64_t(st.st_size) - kHeaderBytes) / 2;
}

std::string fd_path(int fd) {
  char target[4096];
  const ssize_t n = ::readlink(fmt::format("/proc/self/fd/{}", fd).c_str(), target, sizeof target - 1);
  return n > 0 ? std::string(target, size_t(n)) : std::string();
}

long status_kb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(key) + ":";
  while (std::getline(in, line))
    if (line.compare(0, prefix.size(), prefix) == 0) return std::stol(line.substr(prefix.size()));
  return -1;
}

int generate(int argc, char** argv) {
  if (argc < 5) throw std::runtime_error("usage: test_streaming generate DIR FIRST_INDEX TOKENS...");
  const std::string dir = argv[2];
  int64_t index = std::stoll(argv[3]);
  for (int a = 4; a < argc; ++a, ++index) {
    const int64_t n = std::stoll(argv[a]);
    std::vector<uint16_t> tokens(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) tokens[size_t(i)] = token_at(index, i);
    write_shard(shard_name(dir, index), tokens.data(), tokens.size());
  }
  return 0;
}

struct Failures {
  int rank;
  int count = 0;
  void operator()(bool ok, const std::string& what) {
    if (ok) return;
    if (++count <= 10) std::fprintf(stderr, "FAIL rank %d: %s\n", rank, what.c_str());
  }
};

// The window starts (in tokens) rank r reads in its first `steps` steps with shuffling off:
// shards in sorted order, floor((n-1)/(W*B*T)) steps each, window k*W + r.
std::vector<std::pair<int64_t, int64_t>> sequential_windows(const std::vector<std::string>& files, int r, int W,
                                                             int64_t BT, int64_t steps) {
  std::vector<std::pair<int64_t, int64_t>> windows;
  while (int64_t(windows.size()) < steps)
    for (const std::string& f : files) {
      const int64_t shard_steps = (shard_tokens(f) - 1) / (int64_t(W) * BT);
      for (int64_t k = 0; k < shard_steps && int64_t(windows.size()) < steps; ++k)
        windows.emplace_back(shard_index(f), (k * W + r) * BT);
    }
  return windows;
}

int read_windows(ProcessGroup& group, int argc, char** argv) {
  if (argc != 7) throw std::runtime_error("usage: test_streaming read GLOB B T STEPS|epoch SHUFFLE");
  const int r = group.rank(), W = group.world_size();
  Communicator& comm = group.communicator();
  DataLoaderConfig config;
  config.batch_size = std::stoi(argv[3]);
  config.seq_len = std::stoi(argv[4]);
  config.rank = r;
  config.world_size = W;
  config.shuffle = std::string(argv[6]) == "1";
  config.seed = 42;
  const int64_t BT = int64_t(config.batch_size) * config.seq_len;
  const std::vector<std::string> files = expand_glob(argv[2]);
  Failures check{r};

  const long rss_before_kb = status_kb("VmRSS");
  g_recording = true;
  DataLoader loader(files, config);
  int64_t header_bytes = 0;
  for (const RawRead& read : g_reads) header_bytes += read.bytes;
  check(header_bytes == kHeaderBytes * int64_t(files.size()),
        fmt::format("construction read {} bytes, expected only the {} headers", header_bytes, files.size()));
  g_reads.clear();

  const int64_t steps = std::string(argv[5]) == "epoch" ? loader.steps_per_epoch() : std::stoll(argv[5]);
  std::vector<int> inputs(static_cast<size_t>(BT)), targets(static_cast<size_t>(BT));
  std::vector<Read> reads;
  for (int64_t k = 0; k < steps; ++k) {
    const size_t first = g_reads.size();
    loader.next_batch(inputs.data(), targets.data());
    check(g_reads.size() == first + 1, fmt::format("step {}: {} reads, expected 1", k, g_reads.size() - first));
    if (g_reads.size() != first + 1) continue;
    const RawRead& raw = g_reads.back();
    const Read read{shard_index(fd_path(raw.fd)), raw.offset, raw.bytes};
    reads.push_back(read);
    const int64_t start = (read.offset - kHeaderBytes) / 2;
    int64_t wrong = 0;
    for (int64_t j = 0; j < BT; ++j)
      wrong += inputs[size_t(j)] != token_at(read.shard, start + j) || targets[size_t(j)] != token_at(read.shard, start + j + 1);
    check(wrong == 0, fmt::format("step {}: {} tokens differ from shard {} at token {}", k, wrong, read.shard, start));
  }
  g_recording = false;
  const long hwm_kb = status_kb("VmHWM"), rss_after_kb = status_kb("VmRSS");

  int64_t payload = 0;
  for (const Read& read : reads) payload += read.bytes;
  check(payload == steps * (BT + 1) * 2,
        fmt::format("read {} payload bytes in {} steps, expected steps*(B*T+1)*2 = {}", payload, steps, steps * (BT + 1) * 2));
  if (!config.shuffle) {
    const auto expected = sequential_windows(files, r, W, BT, steps);
    int64_t misplaced = 0;
    for (size_t k = 0; k < reads.size(); ++k)
      misplaced += reads[k].shard != expected[k].first || reads[k].offset != kHeaderBytes + 2 * expected[k].second;
    check(misplaced == 0, fmt::format("{} of {} windows are not llm.c's k*W*B*T + r*B*T", misplaced, reads.size()));
  }

  // Rank 0 collects every rank's reads.
  std::vector<Read> all;
  for (int q = 0; q < W; ++q) {
    int64_t count = int64_t(reads.size());
    comm.broadcast(&count, sizeof count, q);
    std::vector<Read> theirs = q == r ? reads : std::vector<Read>(size_t(count));
    comm.broadcast(theirs.data(), theirs.size() * sizeof(Read), q);
    all.insert(all.end(), theirs.begin(), theirs.end());
  }
  const bool whole_epoch = std::string(argv[5]) == "epoch";
  std::string coverage;
  if (r == 0) {
    std::map<std::pair<int64_t, int64_t>, int> times;
    for (const Read& read : all) ++times[{read.shard, read.offset}];
    int64_t repeated = 0, misaligned = 0, expected_windows = 0;
    for (const auto& [key, n] : times) {
      repeated += n > 1;
      misaligned += (key.second - kHeaderBytes) % (2 * BT) != 0;
    }
    for (const std::string& f : files) expected_windows += (shard_tokens(f) - 1) / (int64_t(W) * BT) * W;
    if (steps <= loader.steps_per_epoch())  // within one epoch no window comes twice
      check(repeated == 0, fmt::format("{} windows were read more than once", repeated));
    check(misaligned == 0, fmt::format("{} reads do not start at a window boundary", misaligned));
    if (whole_epoch)
      check(int64_t(times.size()) == expected_windows,
            fmt::format("an epoch read {} distinct windows, the shards hold {}", times.size(), expected_windows));
    coverage = fmt::format("{} distinct windows{}", times.size(),
                           whole_epoch ? fmt::format(" (the epoch has {})", expected_windows) : "");
  }

  const double failures = comm.all_reduce_sum(double(check.count));
  if (r == 0) {
    std::printf("streaming: %d rank(s), B=%d T=%d, %ld steps/rank, shuffle %d, %zu shard(s): payload bytes per rank %ld "
                "(= steps*(B*T+1)*2 = %ld), headers %ld bytes; %s\n",
                W, config.batch_size, config.seq_len, long(steps), int(config.shuffle), files.size(), long(payload),
                long(steps * (BT + 1) * 2), long(header_bytes), coverage.c_str());
    std::printf("memory: rank 0 VmRSS before loader %ld kB, after %ld kB, VmHWM %ld kB\n", rss_before_kb, rss_after_kb,
                hwm_kb);
    if (failures > 0) std::printf("streaming: %.0f failed checks\n", failures);
  }
  return failures > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s generate|read ...\n", argv[0]);
    return 2;
  }
  if (std::string(argv[1]) == "generate") {
    try {
      return generate(argc, argv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  std::unique_ptr<ProcessGroup> group;
  try {
    group = std::make_unique<ProcessGroup>();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  try {
    return read_windows(*group, argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: rank %d: %s\n", group->rank(), e.what());
    group->abort(1);
  }
}
