// The test cases' cuBLASLt call (emulator/tests/test_blas.cu and test_blas_fp8.cu): an LtCall holds
// one matmul's operands, types, layouts and epilogue, makes the library calls and reads D back.
// Matrices are column-major: a rows x cols matrix with leading dimension ld holds element (r, c) at
// r + c * ld.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "emulator/tests/device_vectors.h"
#include "llmc/cuda/common.cuh"

constexpr float kSentinel = 99.0f;  // in the padding rows a leading dimension skips: never written

// One cublasLtMatmul, D = alpha op(A) op(B) + beta D (C is D, in memory), with its descriptors.
struct LtCall {
  cudaDataType_t type = CUDA_R_32F;
  int32_t a_type = -1, b_type = -1, c_type = -1;  // A's, B's and C's types where not -1, else `type`
  bool trans_a = false, trans_b = false;
  uint64_t a_rows = 0, a_cols = 0, b_rows = 0, b_cols = 0, d_rows = 0, d_cols = 0;
  int64_t lda = 0, ldb = 0, ldd = 0;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void* bias = nullptr;
  int32_t bias_type = -1;  // CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, set when not -1
  void* aux = nullptr;
  int64_t aux_ld = 0;
  int32_t aux_type = -1;  // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, set when not -1
  float alpha = 1.0f, beta = 0.0f;
  uint32_t alignment = 256;  // what the heuristic query promises for A, B, C and D
  // CUBLASLT_MATMUL_DESC_{A,B,C,D}_SCALE_POINTER and _AMAX_D_POINTER, set where not null.
  const float* scales[4] = {nullptr, nullptr, nullptr, nullptr};
  float* amax = nullptr;
  bool fast_accum = false;  // CUBLASLT_MATMUL_DESC_FAST_ACCUM set to 1
  bool heuristic = true;    // else cublasLtMatmul chooses the algorithm (a null one)
  cudaStream_t stream = nullptr;  // the stream cublasLtMatmul queues on

  // The status of the heuristic query, then (if it succeeded) of the matmul.
  cublasStatus_t run(const void* a, const void* b, void* d, const void* run_d = nullptr) const {
    cublasLtHandle_t lt;
    REQUIRE(cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulDesc_t op;
    REQUIRE(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
    const cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue) ==
            CUBLAS_STATUS_SUCCESS);
    if (bias)
      REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias) ==
              CUBLAS_STATUS_SUCCESS);
    if (bias_type != -1)
      REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type) ==
              CUBLAS_STATUS_SUCCESS);
    if (aux) {
      REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux) ==
              CUBLAS_STATUS_SUCCESS);
      REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld) ==
              CUBLAS_STATUS_SUCCESS);
    }
    if (aux_type != -1)
      REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &aux_type,
                                             sizeof aux_type) == CUBLAS_STATUS_SUCCESS);
    const cublasLtMatmulDescAttributes_t scale_attrs[4] = {
        CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
        CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER};
    for (int i = 0; i < 4; ++i)
      if (scales[i])
        REQUIRE(cublasLtMatmulDescSetAttribute(op, scale_attrs[i], &scales[i], sizeof scales[i]) ==
                CUBLAS_STATUS_SUCCESS);
    if (amax)
      REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, &amax, sizeof amax) ==
              CUBLAS_STATUS_SUCCESS);
    if (fast_accum) {
      const int8_t on = 1;
      REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &on, sizeof on) ==
              CUBLAS_STATUS_SUCCESS);
    }
    const cudaDataType_t at = a_type == -1 ? type : cudaDataType_t(a_type);
    const cudaDataType_t bt = b_type == -1 ? type : cudaDataType_t(b_type);
    const cudaDataType_t ct = c_type == -1 ? type : cudaDataType_t(c_type);
    cublasLtMatrixLayout_t la, lb, lc, ld;
    REQUIRE(cublasLtMatrixLayoutCreate(&la, at, a_rows, a_cols, lda) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatrixLayoutCreate(&lb, bt, b_rows, b_cols, ldb) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatrixLayoutCreate(&lc, ct, d_rows, d_cols, ldd) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatrixLayoutCreate(&ld, type, d_rows, d_cols, ldd) == CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulPreference_t pref;
    REQUIRE(cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS);
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      REQUIRE(cublasLtMatmulPreferenceSetAttribute(pref, attr, &alignment, sizeof alignment) == CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
    if (heuristic) status = cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, ld, pref, 1, &result, &found);
    if (status == CUBLAS_STATUS_SUCCESS) {
      REQUIRE(found == int(heuristic));
      void* target = run_d ? const_cast<void*>(run_d) : d;
      const cublasLtMatmulAlgo_t* algo = heuristic ? &result.algo : nullptr;
      status = cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, target, lc, target, ld, algo, nullptr, 0, stream);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(lt);
    return status;
  }
};

// A = [[1, 2, 3], [4, 5, 6]] (2 x 3, ld 2) and B = [[1, 0], [0, 1], [1, 1]] (3 x 2, ld 3):
// A B = [[1 + 3, 2 + 3], [4 + 6, 5 + 6]] = [[4, 5], [10, 11]].
inline const std::vector<float> kA = {1, 4, 2, 5, 3, 6};
inline const std::vector<float> kB = {1, 0, 1, 0, 1, 1};

inline LtCall plain_2x3x2() {
  LtCall c;
  c.a_rows = 2, c.a_cols = 3, c.lda = 2;
  c.b_rows = 3, c.b_cols = 2, c.ldb = 3;
  c.d_rows = 2, c.d_cols = 2, c.ldd = 2;
  return c;
}

inline std::vector<__nv_bfloat16> bf16_vector(const std::vector<float>& v) {
  std::vector<__nv_bfloat16> out;
  for (float x : v) out.push_back(__float2bfloat16(x));
  return out;
}
inline std::vector<float> float_vector(const std::vector<__nv_bfloat16>& v) {
  std::vector<float> out;
  for (__nv_bfloat16 x : v) out.push_back(__bfloat162float(x));
  return out;
}
