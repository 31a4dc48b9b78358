// Choosing a cuBLASLt algorithm for one GEMM shape: the heuristic's list, and (LLMC_GEMM_SEARCH=timed)
// timing that list on the real stream to keep the fastest. BlasContext (cublaslt_handle.cuh) keeps
// what was chosen per shape. Also CUBLAS_CHECK, which every cuBLAS and cuBLASLt call goes through.
//
// Why the timed search runs only inside a tuning pass (Backend::tune_kernels: one forward and
// backward micro-step on a fixed batch, the gradients and the loss zeroed afterwards, the data
// loader not advanced): a candidate runs on the GEMM's real buffers, twice (a warm-up, then the
// timed launch). A GEMM that overwrites D (beta = 0) is harmless to repeat, but a weight-gradient
// GEMM accumulates (beta = 1) and would add its product 2 x 16 times; no scratch big enough for the
// largest such D (the tied embedding's gradient, Vp x C) exists, and a copy-and-restore would need
// one. Inside the tuning pass every output is thrown away, so repeats cost nothing but time, and the
// training's results depend on the search only through which algorithm each GEMM runs. A shape first
// met outside a tuning pass (sampling's B=1, an evaluation at another shape) gets the heuristic's
// first choice, which is the same on every rank and after a resume.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "llmc/cuda/common.cuh"
#include "llmc/cuda/gemm_table.h"

namespace llmc {

// CUBLAS_CHECK: a cuBLAS or cuBLASLt status other than success as a std::runtime_error naming the call site.
inline void cublas_check(cublasStatus_t status, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS error at ") + file + ":" + std::to_string(line) + ": " +
                             cublasGetStatusString(status));
}
#define CUBLAS_CHECK(call) ::llmc::cublas_check((call), __FILE__, __LINE__)

static_assert(sizeof(cublasLtMatmulAlgo_t) == sizeof(GemmAlgoWords), "cuBLASLt's algorithm is 8 uint64 words");

inline GemmAlgoWords algo_words(const cublasLtMatmulAlgo_t& algo) {
  GemmAlgoWords w;
  std::memcpy(w.data(), &algo, sizeof algo);
  return w;
}
inline cublasLtMatmulAlgo_t algo_from_words(const GemmAlgoWords& w) {
  cublasLtMatmulAlgo_t algo;
  std::memcpy(&algo, w.data(), sizeof algo);
  return algo;
}

// The descriptors of one cublasLtMatmul call, owned, so that an error thrown midway leaks nothing.
struct LtGemmDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  LtGemmDescs() = default;
  LtGemmDescs(const LtGemmDescs&) = delete;
  LtGemmDescs& operator=(const LtGemmDescs&) = delete;
  ~LtGemmDescs() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// Runs the GEMM once with `algo` on its stream; returns cuBLASLt's status.
using GemmLaunch = std::function<cublasStatus_t(const cublasLtMatmulAlgo_t& algo)>;

// Up to `count` of the heuristic's algorithms for `key`, best first, each within `workspace_bytes`
// of workspace and the key's alignments; empty when cuBLASLt has none (e.g. an epilogue it does not
// offer for these types).
inline std::vector<cublasLtMatmulAlgo_t> heuristic_algorithms(cublasLtHandle_t lt, const GemmKey& key,
                                                              const LtGemmDescs& descs, size_t workspace_bytes,
                                                              int count) {
  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t workspace = workspace_bytes;
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
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(count));
  int found = 0;
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulAlgoGetHeuristic(lt, descs.op, descs.a, descs.b, descs.c, descs.d, pref, count,
                                            results.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  // NOT_SUPPORTED is how the heuristic says "no algorithm"; anything else is a real error.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return {};
  CUBLAS_CHECK(status);
  std::vector<cublasLtMatmulAlgo_t> algos;
  for (int i = 0; i < found; ++i)
    if (results[size_t(i)].state == CUBLAS_STATUS_SUCCESS) algos.push_back(results[size_t(i)].algo);
  return algos;
}

// Two timing events for the search, created once.
class GemmTimer {
 public:
  GemmTimer() {
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~GemmTimer() {
    cudaEventDestroy(stop_);
    cudaEventDestroy(start_);
  }
  GemmTimer(const GemmTimer&) = delete;
  GemmTimer& operator=(const GemmTimer&) = delete;

  // Milliseconds of one launch of `algo` on `stream`, after a warm-up launch (the first run of a
  // kernel may load its module); infinity when cuBLASLt refuses to run it.
  float time(const GemmLaunch& launch, const cublasLtMatmulAlgo_t& algo, cudaStream_t stream) {
    if (launch(algo) != CUBLAS_STATUS_SUCCESS) return std::numeric_limits<float>::infinity();
    CUDA_CHECK(cudaEventRecord(start_, stream));
    const cublasStatus_t status = launch(algo);
    CUDA_CHECK(cudaEventRecord(stop_, stream));
    CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return status == CUBLAS_STATUS_SUCCESS ? ms : std::numeric_limits<float>::infinity();
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// The epilogues this project's GEMMs use, as the search's lines and LLMC_PROFILE's table name them.
inline const char* epilogue_name(int epilogue) {
  switch (epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT: return "none";
    case CUBLASLT_EPILOGUE_BIAS: return "bias";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return "gelu_aux_bias";
    case CUBLASLT_EPILOGUE_DGELU: return "dgelu";
    default: return "other";
  }
}

// The fastest of `candidates` (the heuristic's, best first) by one timed launch each, printed as one
// line: the shape, the index chosen of how many, its time and the heuristic's first choice's.
// Throws std::runtime_error when cuBLASLt refuses to run every one of them.
inline cublasLtMatmulAlgo_t fastest_algorithm(const GemmKey& key, const std::vector<cublasLtMatmulAlgo_t>& candidates,
                                              const GemmLaunch& launch, GemmTimer& timer, cudaStream_t stream) {
  std::vector<float> ms;
  for (const cublasLtMatmulAlgo_t& algo : candidates) ms.push_back(timer.time(launch, algo, stream));
  size_t best = 0;
  for (size_t i = 1; i < ms.size(); ++i)
    if (ms[i] < ms[best]) best = i;
  // FP8 operands (their cudaDataType: CUDA_R_8F_E4M3 or _E5M2) are named after the shape.
  const auto fp8_name = [](int type) { return type == int(CUDA_R_8F_E4M3) ? "e4m3" : "e5m2"; };
  const std::string types =
      key.a_type < 0 ? std::string()
                     : fmt::format(" fp8 {} x {}{}", fp8_name(key.a_type), fp8_name(key.b_type),
                                   key.fast_accum ? " fast accumulation" : "");
  const std::string shape = fmt::format("m={} n={} k={} {}{} epilogue={} beta={}{}", key.m, key.n, key.k,
                                        key.trans_a ? "A^T " : "A ", key.trans_b ? "B^T" : "B",
                                        epilogue_name(key.epilogue), key.accumulate ? 1 : 0, types);
  if (!(ms[best] < std::numeric_limits<float>::infinity()))
    throw std::runtime_error("gemm search: cuBLASLt ran none of the " + std::to_string(candidates.size()) +
                             " algorithms its heuristic offered for " + shape);
  fmt::print("gemm search: {}: algorithm {} of {}, {:.4f} ms (the heuristic's first: {:.4f} ms)\n", shape, best + 1,
             candidates.size(), ms[best], ms[0]);
  return candidates[best];
}

}  // namespace llmc
