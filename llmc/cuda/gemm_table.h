// The table of cuBLASLt algorithms chosen per GEMM shape (LLMC_GEMM_SEARCH=timed,
// llmc/cuda/gemm_search.cuh), and its bytes: what rank 0 sends to every rank and what a checkpoint
// keeps so that a resumed run runs the same algorithms. Plain C++ (no CUDA types), so that the unit
// tests and the host code can read it.
//
// cuBLASLt documents its algorithm struct (cublasLtMatmulAlgo_t, 8 uint64 words) as trivially
// serializable and valid again with the same library version, so the table stores the words as
// they are, with the version of the cuBLASLt that chose them. Bytes, all uint64 little-endian:
//   [0] kGemmTableMagic [1] kGemmTableVersion [2] cublasLtGetVersion() of the chooser [3] count
//   then per entry 21 words: m, n, k, trans_a, trans_b, epilogue, accumulate, align_a, align_b,
//   align_d, a_type, b_type (GemmKey; the types as int64, -1 in two's complement), fast_accum, then
//   the 8 words of the algorithm. Older tables are still read: version 2 (20 words an entry, before
//   fast accumulation: fast_accum 0) and version 1 (18 words, before FP8 operands: no types, -1).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace llmc {

// How many of the heuristic's algorithms the timed search asks for per shape.
constexpr int kGemmSearchCandidates = 16;

// Every parameter that can change cuBLASLt's choice of kernel for our GEMMs. The alignments (in
// bytes, powers of two up to 256) of A, B and D are part of it: a kernel chosen for 256-byte-aligned
// buffers may not run on a per-layer tensor that starts only 16 bytes past such a boundary.
// A and B's types are part of it too: -1 where they are D's (every floatX GEMM), else their
// cudaDataType (FP8 operands, --fp8 1).
struct GemmKey {
  int m, n, k;
  bool trans_a, trans_b;
  int epilogue;
  bool accumulate;
  uint32_t align_a, align_b, align_d;
  int a_type = -1, b_type = -1;
  bool fast_accum = false;  // FP8 operands: cuBLASLt's fast accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM)
  bool operator<(const GemmKey& o) const {
    return std::tie(m, n, k, trans_a, trans_b, epilogue, accumulate, align_a, align_b, align_d, a_type, b_type,
                    fast_accum) < std::tie(o.m, o.n, o.k, o.trans_a, o.trans_b, o.epilogue, o.accumulate, o.align_a,
                                           o.align_b, o.align_d, o.a_type, o.b_type, o.fast_accum);
  }
  bool operator==(const GemmKey& o) const { return !(*this < o) && !(o < *this); }
};

// A cublasLtMatmulAlgo_t's bytes (gemm_search.cuh checks the size).
using GemmAlgoWords = std::array<uint64_t, 8>;

constexpr uint64_t kGemmTableMagic = 0x3142544D4D4547ull;  // "GEMMTB1"
constexpr uint64_t kGemmTableVersion = 3;

struct GemmTable {
  uint64_t library_version = 0;  // cublasLtGetVersion() of the library that chose the algorithms
  std::map<GemmKey, GemmAlgoWords> algos;
};

std::vector<uint8_t> gemm_table_bytes(const GemmTable& table);
// The table in `bytes`; throws std::runtime_error naming `source` (e.g. the checkpoint file) for a
// bad magic or version, a length that does not match the count, or a field out of range.
GemmTable gemm_table_from_bytes(const std::vector<uint8_t>& bytes, const std::string& source);

}  // namespace llmc
