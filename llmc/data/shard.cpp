#include "llmc/data/shard.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <glob.h>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace llmc {

namespace {

constexpr int64_t kHeaderBytes = int64_t(kShardHeaderInts) * 4;

int32_t load_le_i32(const unsigned char* p) {
  return int32_t(uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
}

void store_le_i32(unsigned char* p, int32_t v) {
  uint32_t u = uint32_t(v);
  for (int i = 0; i < 4; ++i) p[i] = (unsigned char)(u >> (8 * i));
}

// pread until `size` bytes arrived: a short read is legal for pread and is not an error.
void pread_all(int fd, void* buf, size_t size, int64_t offset, const std::string& path) {
  auto* p = static_cast<char*>(buf);
  while (size > 0) {
    ssize_t n = ::pread(fd, p, size, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(fmt::format("{}: read failed: {}", path, std::strerror(errno)));
    if (n == 0) throw std::runtime_error(fmt::format("{}: unexpected end of file at byte {}", path, offset));
    p += n;
    offset += n;
    size -= size_t(n);
  }
}

void write_all(int fd, const void* buf, size_t size, const std::string& path) {
  auto* p = static_cast<const char*>(buf);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(fmt::format("{}: write failed: {}", path, std::strerror(errno)));
    p += n;
    size -= size_t(n);
  }
}

}  // namespace

ShardReader::ShardReader(const std::string& path, int vocab_size) : path_(path), vocab_size_(vocab_size) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw std::runtime_error(fmt::format("{}: cannot open shard: {}", path, std::strerror(errno)));
  try {
    struct stat st;
    if (::fstat(fd_, &st) != 0)
      throw std::runtime_error(fmt::format("{}: cannot stat shard: {}", path, std::strerror(errno)));
    if (!S_ISREG(st.st_mode)) throw std::runtime_error(fmt::format("{}: not a regular file", path));
    const int64_t file_size = st.st_size;
    if (file_size < kHeaderBytes)
      throw std::runtime_error(fmt::format("{}: file of {} bytes is shorter than the {}-byte shard header",
                                           path, file_size, kHeaderBytes));
    unsigned char header[kHeaderBytes];
    pread_all(fd_, header, sizeof header, 0, path);
    const int32_t magic = load_le_i32(header), version = load_le_i32(header + 4),
                  count = load_le_i32(header + 8);
    if (magic != kShardMagic)
      throw std::runtime_error(fmt::format("{}: bad magic {} (expected {}): not a token shard", path, magic, kShardMagic));
    if (version != kShardVersion)
      throw std::runtime_error(fmt::format("{}: unsupported shard version {} (expected {})", path, version, kShardVersion));
    if (count < 0) throw std::runtime_error(fmt::format("{}: negative token count {} in header", path, count));
    const int64_t expected = kHeaderBytes + 2 * int64_t(count);
    if (file_size != expected)
      throw std::runtime_error(fmt::format(
          "{}: header says {} tokens ({} bytes in all) but the file has {} bytes (truncated or corrupt)",
          path, count, expected, file_size));
    num_tokens_ = count;
  } catch (...) {
    close_fd();
    throw;
  }
}

ShardReader::~ShardReader() { close_fd(); }

ShardReader::ShardReader(ShardReader&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(other.fd_),
      vocab_size_(other.vocab_size_),
      num_tokens_(other.num_tokens_),
      bytes_read_(other.bytes_read_.load()) {
  other.fd_ = -1;
}

ShardReader& ShardReader::operator=(ShardReader&& other) noexcept {
  if (this != &other) {
    close_fd();
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    vocab_size_ = other.vocab_size_;
    num_tokens_ = other.num_tokens_;
    bytes_read_.store(other.bytes_read_.load());
    other.fd_ = -1;
  }
  return *this;
}

void ShardReader::close_fd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void ShardReader::read(int64_t start, int64_t count, int* out) const {
  if (fd_ < 0) throw std::runtime_error(fmt::format("{}: read from a moved-from shard reader", path_));
  if (start < 0 || count < 0 || start > num_tokens_ || count > num_tokens_ - start)
    throw std::runtime_error(fmt::format("{}: read of tokens [{}, {}) is outside the shard's {} tokens", path_,
                                         start, start + count, num_tokens_));
  // Read through a bounded staging buffer so a huge window never doubles its memory.
  constexpr int64_t kChunk = 1 << 16;
  unsigned char buf[2 * kChunk];
  for (int64_t done = 0; done < count;) {
    const int64_t n = std::min(kChunk, count - done);
    pread_all(fd_, buf, size_t(2 * n), kHeaderBytes + 2 * (start + done), path_);
    bytes_read_.fetch_add(uint64_t(2 * n), std::memory_order_relaxed);
    for (int64_t i = 0; i < n; ++i) {
      const int token = int(buf[2 * i]) | int(buf[2 * i + 1]) << 8;
      if (token >= vocab_size_)
        throw std::runtime_error(fmt::format("{}: token {} at index {} is outside the vocabulary of {}", path_, token,
                                             start + done + i, vocab_size_));
      out[done + i] = token;
    }
    done += n;
  }
}

void write_shard(const std::string& path, const uint16_t* tokens, size_t count) {
  if (count > size_t(INT32_MAX))
    throw std::runtime_error(fmt::format("{}: {} tokens do not fit a shard header (max {})", path, count, INT32_MAX));
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(fmt::format("{}: cannot create: {}", tmp, std::strerror(errno)));
  try {
    unsigned char header[kHeaderBytes] = {};
    store_le_i32(header, kShardMagic);
    store_le_i32(header + 4, kShardVersion);
    store_le_i32(header + 8, int32_t(count));
    write_all(fd, header, sizeof header, tmp);
    // Tokens go out little-endian whatever the host, through a bounded staging buffer.
    constexpr size_t kChunk = 1 << 16;
    std::vector<unsigned char> buf(2 * kChunk);
    for (size_t done = 0; done < count;) {
      const size_t n = std::min(kChunk, count - done);
      for (size_t i = 0; i < n; ++i) {
        buf[2 * i] = (unsigned char)(tokens[done + i] & 0xFF);
        buf[2 * i + 1] = (unsigned char)(tokens[done + i] >> 8);
      }
      write_all(fd, buf.data(), 2 * n, tmp);
      done += n;
    }
    if (::fsync(fd) != 0) throw std::runtime_error(fmt::format("{}: fsync failed: {}", tmp, std::strerror(errno)));
    if (::close(fd) != 0) {
      fd = -1;
      throw std::runtime_error(fmt::format("{}: close failed: {}", tmp, std::strerror(errno)));
    }
    fd = -1;
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      throw std::runtime_error(fmt::format("{}: cannot rename {} into place: {}", path, tmp, std::strerror(errno)));
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
}

std::vector<std::string> expand_glob(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> files;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) files.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (rc == GLOB_NOMATCH || (rc == 0 && files.empty()))
    throw std::runtime_error(fmt::format("no files match the pattern '{}'", pattern));
  if (rc != 0) throw std::runtime_error(fmt::format("cannot expand the pattern '{}' (glob error {})", pattern, rc));
  // glob() sorts by the locale's collation; plain byte order keeps shard order identical everywhere.
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace llmc
