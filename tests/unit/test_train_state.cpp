#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "llmc/io/checkpoint_files.h"
#include "llmc/io/checkpoint_state.h"
#include "tests/unit/test_support.h"

namespace {

std::string temp_dir() { return test_support::fresh_dir("build/tmp/unit_train_state"); }

llmc::TrainState example() {
  llmc::TrainState s;
  s.step = 1234;
  s.world_size = 4;
  s.rank = 2;
  s.batch_size = 8;
  s.seq_len = 1024;
  s.shuffle = true;
  s.seed = 0xFEEDFACECAFEBEEFull;
  s.loader.epoch = 3;
  s.loader.shard = 7;
  s.loader.step = 12345;
  s.loader.epoch_rng_state = 0x0123456789ABCDEFull;
  s.sample_rng_state = 0xFFFFFFFFFFFFFFF1ull;
  s.num_parameters = 1000;
  s.state_offset = 500;
  s.state_size = 250;
  s.optimizer_state = {{"m", {}}, {"v", {}}};
  for (int i = 0; i < 250; ++i) {
    s.optimizer_state[0].values.push_back(0.5f * float(i) - 3.25f);
    s.optimizer_state[1].values.push_back(1e-8f * float(i * i));
  }
  s.model_checksum = 0x1122334455667788ull;
  s.loss_window = {3.5f, 3.25f, 3.0f};
  s.norm_window = {0.5f, 0.75f};
  return s;
}

std::string error_of(const std::string& path) {
  return test_support::error_message([&] { llmc::read_train_state(path, {"m", "v"}); });
}

}  // namespace

TEST_CASE("train state: write then read gives back every field") {
  const std::string path = temp_dir() + "/roundtrip.bin";
  const llmc::TrainState s = example();
  llmc::write_train_state(path, s);
  CHECK(std::filesystem::file_size(path) == 64 * 8 + (2 * 250 + 3 + 2) * 4);
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  const llmc::TrainState r = llmc::read_train_state(path, {"m", "v"});
  CHECK(r.step == s.step);
  CHECK(r.world_size == s.world_size);
  CHECK(r.rank == s.rank);
  CHECK(r.batch_size == s.batch_size);
  CHECK(r.seq_len == s.seq_len);
  CHECK(r.shuffle == s.shuffle);
  CHECK(r.seed == s.seed);
  CHECK(r.loader == s.loader);
  CHECK(r.sample_rng_state == s.sample_rng_state);
  CHECK(r.num_parameters == s.num_parameters);
  CHECK(r.state_offset == s.state_offset);
  CHECK(r.state_size == s.state_size);
  CHECK(r.optimizer_state[0].values == s.optimizer_state[0].values);
  CHECK(r.optimizer_state[1].values == s.optimizer_state[1].values);
  CHECK(r.model_checksum == s.model_checksum);
  CHECK(r.loss_window == s.loss_window);
  CHECK(r.norm_window == s.norm_window);
  CHECK(r.kernel_choices.empty());
  CHECK(r.scaling_state.empty());
}

