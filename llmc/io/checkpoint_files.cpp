#include "llmc/io/checkpoint_files.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <stdexcept>
#include <unistd.h>

#include "llmc/test_hooks.h"

namespace llmc {

namespace fs = std::filesystem;

namespace {

uint64_t load_le64(const uint8_t* p) {
  uint64_t w = 0;
  for (int i = 7; i >= 0; --i) w = (w << 8) | p[i];
  return w;
}

std::string parent_dir(const std::string& path) {
  const std::string parent = fs::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

// A rename or unlink is durable only once the directory that holds the name is synced.
void sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) throw std::runtime_error(fmt::format("{}: cannot open the directory to sync it: {}", dir, std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems (e.g. some FUSE mounts) cannot sync directories; the data itself is synced.
  if (rc != 0 && err != EINVAL && err != ENOTSUP)
    throw std::runtime_error(fmt::format("{}: cannot sync the directory: {}", dir, std::strerror(err)));
}

// "<prefix><8 digits>[...]": the step, or -1 for another name.
int step_of(const std::string& name, const std::string& prefix) {
  if (name.size() < prefix.size() + 8 || name.compare(0, prefix.size(), prefix) != 0) return -1;
  const std::string digits = name.substr(prefix.size(), 8);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return -1;
  return std::stoi(digits);
}

}  // namespace

void Checksum64::update(const void* data, size_t bytes) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (bytes > 0 && pending_bytes_ > 0 && pending_bytes_ < 8) {
    pending_[pending_bytes_++] = *p++;
    --bytes;
    if (pending_bytes_ == 8) {
      mix(load_le64(pending_));
      pending_bytes_ = 0;
    }
  }
  for (; bytes >= 8; bytes -= 8, p += 8) mix(load_le64(p));
  for (; bytes > 0; --bytes) pending_[pending_bytes_++] = *p++;
}

uint64_t Checksum64::digest() const {
  Checksum64 tail = *this;
  // The tail word carries the number of trailing bytes in its top byte, so inputs that differ
  // only by trailing zero bytes hash differently.
  uint8_t last[8] = {};
  std::memcpy(last, pending_, pending_bytes_);
  last[7] = uint8_t(last[7] ^ (0x80 | pending_bytes_));
  tail.mix(load_le64(last));
  uint64_t z = tail.h_;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t checksum_of(const void* data, size_t bytes) {
  Checksum64 c;
  c.update(data, bytes);
  return c.digest();
}

FileHandle open_for_reading(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  return FileHandle(f, &std::fclose);
}

uint64_t file_checksum(const std::string& path) {
  const FileHandle f = open_for_reading(path);
  Checksum64 c;
  std::vector<char> buffer(1 << 20);
  size_t got;
  while ((got = std::fread(buffer.data(), 1, buffer.size(), f.get())) > 0) c.update(buffer.data(), got);
  if (std::ferror(f.get()) != 0) throw std::runtime_error(fmt::format("{}: read error", path));
  return c.digest();
}

void write_file_atomically(const std::string& path, const std::function<bool(FILE*)>& write) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error(fmt::format("{}: cannot create: {}", tmp, std::strerror(errno)));
  errno = 0;
  bool ok = write(f) && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  int err = errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    throw std::runtime_error(fmt::format("{}: write failed: {}", path, err != 0 ? std::strerror(err) : "short write"));
  }
  test_hook_pause_before_rename();
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    throw std::runtime_error(fmt::format("{}: cannot rename {} into place: {}", path, tmp, std::strerror(err)));
  }
  sync_dir(parent_dir(path));
}

void remove_durably(const std::string& path) {
  std::error_code ec;
  if (!fs::remove(path, ec) && ec)
    throw std::runtime_error(fmt::format("{}: cannot remove: {}", path, ec.message()));
  sync_dir(parent_dir(path));
}

std::string checkpoint_model_path(const std::string& dir, int step) { return fmt::format("{}/model_{:08d}.bin", dir, step); }
std::string checkpoint_state_path(const std::string& dir, int step, int rank) {
  return fmt::format("{}/state_{:08d}_{:05d}.bin", dir, step, rank);
}
std::string checkpoint_done_path(const std::string& dir, int step) { return fmt::format("{}/DONE_{:08d}", dir, step); }

std::vector<int> completed_checkpoints(const std::string& dir) {
  std::vector<int> steps;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() == 13 && step_of(name, "DONE_") >= 0) steps.push_back(step_of(name, "DONE_"));
  }
  if (ec) throw std::runtime_error(fmt::format("cannot list the output dir '{}': {}", dir, ec.message()));
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

void write_done_marker(const std::string& dir, int step) {
  write_file_atomically(checkpoint_done_path(dir, step), [&](FILE* f) { return std::fprintf(f, "%d\n", step) > 0; });
}

std::vector<int> retire_checkpoints(const std::string& dir, int keep_last, int major_every, int world_size) {
  std::vector<int> retired;
  if (keep_last <= 0) return retired;
  const std::vector<int> steps = completed_checkpoints(dir);
  for (size_t i = size_t(keep_last); i < steps.size(); ++i) {
    const int step = steps[i];
    if (major_every > 0 && step % major_every == 0) continue;
    remove_durably(checkpoint_done_path(dir, step));
    remove_durably(checkpoint_model_path(dir, step));
    // A checkpoint a run with more ranks wrote before this run resumed it (re-sharded) has more.
    for (int rank = 0; rank < world_size || fs::exists(checkpoint_state_path(dir, step, rank)); ++rank)
      remove_durably(checkpoint_state_path(dir, step, rank));
    retired.push_back(step);
  }
  return retired;
}

int remove_stale_temporaries(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".tmp") continue;
    if (step_of(name, "model_") >= 0 || step_of(name, "state_") >= 0 || step_of(name, "DONE_") >= 0 ||
        name == "main.log.tmp") {
      std::error_code rm;
      if (fs::remove(entry.path(), rm)) ++removed;
    }
  }
  return removed;
}

}  // namespace llmc
