#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "llmc/io/checkpoint_files.h"
#include "tests/unit/test_support.h"

namespace fs = std::filesystem;

namespace {

std::string fresh_dir(const std::string& name) {
  return test_support::fresh_dir("build/tmp/unit_checkpoint_files/" + name);
}

void touch(const std::string& path) { std::ofstream(path) << "x"; }

}  // namespace

TEST_CASE("checksum: reference values of an independent implementation") {
  // Computed with a separate Python implementation of the documented algorithm.
  CHECK(llmc::checksum_of("", 0) == 0x4f72d5e517c2ee8dull);
  const char* fox = "The quick brown fox jumps over the lazy dog";
  CHECK(llmc::checksum_of(fox, std::strlen(fox)) == 0xa461f347de78d066ull);
}

TEST_CASE("checksum: any split of the bytes gives the same digest; any change another") {
  std::vector<unsigned char> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 37 + 11);
  const uint64_t whole = llmc::checksum_of(data.data(), data.size());
  for (size_t a : {0, 1, 3, 7, 8, 9, 500}) {
    for (size_t b : {size_t(0), size_t(5), size_t(13)}) {
      llmc::Checksum64 c;
      c.update(data.data(), a);
      c.update(data.data() + a, b);
      c.update(data.data() + a + b, data.size() - a - b);
      CHECK(c.digest() == whole);
    }
  }
  for (size_t byte : {size_t(0), size_t(7), size_t(8), size_t(999)}) {
    data[byte] ^= 0x10;
    CHECK(llmc::checksum_of(data.data(), data.size()) != whole);
    data[byte] ^= 0x10;
  }
  // Trailing zero bytes are part of the content.
  const std::vector<unsigned char> zeros(9, 0);
  CHECK(llmc::checksum_of(zeros.data(), 3) != llmc::checksum_of(zeros.data(), 4));
  CHECK(llmc::checksum_of(zeros.data(), 8) != llmc::checksum_of(zeros.data(), 9));
}

TEST_CASE("atomic write: complete file, no .tmp, failure leaves neither") {
  const std::string dir = fresh_dir("atomic");
  const std::string path = dir + "/a.bin";
  llmc::write_file_atomically(path, [](FILE* f) { return std::fputs("hello", f) >= 0; });
  CHECK(fs::file_size(path) == 5);
  CHECK_FALSE(fs::exists(path + ".tmp"));
  CHECK(llmc::file_checksum(path) == llmc::checksum_of("hello", 5));
  // A failing writer: the old file stays, the .tmp is removed, the error names the file.
  const std::string error = test_support::thrown_message([&] {
    llmc::write_file_atomically(path, [](FILE* f) {
      std::fputs("partial", f);
      return false;
    });
  });
  CHECK(error.find(path) != std::string::npos);
  CHECK(fs::file_size(path) == 5);
  CHECK_FALSE(fs::exists(path + ".tmp"));
  CHECK_THROWS_AS(llmc::write_file_atomically(dir + "/no/such/dir/x", [](FILE*) { return true; }), std::runtime_error);
  CHECK_THROWS_AS(llmc::file_checksum(dir + "/missing"), std::runtime_error);
}

TEST_CASE("checkpoint names, DONE markers, retention and stale temporaries") {
  const std::string dir = fresh_dir("retention");
  CHECK(llmc::checkpoint_model_path(dir, 12) == dir + "/model_00000012.bin");
  CHECK(llmc::checkpoint_state_path(dir, 12, 3) == dir + "/state_00000012_00003.bin");
  CHECK(llmc::checkpoint_done_path(dir, 12) == dir + "/DONE_00000012");
  for (int step : {2, 4, 6, 8, 10, 12}) {
    touch(llmc::checkpoint_model_path(dir, step));
    touch(llmc::checkpoint_state_path(dir, step, 0));
    touch(llmc::checkpoint_state_path(dir, step, 1));
    llmc::write_done_marker(dir, step);
  }
  touch(llmc::checkpoint_model_path(dir, 14));  // incomplete: no DONE marker
  touch(dir + "/DONE_0000001x");                // not a marker name
  std::ifstream marker(llmc::checkpoint_done_path(dir, 12));
  int content = 0;
  marker >> content;
  CHECK(content == 12);
  CHECK(llmc::completed_checkpoints(dir) == std::vector<int>{12, 10, 8, 6, 4, 2});

  CHECK(llmc::retire_checkpoints(dir, 0, 0, 2).empty());  // -nk 0: keep all
  // Keep the newest 2; multiples of 4 are major.
  CHECK(llmc::retire_checkpoints(dir, 2, 4, 2) == std::vector<int>{6, 2});
  CHECK(llmc::completed_checkpoints(dir) == std::vector<int>{12, 10, 8, 4});
  for (int step : {2, 6}) {
    CHECK_FALSE(fs::exists(llmc::checkpoint_model_path(dir, step)));
    CHECK_FALSE(fs::exists(llmc::checkpoint_state_path(dir, step, 0)));
    CHECK_FALSE(fs::exists(llmc::checkpoint_state_path(dir, step, 1)));
  }
  CHECK(fs::exists(llmc::checkpoint_model_path(dir, 14)));
  CHECK(llmc::retire_checkpoints(dir, 1, 0, 2) == std::vector<int>{10, 8, 4});
  CHECK(llmc::completed_checkpoints(dir) == std::vector<int>{12});

  touch(dir + "/model_00000014.bin.tmp");
  touch(dir + "/state_00000014_00000.bin.tmp");
  touch(dir + "/DONE_00000014.tmp");
  touch(dir + "/main.log.tmp");
  touch(dir + "/notes.tmp");  // not ours: kept
  CHECK(llmc::remove_stale_temporaries(dir) == 4);
  CHECK(fs::exists(dir + "/notes.tmp"));
  CHECK_FALSE(fs::exists(dir + "/DONE_00000014.tmp"));
  CHECK_THROWS_AS(llmc::completed_checkpoints(dir + "/missing"), std::runtime_error);
}