TEST_CASE("train state: the scaling state round-trips after the kernel choices, checksummed; version 3 files still load") {
  const std::string dir = temp_dir();
  const std::string path = dir + "/scaling.bin";
  llmc::TrainState s = example();
  s.kernel_choices = {1, 2, 3};
  s.scaling_state = {9, 8, 7, 6, 5};
  llmc::write_train_state(path, s);
  CHECK(std::filesystem::file_size(path) == 64 * 8 + (2 * 250 + 3 + 2) * 4 + 3 + 5);
  const llmc::TrainState r = llmc::read_train_state(path, {"m", "v"});
  CHECK(r.kernel_choices == s.kernel_choices);
  CHECK(r.scaling_state == s.scaling_state);

  std::string bytes = test_support::read_bytes(path);
  bytes.back() ^= 0x01;
  test_support::write_bytes(dir + "/flipped_scaling.bin", bytes);
  CHECK(error_of(dir + "/flipped_scaling.bin").find("checksum mismatch") != std::string::npos);
  // A header claiming more scaling bytes than the file has.
  std::string longer = test_support::read_bytes(path);
  const uint64_t more = 6;
  std::memcpy(&longer[22 * 8], &more, sizeof more);
  test_support::write_bytes(dir + "/short_scaling.bin", longer);
  CHECK(error_of(dir + "/short_scaling.bin").find("6 of scaling state") != std::string::npos);

  // A version 3 file: kernel choices, no scaling state, version word 3, checksum recomputed.
  llmc::TrainState v3 = example();
  v3.kernel_choices = {4, 5};
  llmc::write_train_state(dir + "/v4.bin", v3);
  std::string v3_bytes = test_support::read_bytes(dir + "/v4.bin");
  const auto set_word = [&](std::string& b, size_t word, uint64_t value) {
    std::memcpy(&b[word * 8], &value, sizeof value);
  };
  set_word(v3_bytes, 1, 3);
  set_word(v3_bytes, 20, 0);
  set_word(v3_bytes, 20, llmc::checksum_of(v3_bytes.data(), v3_bytes.size()));
  test_support::write_bytes(dir + "/v3.bin", v3_bytes);
  const llmc::TrainState old = llmc::read_train_state(dir + "/v3.bin", {"m", "v"});
  CHECK(old.kernel_choices == v3.kernel_choices);
  CHECK(old.scaling_state.empty());
  // A version 3 header that claims a scaling state is inconsistent.
  set_word(v3_bytes, 22, 2);
  test_support::write_bytes(dir + "/v3_scaling.bin", v3_bytes + "12");
  CHECK(error_of(dir + "/v3_scaling.bin").find("inconsistent") != std::string::npos);
}

TEST_CASE("train state: the kernel choices round-trip and are checksummed; version 2 files still load") {
  const std::string dir = temp_dir();
  const std::string path = dir + "/choices.bin";
  llmc::TrainState s = example();
  s.kernel_choices = {1, 2, 3, 250, 0, 7, 9};
  llmc::write_train_state(path, s);
  CHECK(std::filesystem::file_size(path) == 64 * 8 + (2 * 250 + 3 + 2) * 4 + 7);
  const llmc::TrainState r = llmc::read_train_state(path, {"m", "v"});
  CHECK(r.kernel_choices == s.kernel_choices);
  CHECK(r.norm_window == s.norm_window);

  std::string bytes = test_support::read_bytes(path);
  bytes.back() ^= 0x10;
  test_support::write_bytes(dir + "/flipped_choice.bin", bytes);
  CHECK(error_of(dir + "/flipped_choice.bin").find("checksum mismatch") != std::string::npos);

  // A version 2 file: the same state without kernel choices, version word 2, checksum recomputed
  // (the checksum of the file with word 20 read as 0).
  llmc::TrainState v2 = example();
  llmc::write_train_state(dir + "/v3.bin", v2);
  std::string v2_bytes = test_support::read_bytes(dir + "/v3.bin");
  const auto set_word = [&](std::string& b, size_t word, uint64_t value) {
    std::memcpy(&b[word * 8], &value, sizeof value);
  };
  set_word(v2_bytes, 1, 2);
  set_word(v2_bytes, 20, 0);
  set_word(v2_bytes, 20, llmc::checksum_of(v2_bytes.data(), v2_bytes.size()));
  test_support::write_bytes(dir + "/v2.bin", v2_bytes);
  const llmc::TrainState old = llmc::read_train_state(dir + "/v2.bin", {"m", "v"});
  CHECK(old.kernel_choices.empty());
  CHECK(old.loss_window == v2.loss_window);
  // A version 2 header that claims kernel choices is inconsistent.
  set_word(v2_bytes, 21, 7);
  test_support::write_bytes(dir + "/v2_choices.bin", v2_bytes + "1234567");
  CHECK(error_of(dir + "/v2_choices.bin").find("inconsistent") != std::string::npos);
}

