// The cuBLAS/cuBLASLt state every matmul and the fallback attention share: the two library handles,
// the caller's workspace, and the algorithm chosen for each GEMM shape so that a training step runs
// no heuristic query after its first micro-step.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

#include "llmc/cuda_common.cuh"

namespace llmc {

inline void cublas_check(cublasStatus_t status, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS error at ") + file + ":" + std::to_string(line) + ": " +
                             cublasGetStatusString(status));
}
#define CUBLAS_CHECK(call) ::llmc::cublas_check((call), __FILE__, __LINE__)

// Every parameter that can change cuBLASLt's choice of kernel for our GEMMs (pointers are always
// 16-byte aligned here, so alignment is not part of the key).
struct GemmKey {
  int m, n, k;
  bool trans_a, trans_b;
  int epilogue;
  bool accumulate;
  bool operator<(const GemmKey& o) const {
    return std::tie(m, n, k, trans_a, trans_b, epilogue, accumulate) <
           std::tie(o.m, o.n, o.k, o.trans_a, o.trans_b, o.epilogue, o.accumulate);
  }
};

class BlasContext {
 public:
  // `workspace` (device memory, `workspace_bytes` long; 32 MiB is what Hopper kernels want) stays
  // owned by the caller and must outlive this object.
  BlasContext(void* workspace, size_t workspace_bytes) : workspace_(workspace), workspace_bytes_(workspace_bytes) {
    CUBLAS_CHECK(cublasLtCreate(&lt_));
    CUBLAS_CHECK(cublasCreate(&blas_));
    // cuBLAS proper (used by the fallback attention) shares the same scratch.
    CUBLAS_CHECK(cublasSetWorkspace(blas_, workspace_, workspace_bytes_));
  }
  ~BlasContext() {
    cublasDestroy(blas_);
    cublasLtDestroy(lt_);
  }
  BlasContext(const BlasContext&) = delete;
  BlasContext& operator=(const BlasContext&) = delete;

  cublasLtHandle_t lt() const { return lt_; }
  cublasHandle_t blas(cudaStream_t stream) {
    CUBLAS_CHECK(cublasSetStream(blas_, stream));
    return blas_;
  }
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return workspace_bytes_; }

  // The algorithm for `key`, asking cuBLASLt's heuristic only the first time a key is seen.
  const cublasLtMatmulAlgo_t& algo(const GemmKey& key, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                   cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c) {
    auto it = algos_.find(key);
    if (it != algos_.end()) return it->second;
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &workspace_bytes_, sizeof(workspace_bytes_)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt_, op, a, b, c, c, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (status != CUBLAS_STATUS_SUCCESS || found == 0)
      throw std::runtime_error("cuBLASLt has no algorithm for GEMM m=" + std::to_string(key.m) +
                               " n=" + std::to_string(key.n) + " k=" + std::to_string(key.k) +
                               " epilogue=" + std::to_string(key.epilogue));
    return algos_.emplace(key, result.algo).first->second;
  }
  size_t cached_algorithms() const { return algos_.size(); }

 private:
  cublasLtHandle_t lt_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void* workspace_;
  size_t workspace_bytes_;
  std::map<GemmKey, cublasLtMatmulAlgo_t> algos_;
};

}  // namespace llmc
