// The cuBLAS/cuBLASLt state every matmul and the fallback attention share: the two library handles,
// the caller's workspace, and the algorithm chosen for each GEMM shape so that a training step runs
// no heuristic query after its first micro-step.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

#include "llmc/cuda/common.cuh"

namespace llmc {

inline void cublas_check(cublasStatus_t status, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS error at ") + file + ":" + std::to_string(line) + ": " +
                             cublasGetStatusString(status));
}
#define CUBLAS_CHECK(call) ::llmc::cublas_check((call), __FILE__, __LINE__)

// Every parameter that can change cuBLASLt's choice of kernel for our GEMMs. The alignments (in
// bytes, powers of two up to 256) of A, B and D are part of it: a kernel chosen for 256-byte-aligned
// buffers may not run on a per-layer tensor that starts only 16 bytes past such a boundary.
struct GemmKey {
  int m, n, k;
  bool trans_a, trans_b;
  int epilogue;
  bool accumulate;
  uint32_t align_a, align_b, align_d;
  bool operator<(const GemmKey& o) const {
    return std::tie(m, n, k, trans_a, trans_b, epilogue, accumulate, align_a, align_b, align_d) <
           std::tie(o.m, o.n, o.k, o.trans_a, o.trans_b, o.epilogue, o.accumulate, o.align_a, o.align_b, o.align_d);
  }
};

// The largest power of two, at most 256 (cuBLASLt's default assumption), that divides both the
// address and the leading dimension in bytes: the alignment a kernel may rely on for this matrix.
inline uint32_t lt_alignment(const void* p, long long ld_bytes) {
  const uintptr_t bits = reinterpret_cast<uintptr_t>(p) | static_cast<uintptr_t>(ld_bytes) | 256u;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

class BlasContext {
 public:
  // `workspace` (device memory, `workspace_bytes` long; 32 MiB is what Hopper kernels want) stays
  // owned by the caller and must outlive this object.
  BlasContext(void* workspace, size_t workspace_bytes) : workspace_(workspace), workspace_bytes_(workspace_bytes) {
    CUBLAS_CHECK(cublasLtCreate(&lt_));
    CUBLAS_CHECK(cublasCreate(&blas_));
  }
  ~BlasContext() {
    cublasDestroy(blas_);
    cublasLtDestroy(lt_);
  }
  BlasContext(const BlasContext&) = delete;
  BlasContext& operator=(const BlasContext&) = delete;

  cublasLtHandle_t lt() const { return lt_; }
  // cuBLAS proper (the fallback attention's batched GEMMs) on `stream`, with the same scratch as the
  // cuBLASLt matmuls. cublasSetStream resets the handle's workspace to cuBLAS's own pool (cuBLAS
  // documentation, cublasSetStream), memory outside the plan: ours is set again after every change
  // of stream (only then: the attention asks for the handle in every layer, on the same stream).
  cublasHandle_t blas(cudaStream_t stream) {
    if (blas_stream_ != stream) {
      CUBLAS_CHECK(cublasSetStream(blas_, stream));
      CUBLAS_CHECK(cublasSetWorkspace(blas_, workspace_, workspace_bytes_));
      blas_stream_ = stream;
    }
    return blas_;
  }
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return workspace_bytes_; }

  // The algorithm for `key`, asking cuBLASLt's heuristic only the first time a key is seen; null
  // when cuBLASLt has none (e.g. an epilogue it does not offer for these types).
  const cublasLtMatmulAlgo_t* algo(const GemmKey& key, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                   cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c) {
    auto it = algos_.find(key);
    if (it == algos_.end()) it = algos_.emplace(key, query_heuristic(key, op, a, b, c)).first;
    return it->second ? &*it->second : nullptr;
  }
  size_t cached_algorithms() const { return algos_.size(); }

 private:
  std::optional<cublasLtMatmulAlgo_t> query_heuristic(const GemmKey& key, cublasLtMatmulDesc_t op,
                                                      cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                      cublasLtMatrixLayout_t c) {
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t workspace = workspace_bytes_;
    const struct {
      cublasLtMatmulPreferenceAttributes_t attribute;
      uint32_t bytes;
    } alignments[] = {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a},
                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b},
                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_d},
                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d}};
    cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                 &workspace, sizeof(workspace));
    for (const auto& a : alignments)
      if (status == CUBLAS_STATUS_SUCCESS)
        status = cublasLtMatmulPreferenceSetAttribute(pref, a.attribute, &a.bytes, sizeof(a.bytes));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulAlgoGetHeuristic(lt_, op, a, b, c, c, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    // NOT_SUPPORTED is how the heuristic says "no algorithm"; anything else is a real error.
    if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0)) return std::nullopt;
    CUBLAS_CHECK(status);
    return result.algo;
  }

  cublasLtHandle_t lt_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::optional<cudaStream_t> blas_stream_;  // the stream blas_ was last set to (none yet)
  void* workspace_;
  size_t workspace_bytes_;
  std::map<GemmKey, std::optional<cublasLtMatmulAlgo_t>> algos_;
};

}  // namespace llmc