TEST_CASE("train state: a flipped bit anywhere fails the checksum; version 1 files still load") {
  const std::string dir = temp_dir();
  const std::string good = dir + "/checksummed.bin";
  llmc::write_train_state(good, example());
  const auto size = std::filesystem::file_size(good);
  // In the loader position, in m, in v and in the last window value.
  for (std::uintmax_t offset : {std::uintmax_t(11 * 8), std::uintmax_t(512 + 40), std::uintmax_t(512 + 1000 + 8),
                                size - 1}) {
    const std::string bad = dir + "/flipped.bin";
    std::filesystem::copy_file(good, bad, std::filesystem::copy_options::overwrite_existing);
    {
      std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(std::streamoff(offset));
      const char c = char(f.get());
      f.seekp(std::streamoff(offset));
      f.put(char(c ^ 0x04));
    }
    const std::string msg = error_of(bad);
    CHECK_MESSAGE(msg.find("checksum mismatch") != std::string::npos, offset, ": ", msg);
    CHECK(msg.find(bad) != std::string::npos);
  }
  // A version 1 file: the 64-word header of the first format (no checksums, no windows) + m + v.
  llmc::TrainState s = example();
  uint64_t h[64] = {};
  const uint64_t words[] = {20240527, 1, 7, 1, 0, 2, 16, 0, 42, 0, 0, 3, 99, 5, 250, 0, 250};
  std::copy(std::begin(words), std::end(words), h);
  const std::string v1 = dir + "/v1.bin";
  {
    std::ofstream f(v1, std::ios::binary);
    f.write(reinterpret_cast<const char*>(h), sizeof h);
    f.write(reinterpret_cast<const char*>(s.optimizer_state[0].values.data()), 250 * 4);
    f.write(reinterpret_cast<const char*>(s.optimizer_state[1].values.data()), 250 * 4);
  }
  const llmc::TrainState r = llmc::read_train_state(v1, {"m", "v"});
  CHECK(r.step == 7);
  CHECK(r.loader.step == 3);
  CHECK(r.optimizer_state[0].values == s.optimizer_state[0].values);
  CHECK(r.model_checksum == 0);
  CHECK(r.loss_window.empty());
}

TEST_CASE("train state: corrupted or wrongly sized files are rejected with their name") {
  const std::string dir = temp_dir();
  const std::string good = dir + "/good.bin";
  llmc::write_train_state(good, example());

  const std::string truncated = dir + "/truncated.bin";
  std::filesystem::copy_file(good, truncated, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(truncated, std::filesystem::file_size(good) - 4);
  CHECK(error_of(truncated).find(truncated) != std::string::npos);

  const std::string longer = dir + "/longer.bin";
  std::filesystem::copy_file(good, longer, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(longer, std::filesystem::file_size(good) + 8);
  CHECK(error_of(longer).find(longer) != std::string::npos);

  const std::string short_header = dir + "/short_header.bin";
  std::filesystem::copy_file(good, short_header, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(short_header, 100);
  CHECK(error_of(short_header).find(short_header) != std::string::npos);

  const std::string bad_magic = dir + "/bad_magic.bin";
  std::filesystem::copy_file(good, bad_magic, std::filesystem::copy_options::overwrite_existing);
  {
    std::fstream f(bad_magic, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f.put('\x7f');
  }
  const std::string msg = error_of(bad_magic);
  CHECK(msg.find(bad_magic) != std::string::npos);
  CHECK(msg.find("magic") != std::string::npos);

  const std::string bad_rank = dir + "/bad_rank.bin";
  std::filesystem::copy_file(good, bad_rank, std::filesystem::copy_options::overwrite_existing);
  {
    std::fstream f(bad_rank, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4 * 8);  // rank 9 of 4
    f.put('\x09');
  }
  CHECK(error_of(bad_rank).find(bad_rank) != std::string::npos);

  const std::string missing = dir + "/missing.bin";
  std::filesystem::remove(missing);
  CHECK(error_of(missing).find(missing) != std::string::npos);
  CHECK(error_of(good).empty());
}
