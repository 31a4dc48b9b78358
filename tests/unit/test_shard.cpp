#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "llmc/data/shard.h"
#include "tests/unit/test_support.h"

using namespace llmc;
using namespace test_support;
namespace fs = std::filesystem;

namespace {

void put_le32(std::string& s, int32_t v) {
  for (int i = 0; i < 4; ++i) s += char((uint32_t(v) >> (8 * i)) & 0xFF);
}

// Builds shard bytes by hand (independently of write_shard) so headers can lie.
std::string shard_bytes(int32_t magic, int32_t version, int32_t count, const std::vector<uint16_t>& tokens) {
  std::string s;
  put_le32(s, magic);
  put_le32(s, version);
  put_le32(s, count);
  s.resize(256 * 4, '\0');
  for (uint16_t t : tokens) {
    s += char(t & 0xFF);
    s += char(t >> 8);
  }
  return s;
}

// The message of the exception ShardReader's constructor throws for `path` (empty if none).
std::string open_error(const std::string& path, int vocab = kGpt2VocabSize) {
  return error_message([&] { ShardReader r(path, vocab); });
}

}  // namespace

TEST_CASE("shard: write_shard produces the llm.c layout and ShardReader reads it back") {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  const std::vector<uint16_t> tokens = {50256, 0, 1, 257, 50255, 12345, 50256, 7};
  write_shard(path, tokens.data(), tokens.size());
  CHECK_FALSE(fs::exists(path + ".tmp"));
  // Byte-exact comparison against a hand-built file: header ints little-endian, zero padding.
  CHECK(read_bytes(path) == shard_bytes(20240520, 1, 8, tokens));

  ShardReader reader(path);
  CHECK(reader.path() == path);
  CHECK(reader.num_tokens() == 8);
  CHECK(reader.bytes_read() == 0);
  std::vector<int> all(8);
  reader.read(0, 8, all.data());
  CHECK(all == std::vector<int>(tokens.begin(), tokens.end()));
  std::vector<int> window(3);
  reader.read(3, 3, window.data());
  CHECK(window == std::vector<int>{257, 50255, 12345});
  CHECK(reader.bytes_read() == 2 * (8 + 3));
  reader.read(8, 0, window.data());

  ShardReader moved(std::move(reader));
  moved.read(6, 2, window.data());
  CHECK(window[0] == 50256);
  CHECK(window[1] == 7);
  CHECK(moved.num_tokens() == 8);
}

TEST_CASE("shard: an empty shard is valid") {
  TempDir dir;
  write_shard(dir.file("e.bin"), nullptr, 0);
  CHECK(fs::file_size(dir.file("e.bin")) == 1024);
  CHECK(ShardReader(dir.file("e.bin")).num_tokens() == 0);
}

TEST_CASE("shard: a window read touches only its own bytes, also from several threads") {
  TempDir dir;
  const std::string path = dir.file("big.bin");
  std::vector<uint16_t> tokens(300000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = uint16_t((i * 7919) % 50257);
  write_shard(path, tokens.data(), tokens.size());
  const ShardReader reader(path);
  CHECK(reader.num_tokens() == 300000);
  std::vector<int> out(10);
  reader.read(123456, 10, out.data());
  CHECK(reader.bytes_read() == 20);
  for (int i = 0; i < 10; ++i) CHECK(out[i] == tokens[123456 + i]);

  std::vector<int> mismatches(4, -1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::vector<int> buf(70000);
      const int64_t start = int64_t(t) * 70000 + 11;
      reader.read(start, 70000, buf.data());
      int bad = 0;
      for (int i = 0; i < 70000; ++i) bad += buf[i] != tokens[start + i];
      mismatches[t] = bad;
    });
  for (auto& th : threads) th.join();
  CHECK(mismatches == std::vector<int>{0, 0, 0, 0});
  CHECK(reader.bytes_read() == 20 + 4 * 2 * 70000);
}

TEST_CASE("shard: headers with a wrong magic or version are rejected, naming the file") {
  TempDir dir;
  const std::string magic = dir.file("magic.bin"), version = dir.file("version.bin");
  write_bytes(magic, shard_bytes(20240326, 1, 2, {1, 2}));
  write_bytes(version, shard_bytes(20240520, 2, 2, {1, 2}));
  const std::string m = open_error(magic), v = open_error(version);
  CHECK(contains(m, magic));
  CHECK(contains(m, "magic"));
  CHECK(contains(v, version));
  CHECK(contains(v, "version"));
}

