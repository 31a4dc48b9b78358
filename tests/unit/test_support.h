// Helpers shared by the unit tests in tests/unit/: scratch files and directories, whole-file
// reads and writes, substring, prefix and suffix tests, the message of an expected error, and
// model shapes.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include "llmc/gpt2.h"

namespace test_support {

// A path in the system's temporary directory for this test run: the process id keeps two runs of
// the tests (say, two worktrees) from clobbering each other's files.
inline std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("llmc_test_" + std::to_string(getpid()) + "_" + name)).string();
}

// `dir` emptied, or created: a test that writes under build/tmp starts from nothing, while the
// files it leaves stay there to be looked at after a failure.
inline std::string fresh_dir(const std::string& dir) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// A new directory of its own in the temporary directory, removed with everything in it when the
// test ends.
class TempDir {
 public:
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "llmc_test_XXXXXX").string();
    REQUIRE(mkdtemp(templ.data()) != nullptr);
    path = templ;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return path + "/" + name; }
  // Writes `content` to the file `name` in the directory and returns its path.
  std::string write(const std::string& name, const std::string& content) const {
    write_bytes(file(name), content);
    return file(name);
  }

  std::string path;
};

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}
inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The message of the E that f() throws, or nothing when it returns.
template <typename E, typename F>
std::optional<std::string> caught_message(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

// The message of the E that f() throws, or "" when it returns: for code that either accepts its
// input or rejects it, where an empty message means accepted.
template <typename E = std::runtime_error, typename F>
std::string error_message(F&& f) {
  return caught_message<E>(f).value_or("");
}

// The message of the E that f() must throw; the test case stops with a failure when f() returns.
template <typename E = std::runtime_error, typename F>
std::string thrown_message(F&& f) {
  const std::optional<std::string> message = caught_message<E>(f);
  REQUIRE_MESSAGE(message.has_value(), "expected an exception, but none was thrown");
  return *message;
}

// Two layers of two heads, so that per-layer and per-head indexing is exercised; each test picks
// the sizes its arithmetic needs.
inline llmc::GPT2Config two_layer_config(int channels, int max_seq_len, int vocab_size, int padded_vocab_size) {
  llmc::GPT2Config c;
  c.num_layers = 2;
  c.num_heads = 2;
  c.channels = channels;
  c.max_seq_len = max_seq_len;
  c.vocab_size = vocab_size;
  c.padded_vocab_size = padded_vocab_size;
  return c;
}

// Checks each field of `c` on its own, so that a failure shows which one differs.
inline void check_shape(const llmc::GPT2Config& c, int num_layers, int num_heads, int channels, int max_seq_len,
                        int vocab_size, int padded_vocab_size) {
  INFO("shape ", llmc::describe_shape(c));
  CHECK(c.num_layers == num_layers);
  CHECK(c.num_heads == num_heads);
  CHECK(c.channels == channels);
  CHECK(c.max_seq_len == max_seq_len);
  CHECK(c.vocab_size == vocab_size);
  CHECK(c.padded_vocab_size == padded_vocab_size);
}

}  // namespace test_support
