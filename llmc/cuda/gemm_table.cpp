// The GEMM algorithm table's bytes (layout in gemm_table.h).
#include "llmc/cuda/gemm_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace llmc {

namespace {

constexpr size_t kHeaderWords = 4;
constexpr size_t kKeyWords = 13;
constexpr size_t kVersion2KeyWords = 12;  // no fast accumulation
constexpr size_t kVersion1KeyWords = 10;  // no operand types either
constexpr size_t kAlgoWords = std::tuple_size<GemmAlgoWords>::value;

std::array<uint64_t, kKeyWords> key_words(const GemmKey& k) {
  return {uint64_t(k.m), uint64_t(k.n), uint64_t(k.k), k.trans_a, k.trans_b, uint64_t(k.epilogue), k.accumulate,
          k.align_a, k.align_b, k.align_d, uint64_t(int64_t(k.a_type)), uint64_t(int64_t(k.b_type)), k.fast_accum};
}

// -1, or a cudaDataType (all below 256).
bool is_operand_type(uint64_t word) {
  const int64_t t = int64_t(word);
  return t >= -1 && t < 256;
}

bool is_alignment(uint64_t bytes) { return bytes >= 1 && bytes <= 256 && (bytes & (bytes - 1)) == 0; }

// The key in words w[0..key_words) (kKeyWords, or an older version's fewer: the fields it lacks at
// their defaults); throws naming `source` when a field cannot be one of ours.
GemmKey key_from_words(const uint64_t* w, size_t key_words, const std::string& source, size_t entry) {
  const auto positive_int = [](uint64_t x) { return x >= 1 && x <= uint64_t(INT32_MAX); };
  const bool typed = key_words >= kVersion2KeyWords, with_fast_accum = key_words >= kKeyWords;
  if (!positive_int(w[0]) || !positive_int(w[1]) || !positive_int(w[2]) || w[3] > 1 || w[4] > 1 ||
      w[5] > uint64_t(INT32_MAX) || w[6] > 1 || !is_alignment(w[7]) || !is_alignment(w[8]) || !is_alignment(w[9]) ||
      (typed && (!is_operand_type(w[10]) || !is_operand_type(w[11]))) || (with_fast_accum && w[12] > 1))
    throw std::runtime_error(fmt::format("{}: GEMM algorithm table entry {} is not a GEMM shape", source, entry));
  return GemmKey{int(w[0]), int(w[1]), int(w[2]), w[3] == 1, w[4] == 1, int(w[5]), w[6] == 1,
                 uint32_t(w[7]), uint32_t(w[8]), uint32_t(w[9]), typed ? int(int64_t(w[10])) : -1,
                 typed ? int(int64_t(w[11])) : -1, with_fast_accum && w[12] == 1};
}

}  // namespace

std::vector<uint8_t> gemm_table_bytes(const GemmTable& table) {
  std::vector<uint64_t> words = {kGemmTableMagic, kGemmTableVersion, table.library_version, table.algos.size()};
  for (const auto& [key, algo] : table.algos) {
    const std::array<uint64_t, kKeyWords> k = key_words(key);
    words.insert(words.end(), k.begin(), k.end());
    words.insert(words.end(), algo.begin(), algo.end());
  }
  std::vector<uint8_t> bytes(words.size() * sizeof(uint64_t));
  std::memcpy(bytes.data(), words.data(), bytes.size());
  return bytes;
}

GemmTable gemm_table_from_bytes(const std::vector<uint8_t>& bytes, const std::string& source) {
  if (bytes.size() % sizeof(uint64_t) != 0 || bytes.size() < kHeaderWords * sizeof(uint64_t))
    throw std::runtime_error(fmt::format("{}: {} bytes are not a GEMM algorithm table", source, bytes.size()));
  std::vector<uint64_t> w(bytes.size() / sizeof(uint64_t));
  std::memcpy(w.data(), bytes.data(), bytes.size());
  if (w[0] != kGemmTableMagic || w[1] < 1 || w[1] > kGemmTableVersion)
    throw std::runtime_error(fmt::format("{}: not a GEMM algorithm table of version 1 to {} (magic {:#x}, version {})",
                                         source, kGemmTableVersion, w[0], w[1]));
  const size_t key_words = w[1] == 1 ? kVersion1KeyWords : w[1] == 2 ? kVersion2KeyWords : kKeyWords;
  const size_t kEntryWords = key_words + kAlgoWords;
  const uint64_t count = w[3];
  if ((w.size() - kHeaderWords) / kEntryWords != count || (w.size() - kHeaderWords) % kEntryWords != 0)
    throw std::runtime_error(fmt::format("{}: GEMM algorithm table of {} entries in {} bytes", source, count,
                                         bytes.size()));
  GemmTable table;
  table.library_version = w[2];
  for (size_t e = 0; e < count; ++e) {
    const uint64_t* entry = w.data() + kHeaderWords + e * kEntryWords;
    GemmAlgoWords algo{};
    std::copy(entry + key_words, entry + kEntryWords, algo.begin());
    if (!table.algos.emplace(key_from_words(entry, key_words, source, e), algo).second)
      throw std::runtime_error(fmt::format("{}: GEMM algorithm table entry {} repeats a shape", source, e));
  }
  return table;
}

}  // namespace llmc