TEST_CASE("shard: a file whose size does not match its header is rejected") {
  TempDir dir;
  const std::vector<uint16_t> five = {1, 2, 3, 4, 5};
  const std::string good = shard_bytes(20240520, 1, 5, five);
  struct Case { const char* name; std::string bytes; };
  const std::vector<Case> cases = {
      {"truncated.bin", good.substr(0, good.size() - 1)},
      {"extra.bin", good + std::string(2, '\0')},
      {"lying.bin", shard_bytes(20240520, 1, 10, five)},
      {"negative.bin", shard_bytes(20240520, 1, -5, five)},
      {"short_header.bin", good.substr(0, 100)},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const std::string path = dir.file(c.name);
    write_bytes(path, c.bytes);
    const std::string err = open_error(path);
    CHECK_FALSE(err.empty());
    CHECK(contains(err, path));
  }
  CHECK(open_error(dir.file("missing.bin")).find(dir.file("missing.bin")) != std::string::npos);
  write_bytes(dir.file("good.bin"), good);
  CHECK(open_error(dir.file("good.bin")).empty());
}

TEST_CASE("shard: a token >= vocab fails the read of the window that holds it") {
  TempDir dir;
  const std::string path = dir.file("vocab.bin");
  write_bytes(path, shard_bytes(20240520, 1, 5, {1, 2, 50257, 3, 65535}));
  const ShardReader reader(path);
  std::vector<int> out(5);
  reader.read(0, 2, out.data());
  CHECK(out[1] == 2);
  reader.read(3, 1, out.data());
  CHECK(out[0] == 3);
  const std::string err = thrown_message([&] { reader.read(1, 3, out.data()); });
  CHECK(contains(err, path));
  CHECK(contains(err, "index 2"));
  CHECK(contains(err, "50257"));
  CHECK_THROWS_AS(reader.read(4, 1, out.data()), std::runtime_error);
  // A smaller vocabulary moves the bound.
  const ShardReader small(path, 3);
  CHECK_THROWS_AS(small.read(0, 3, out.data()), std::runtime_error);
  small.read(0, 2, out.data());
}

TEST_CASE("shard: out-of-range reads are rejected with the file and range") {
  TempDir dir;
  const std::string path = dir.file("range.bin");
  const std::vector<uint16_t> tokens = {5, 6, 7, 8};
  write_shard(path, tokens.data(), tokens.size());
  const ShardReader reader(path);
  std::vector<int> out(8);
  const std::string err = thrown_message([&] { reader.read(2, 3, out.data()); });
  CHECK(contains(err, path));
  CHECK(contains(err, "[2, 5)"));
  CHECK_THROWS_AS(reader.read(-1, 1, out.data()), std::runtime_error);
  CHECK_THROWS_AS(reader.read(5, 0, out.data()), std::runtime_error);
  CHECK_THROWS_AS(reader.read(0, -1, out.data()), std::runtime_error);
  CHECK(reader.bytes_read() == 0);
}

TEST_CASE("shard: write_shard into a missing directory throws naming the file") {
  TempDir dir;
  const std::string path = dir.file("no/such/dir/x.bin");
  const uint16_t t = 1;
  const std::string err = thrown_message([&] { write_shard(path, &t, 1); });
  CHECK(contains(err, path));
}

TEST_CASE("shard: expand_glob sorts its matches and rejects a pattern that matches nothing") {
  TempDir dir;
  for (const char* name : {"d_train_000002.bin", "d_val_000000.bin", "d_train_000001.bin", "d_train_000010.bin", "x.txt"})
    write_bytes(dir.file(name), "");
  CHECK(expand_glob(dir.file("*train*.bin")) ==
        std::vector<std::string>{dir.file("d_train_000001.bin"), dir.file("d_train_000002.bin"),
                                 dir.file("d_train_000010.bin")});
  CHECK(expand_glob(dir.file("*.bin")).front() == dir.file("d_train_000001.bin"));
  CHECK(expand_glob(dir.file("x.txt")) == std::vector<std::string>{dir.file("x.txt")});
  const std::string pattern = dir.file("*nothing*.bin");
  const std::string err = thrown_message([&] { expand_glob(pattern); });
  CHECK(contains(err, pattern));
}
