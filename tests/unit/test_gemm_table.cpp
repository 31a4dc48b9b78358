// The GEMM algorithm table (llmc/cuda/gemm_table.h): its bytes round-trip exactly, and bytes that are
// not such a table are rejected naming their source.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "llmc/cuda/gemm_table.h"
#include "tests/unit/test_support.h"

using namespace llmc;
using test_support::contains;
using test_support::thrown_message;

namespace {

GemmTable example_table() {
  GemmTable t;
  t.library_version = 130100;
  // The forward qkv GEMM (bias epilogue, A transposed) and a weight gradient (accumulating, B
  // transposed, 16-byte-aligned A): keys that differ in every kind of field; the first with FP8
  // operands (E4M3 = 28, E5M2 = 29 in cudaDataType) and fast accumulation, the second in D's type (-1).
  t.algos[GemmKey{2304, 8192, 768, true, false, 4, false, 256, 256, 256, 28, 29, true}] = {1, 2, 3, 4, 5, 6, 7,
                                                                                            0xFFFFFFFFFFFFFFFFull};
  t.algos[GemmKey{768, 3072, 8192, false, true, 1, true, 16, 256, 32}] = {8, 0, 0, 0, 0, 0, 0, 9};
  return t;
}

// Words as the table's bytes (uint64 little-endian), for tables written out word by word.
std::vector<uint8_t> bytes_of(const std::vector<uint64_t>& words) {
  std::vector<uint8_t> bytes(words.size() * sizeof(uint64_t));
  std::memcpy(bytes.data(), words.data(), bytes.size());
  return bytes;
}

// The table's bytes with word `index` (uint64) replaced by `value`.
std::vector<uint8_t> with_word(std::vector<uint8_t> bytes, size_t index, uint64_t value) {
  std::memcpy(bytes.data() + index * sizeof(uint64_t), &value, sizeof value);
  return bytes;
}

}  // namespace

TEST_CASE("gemm table: bytes round-trip every key field and algorithm word") {
  const GemmTable t = example_table();
  const std::vector<uint8_t> bytes = gemm_table_bytes(t);
  CHECK(bytes.size() == (4 + 2 * 21) * sizeof(uint64_t));
  const GemmTable r = gemm_table_from_bytes(bytes, "rank 0");
  CHECK(r.library_version == t.library_version);
  REQUIRE(r.algos.size() == t.algos.size());
  for (auto a = t.algos.begin(), b = r.algos.begin(); a != t.algos.end(); ++a, ++b) {
    CHECK(a->first == b->first);
    CHECK(a->first.align_a == b->first.align_a);
    CHECK(a->first.accumulate == b->first.accumulate);
    CHECK(a->first.a_type == b->first.a_type);
    CHECK(a->first.b_type == b->first.b_type);
    CHECK(a->first.fast_accum == b->first.fast_accum);
    CHECK(a->second == b->second);
  }
  CHECK(gemm_table_bytes(r) == bytes);
  // An empty table (no GEMM met) is a table too.
  CHECK(gemm_table_from_bytes(gemm_table_bytes(GemmTable{7, {}}), "x").algos.empty());
}

TEST_CASE("gemm table: bytes that are not a table are rejected naming their source") {
  const std::vector<uint8_t> bytes = gemm_table_bytes(example_table());
  const auto error = [](const std::vector<uint8_t>& b) {
    return thrown_message([&] { gemm_table_from_bytes(b, "checkpoint step 5"); });
  };
  CHECK(contains(error({}), "checkpoint step 5"));
  CHECK(contains(error(std::vector<uint8_t>(bytes.begin(), bytes.end() - 8)), "2 entries"));
  CHECK(contains(error(std::vector<uint8_t>(bytes.begin(), bytes.end() - 3)), "not a GEMM algorithm table"));
  CHECK(contains(error(with_word(bytes, 0, 42)), "magic"));
  CHECK(contains(error(with_word(bytes, 1, 4)), "version"));
  CHECK(contains(error(with_word(bytes, 3, 3)), "3 entries"));
  // Entry 0's fields: m = 0, trans_a = 2, an alignment of 24 bytes.
  CHECK(contains(error(with_word(bytes, 4, 0)), "entry 0 is not a GEMM shape"));
  CHECK(contains(error(with_word(bytes, 4 + 3, 2)), "entry 0 is not a GEMM shape"));
  CHECK(contains(error(with_word(bytes, 4 + 7, 24)), "entry 0 is not a GEMM shape"));
  CHECK(contains(error(with_word(bytes, 4 + 10, 300)), "entry 0 is not a GEMM shape"));
  CHECK(contains(error(with_word(bytes, 4 + 11, uint64_t(int64_t(-2)))), "entry 0 is not a GEMM shape"));
  CHECK(contains(error(with_word(bytes, 4 + 12, 2)), "entry 0 is not a GEMM shape"));
  // Entry 1 a copy of entry 0.
  std::vector<uint8_t> repeated = bytes;
  std::memcpy(repeated.data() + (4 + 21) * 8, repeated.data() + 4 * 8, 21 * 8);
  CHECK(contains(error(repeated), "repeats a shape"));
}

TEST_CASE("gemm table: a version 1 table (no operand types) is read with the types of D") {
  // Version 1's layout, written out here word by word: one entry of 10 key words and 8 algorithm words.
  const GemmTable t = gemm_table_from_bytes(
      bytes_of({kGemmTableMagic, 1, 130100, 1, 768, 8192, 3072, 0, 0, 1, 0, 256, 16, 256, 1, 2, 3, 4, 5, 6, 7, 8}),
      "old checkpoint");
  REQUIRE(t.algos.size() == 1);
  const GemmKey& key = t.algos.begin()->first;
  CHECK(key.m == 768);
  CHECK(key.k == 3072);
  CHECK(key.epilogue == 1);
  CHECK(key.align_b == 16);
  CHECK(key.a_type == -1);
  CHECK(key.b_type == -1);
  CHECK(t.algos.begin()->second == GemmAlgoWords{1, 2, 3, 4, 5, 6, 7, 8});
}

TEST_CASE("gemm table: a version 2 table (no fast accumulation) is read with it off") {
  // Version 2's layout, written out here word by word: one entry of 12 key words (E4M3 x E4M3 = 28,
  // 28) and 8 algorithm words.
  const GemmTable t = gemm_table_from_bytes(bytes_of({kGemmTableMagic, 2, 130100, 1, 2304, 8192, 768, 1, 0, 4, 0, 256,
                                                     256, 256, 28, 28, 9, 8, 7, 6, 5, 4, 3, 2}),
                                            "version 2 checkpoint");
  REQUIRE(t.algos.size() == 1);
  const GemmKey& key = t.algos.begin()->first;
  CHECK(key.m == 2304);
  CHECK(key.trans_a);
  CHECK(key.a_type == 28);
  CHECK(key.b_type == 28);
  CHECK_FALSE(key.fast_accum);
  CHECK(t.algos.begin()->second == GemmAlgoWords{9, 8, 7, 6, 5, 4, 3, 2});
}
