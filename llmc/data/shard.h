// Token shard files (llm.c-compatible): a 256-int32 little-endian header
// [0]=kShardMagic, [1]=kShardVersion, [2]=number of tokens, then the tokens as little-endian uint16.
// Every document in a shard is preceded by the end-of-text token 50256.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;
constexpr int kShardHeaderInts = 256;
constexpr int kGpt2VocabSize = 50257;

// Positioned reads from one validated shard file; never loads the whole file (pread), so a data
// loader can stream only its own windows. Safe to read concurrently from several threads.
class ShardReader {
 public:
  // Opens and validates header (magic, version) and that the file size == header size +
  // 2*num_tokens; throws std::runtime_error naming the file and what is wrong.
  explicit ShardReader(const std::string& path, int vocab_size = kGpt2VocabSize);
  ~ShardReader();
  ShardReader(ShardReader&& other) noexcept;
  ShardReader& operator=(ShardReader&& other) noexcept;
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  const std::string& path() const { return path_; }
  int64_t num_tokens() const { return num_tokens_; }
  // Reads tokens [start, start+count) as ints; throws (naming the file and token index) if the
  // range is out of bounds or any token >= vocab_size.
  void read(int64_t start, int64_t count, int* out) const;
  // Total payload bytes read so far by this reader (lets tests prove that reads stream).
  uint64_t bytes_read() const { return bytes_read_.load(std::memory_order_relaxed); }

 private:
  void close_fd();

  std::string path_;
  int fd_ = -1;
  int vocab_size_ = kGpt2VocabSize;
  int64_t num_tokens_ = 0;
  mutable std::atomic<uint64_t> bytes_read_{0};
};

// Writes a complete shard to `path` atomically (write path + ".tmp", fsync, rename), so a reader
// never sees a half-written shard; throws std::runtime_error naming the file.
void write_shard(const std::string& path, const uint16_t* tokens, size_t count);

// Sorted (byte order) list of files matching a glob pattern; throws std::runtime_error naming the
// pattern if it matches nothing.
std::vector<std::string> expand_glob(const std::string& pattern);

}  // namespace llmc
