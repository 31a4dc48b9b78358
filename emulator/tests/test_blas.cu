// The emulated cuBLAS and cuBLASLt (emulator/runtime/blas_api.cpp) on small cases worked out by
// hand from NVIDIA's documentation, not from the project's callers (llmc/cuda/matmul.cuh), so that
// a caller and the emulation cannot share one misreading. Matrices are column-major: a rows x cols
// matrix with leading dimension ld holds element (r, c) at r + c * ld. The GELU values are the tanh
// approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) and its derivative, computed
// separately in double precision. FP8 codes are worked out from the OCP 8-bit floating point
// specification: E4M3 is S.EEEE.MMM with bias 7, E5M2 S.EEEEE.MM with bias 15.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <cublasLt.h>
#include <cublas_v2.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "emulator/tests/device_vectors.h"
#include "emulator/tests/scoped_env.h"
#include "llmc/cuda/common.cuh"

namespace {

constexpr float kSentinel = 99.0f;  // in the padding rows a leading dimension skips: never written

// One cublasLtMatmul, D = alpha op(A) op(B) + beta D (C is D), with its descriptors.
struct LtCall {
  cudaDataType_t type = CUDA_R_32F;
  int32_t a_type = -1, b_type = -1;  // A's and B's types where not -1, else `type`
  bool trans_a = false, trans_b = false;
  uint64_t a_rows = 0, a_cols = 0, b_rows = 0, b_cols = 0, d_rows = 0, d_cols = 0;
  int64_t lda = 0, ldb = 0, ldd = 0;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void* bias = nullptr;
  int32_t bias_type = -1;  // CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, set when not -1
  void* aux = nullptr;
  int64_t aux_ld = 0;
  float alpha = 1.0f, beta = 0.0f;
  uint32_t alignment = 256;  // what the heuristic query promises for A, B, C and D
  // CUBLASLT_MATMUL_DESC_{A,B,C,D}_SCALE_POINTER and _AMAX_D_POINTER, set where not null.
  const float* scales[4] = {nullptr, nullptr, nullptr, nullptr};
  float* amax = nullptr;
  bool fast_accum = false;  // CUBLASLT_MATMUL_DESC_FAST_ACCUM set to 1
  bool heuristic = true;    // else cublasLtMatmul chooses the algorithm (a null one)

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
    cublasLtMatrixLayout_t la, lb, ld;
    REQUIRE(cublasLtMatrixLayoutCreate(&la, at, a_rows, a_cols, lda) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatrixLayoutCreate(&lb, bt, b_rows, b_cols, ldb) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatrixLayoutCreate(&ld, type, d_rows, d_cols, ldd) == CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulPreference_t pref;
    REQUIRE(cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS);
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      REQUIRE(cublasLtMatmulPreferenceSetAttribute(pref, attr, &alignment, sizeof alignment) == CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
    if (heuristic) status = cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &result, &found);
    if (status == CUBLAS_STATUS_SUCCESS) {
      REQUIRE(found == int(heuristic));
      void* target = run_d ? const_cast<void*>(run_d) : d;
      const cublasLtMatmulAlgo_t* algo = heuristic ? &result.algo : nullptr;
      status = cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, target, ld, target, ld, algo, nullptr, 0, 0);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(lt);
    return status;
  }
};

// A = [[1, 2, 3], [4, 5, 6]] (2 x 3, ld 2) and B = [[1, 0], [0, 1], [1, 1]] (3 x 2, ld 3):
// A B = [[1 + 3, 2 + 3], [4 + 6, 5 + 6]] = [[4, 5], [10, 11]].
const std::vector<float> kA = {1, 4, 2, 5, 3, 6};
const std::vector<float> kB = {1, 0, 1, 0, 1, 1};

LtCall plain_2x3x2() {
  LtCall c;
  c.a_rows = 2, c.a_cols = 3, c.lda = 2;
  c.b_rows = 3, c.b_cols = 2, c.ldb = 3;
  c.d_rows = 2, c.d_cols = 2, c.ldd = 2;
  return c;
}

std::vector<__nv_bfloat16> bf16_vector(const std::vector<float>& v) {
  std::vector<__nv_bfloat16> out;
  for (float x : v) out.push_back(__float2bfloat16(x));
  return out;
}
std::vector<float> float_vector(const std::vector<__nv_bfloat16>& v) {
  std::vector<float> out;
  for (__nv_bfloat16 x : v) out.push_back(__bfloat162float(x));
  return out;
}

TEST_CASE("cublasLtMatmul: column-major D = A B") {
  float *a = upload(kA), *b = upload(kB), *d = upload(std::vector<float>(4, kSentinel));
  REQUIRE(plain_2x3x2().run(a, b, d) == CUBLAS_STATUS_SUCCESS);
  CHECK(download(d, 4) == std::vector<float>{4, 10, 5, 11});
  cudaFree(a), cudaFree(b), cudaFree(d);
}

TEST_CASE("cublasLtMatmul: op(A) = A^T from a 3 x 2 matrix with ld 4, D with ld 3, alpha and beta") {
  // A^T stored: rows 0..2 of each column hold A's columns; row 3 is padding.
  const std::vector<float> at = {1, 2, 3, kSentinel, 4, 5, 6, kSentinel};
  // D starts as [[1, 1], [1, 1]] (ld 3, row 2 padding); D = 2 A B + 1 D = [[9, 11], [21, 23]].
  const std::vector<float> d0 = {1, 1, kSentinel, 1, 1, kSentinel};
  float *a = upload(at), *b = upload(kB), *d = upload(d0);
  LtCall c = plain_2x3x2();
  c.trans_a = true, c.a_rows = 3, c.a_cols = 2, c.lda = 4;
  c.ldd = 3, c.alpha = 2.0f, c.beta = 1.0f;
  REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
  CHECK(download(d, 6) == std::vector<float>{9, 21, kSentinel, 11, 23, kSentinel});
  cudaFree(a), cudaFree(b), cudaFree(d);
}

TEST_CASE("cublasLtMatmul: op(B) = B^T, and the BIAS epilogue adds bias[row] to every column") {
  // B^T stored as 2 x 3 (ld 2): B^T = [[1, 0, 1], [0, 1, 1]]. bias = [10, 20] (one per row of D).
  float *a = upload(kA), *b = upload(std::vector<float>{1, 0, 0, 1, 1, 1}), *d = upload(std::vector<float>(4));
  float* bias = upload(std::vector<float>{10, 20});
  LtCall c = plain_2x3x2();
  c.trans_b = true, c.b_rows = 2, c.b_cols = 3, c.ldb = 2;
  c.epilogue = CUBLASLT_EPILOGUE_BIAS, c.bias = bias;
  REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
  CHECK(download(d, 4) == std::vector<float>{14, 30, 15, 31});
  cudaFree(a), cudaFree(b), cudaFree(d), cudaFree(bias);
}

// GELU: A = I (2 x 2), B = [[1, -1], [2, -3]], bias = [0.5, 1]: pre-activation = [[1.5, -0.5],
// [3, -2]], column-major {1.5, 3, -0.5, -2}.
TEST_CASE("cublasLtMatmul: GELU_AUX_BIAS writes the pre-activation to aux (ld 8) and GELU of it to D") {
  float *a = upload(std::vector<float>{1, 0, 0, 1}), *b = upload(std::vector<float>{1, 2, -1, -3});
  float *d = upload(std::vector<float>(4)), *bias = upload(std::vector<float>{0.5f, 1.0f});
  float* aux = upload(std::vector<float>(16, kSentinel));
  LtCall c;
  c.a_rows = c.a_cols = c.b_rows = c.b_cols = c.d_rows = c.d_cols = 2;
  c.lda = c.ldb = c.ldd = 2;
  c.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS, c.bias = bias, c.aux = aux, c.aux_ld = 8;
  REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
  const auto got = download(d, 4);
  CHECK(got[0] == doctest::Approx(1.3995715769802328).epsilon(1e-6));
  CHECK(got[1] == doctest::Approx(2.996362607918227).epsilon(1e-6));
  CHECK(got[2] == doctest::Approx(-0.15428599017485606).epsilon(1e-6));
  CHECK(got[3] == doctest::Approx(-0.04540230591222494).epsilon(1e-6));
  std::vector<float> want_aux(16, kSentinel);
  want_aux[0] = 1.5f, want_aux[1] = 3.0f, want_aux[8] = -0.5f, want_aux[9] = -2.0f;
  CHECK(download(aux, 16) == want_aux);
  cudaFree(a), cudaFree(b), cudaFree(d), cudaFree(bias), cudaFree(aux);
}

TEST_CASE("cublasLtMatmul: DGELU multiplies A B by GELU'(aux)") {
  // A = I, B = [[2, 1], [1, 4]]; aux (ld 8) holds {1.5, 3, -0.5, -2} as above.
  std::vector<float> aux_host(16, kSentinel);
  aux_host[0] = 1.5f, aux_host[1] = 3.0f, aux_host[8] = -0.5f, aux_host[9] = -2.0f;
  float *a = upload(std::vector<float>{1, 0, 0, 1}), *b = upload(std::vector<float>{2, 1, 1, 4});
  float *d = upload(std::vector<float>(4)), *aux = upload(aux_host);
  LtCall c;
  c.a_rows = c.a_cols = c.b_rows = c.b_cols = c.d_rows = c.d_cols = 2;
  c.lda = c.ldb = c.ldd = 2;
  c.epilogue = CUBLASLT_EPILOGUE_DGELU, c.aux = aux, c.aux_ld = 8;
  REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
  const auto got = download(d, 4);
  CHECK(got[0] == doctest::Approx(2 * 1.1277107931514332).epsilon(1e-6));
  CHECK(got[1] == doctest::Approx(1 * 1.0115841666309695).epsilon(1e-6));
  CHECK(got[2] == doctest::Approx(1 * 0.13263009646535764).epsilon(1e-6));
  CHECK(got[3] == doctest::Approx(4 * -0.08609925662361825).epsilon(1e-6));
  CHECK(download(aux, 16) == aux_host);
  cudaFree(a), cudaFree(b), cudaFree(d), cudaFree(aux);
}

TEST_CASE("cublasLtMatmul: BGRADB sums op(B) over k (one per column of D), BGRADA op(A) (one per row)") {
  // A = [[1, 0, 0], [0, 1, 0]]; B^T stored (2 x 3, ld 2) = [[1, 2, 3], [4, 5, 6]], so op(B) = B^T^T
  // is 3 x 2 = [[1, 4], [2, 5], [3, 6]]: D = [[1, 4], [2, 5]], bias[j] = column sums = [6, 15].
  float *a = upload(std::vector<float>{1, 0, 0, 1, 0, 0}), *b = upload(kA), *d = upload(std::vector<float>(4));
  float* bias = upload(std::vector<float>{kSentinel, kSentinel, kSentinel});
  LtCall c = plain_2x3x2();
  c.trans_b = true, c.b_rows = 2, c.b_cols = 3, c.ldb = 2;
  c.epilogue = CUBLASLT_EPILOGUE_BGRADB, c.bias = bias;
  REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
  CHECK(download(d, 4) == std::vector<float>{1, 2, 4, 5});
  CHECK(download(bias, 3) == std::vector<float>{6, 15, kSentinel});
  // BGRADA with A = [[1, 2, 3], [4, 5, 6]]: bias[i] = row sums of A = [6, 15].
  float* a2 = upload(kA);
  float* b2 = upload(kB);
  LtCall c2 = plain_2x3x2();
  c2.epilogue = CUBLASLT_EPILOGUE_BGRADA, c2.bias = bias;
  REQUIRE(cudaMemcpy(bias, std::vector<float>(3, 0).data(), 3 * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(c2.run(a2, b2, d) == CUBLAS_STATUS_SUCCESS);
  CHECK(download(d, 4) == std::vector<float>{4, 10, 5, 11});
  CHECK(download(bias, 2) == std::vector<float>{6, 15});
  cudaFree(a), cudaFree(b), cudaFree(d), cudaFree(bias), cudaFree(a2), cudaFree(b2);
}

TEST_CASE("cublasLtMatmul: the bias and BGRADB's bias gradient are in D's type, as cublasLt.h documents") {
  // bf16 BGRADB, op(B) = B^T of the 2 x 3 matrix [[1, 2, 3], [4, 5, 6]] (ld 2), column sums [6, 15];
  // A = [[1, 0, 0], [0, 1, 0]] so D = [[1, 4], [2, 5]].
  __nv_bfloat16 *a = upload(bf16_vector({1, 0, 0, 1, 0, 0})), *b = upload(bf16_vector(kA));
  __nv_bfloat16 *d = upload(bf16_vector({0, 0, 0, 0})), *bias = upload(bf16_vector({kSentinel, kSentinel, kSentinel}));
  float* bias32 = upload(std::vector<float>{kSentinel, kSentinel, kSentinel});
  LtCall c = plain_2x3x2();
  c.type = CUDA_R_16BF;
  c.trans_b = true, c.b_rows = 2, c.b_cols = 3, c.ldb = 2;
  c.epilogue = CUBLASLT_EPILOGUE_BGRADB;
  SUBCASE("bf16 D, the bias type said to be bf16: bf16 sums") {
    c.bias = bias, c.bias_type = CUDA_R_16BF;
    REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
    const auto got = download(bias, 3);
    CHECK(__bfloat162float(got[0]) == 6.0f);
    CHECK(__bfloat162float(got[1]) == 15.0f);
    CHECK(__bfloat162float(got[2]) == kSentinel);
  }
  SUBCASE("bf16 D with an fp32 bias: no kernel, for BGRADB and for BIAS") {
    c.bias = bias32, c.bias_type = CUDA_R_32F;
    CHECK(c.run(a, b, d) == CUBLAS_STATUS_NOT_SUPPORTED);
    c.epilogue = CUBLASLT_EPILOGUE_BIAS, c.trans_b = false, c.b_rows = 3, c.b_cols = 2, c.ldb = 3;
    CHECK(c.run(a, b, d) == CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(download(bias32, 3) == std::vector<float>{kSentinel, kSentinel, kSentinel});
  }
  SUBCASE("fp32 D with the bias type said to be fp32") {
    float *a32 = upload(std::vector<float>{1, 0, 0, 1, 0, 0}), *b32 = upload(kA), *d32 = upload(std::vector<float>(4));
    LtCall c32 = c;
    c32.type = CUDA_R_32F, c32.bias = bias32, c32.bias_type = CUDA_R_32F;
    REQUIRE(c32.run(a32, b32, d32) == CUBLAS_STATUS_SUCCESS);
    CHECK(download(bias32, 3) == std::vector<float>{6, 15, kSentinel});
    cudaFree(a32), cudaFree(b32), cudaFree(d32);
  }
  cudaFree(a), cudaFree(b), cudaFree(d), cudaFree(bias), cudaFree(bias32);
}

TEST_CASE("cublasLtMatmul in bf16: fp32 sums, rounded once to the output") {
  // 1 + 2^-8 + 2^-8 = 1 + 2^-7, which bf16 holds. Rounding after each addition would lose both
  // halves (1 + 2^-8 is a tie between 1 and 1 + 2^-7, and ties go to the even 1).
  const std::vector<__nv_bfloat16> a = {__float2bfloat16(1.0f), __float2bfloat16(0.00390625f),
                                        __float2bfloat16(0.00390625f)};
  const std::vector<__nv_bfloat16> b(3, __float2bfloat16(1.0f));
  __nv_bfloat16 *da = upload(a), *db = upload(b), *dd = upload(std::vector<__nv_bfloat16>(1));
  LtCall c;
  c.type = CUDA_R_16BF;
  c.a_rows = 1, c.a_cols = 3, c.lda = 1, c.b_rows = 3, c.b_cols = 1, c.ldb = 3, c.d_rows = 1, c.d_cols = 1, c.ldd = 1;
  REQUIRE(c.run(da, db, dd) == CUBLAS_STATUS_SUCCESS);
  CHECK(__bfloat162float(download(dd, 1)[0]) == 1.0078125f);
  cudaFree(da), cudaFree(db), cudaFree(dd);
}

TEST_CASE("cublasLtMatmul rejects what the documentation rules out, with its statuses") {
  float *a = upload(kA), *b = upload(kB), *d = upload(std::vector<float>(64));
  float* aux = upload(std::vector<float>(64));
  SUBCASE("a leading dimension smaller than the rows") {
    LtCall c = plain_2x3x2();
    c.lda = 1;
    CHECK(c.run(a, b, d) == CUBLAS_STATUS_INVALID_VALUE);
  }
  SUBCASE("op(A) and op(B) that do not chain (k of 3 against 2)") {
    LtCall c = plain_2x3x2();
    c.b_rows = 2, c.ldb = 2;
    CHECK(c.run(a, b, d) == CUBLAS_STATUS_INVALID_VALUE);
  }
  SUBCASE("a GELU aux leading dimension that is not a multiple of 8") {
    LtCall c = plain_2x3x2();
    c.epilogue = CUBLASLT_EPILOGUE_GELU_AUX, c.aux = aux, c.aux_ld = 4;
    CHECK(c.run(a, b, d) == CUBLAS_STATUS_INVALID_VALUE);
  }
  SUBCASE("a bias epilogue without a bias vector") {
    LtCall c = plain_2x3x2();
    c.epilogue = CUBLASLT_EPILOGUE_BIAS;
    CHECK(c.run(a, b, d) == CUBLAS_STATUS_INVALID_VALUE);
  }
  SUBCASE("an algorithm chosen for 256-byte alignment, run on D 16 bytes past a boundary") {
    LtCall c = plain_2x3x2();
    CHECK(c.run(a, b, d, d + 4) == CUBLAS_STATUS_INVALID_VALUE);
    c.alignment = 16;
    CHECK(c.run(a, b, d, d + 4) == CUBLAS_STATUS_SUCCESS);
  }
  SUBCASE("an epilogue the emulator does not implement (ReLU) is not supported") {
    LtCall c = plain_2x3x2();
    c.epilogue = CUBLASLT_EPILOGUE_RELU;
    CHECK(c.run(a, b, d) == CUBLAS_STATUS_NOT_SUPPORTED);
  }
  SUBCASE("fp16 operands (the emulator has fp32 and bf16)") {
    LtCall c = plain_2x3x2();
    c.type = CUDA_R_16F;
    CHECK(c.run(a, b, d) == CUBLAS_STATUS_NOT_SUPPORTED);
  }
  SUBCASE("an attribute set with the wrong size") {
    cublasLtMatmulDesc_t op;
    REQUIRE(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
    const int64_t wide = CUBLASLT_EPILOGUE_BIAS;
    CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &wide, sizeof wide) ==
          CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, nullptr, 4) == CUBLAS_STATUS_INVALID_VALUE);
    cublasLtMatmulDescDestroy(op);
  }
  cudaFree(a), cudaFree(b), cudaFree(d), cudaFree(aux);
}

TEST_CASE("cublasLtMatmulAlgoGetHeuristic: up to `requested` distinct algorithms within the workspace, each exact") {
  float *a = upload(kA), *b = upload(kB), *d = upload(std::vector<float>(4, kSentinel));
  void* workspace = nullptr;
  const size_t workspace_bytes = 1024;
  REQUIRE(cudaMalloc(&workspace, workspace_bytes) == cudaSuccess);
  cublasLtHandle_t lt;
  REQUIRE(cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t op, bias_op;
  REQUIRE(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasLtMatmulDescCreate(&bias_op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
  const cublasLtEpilogue_t bias_epilogue = CUBLASLT_EPILOGUE_BIAS;
  REQUIRE(cublasLtMatmulDescSetAttribute(bias_op, CUBLASLT_MATMUL_DESC_EPILOGUE, &bias_epilogue,
                                         sizeof bias_epilogue) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasLtMatmulDescSetAttribute(bias_op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &d, sizeof d) ==
          CUBLAS_STATUS_SUCCESS);
  cublasLtMatrixLayout_t la, lb, ld;
  REQUIRE(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 2, 3, 2) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 3, 2, 3) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, 2, 2, 2) == CUBLAS_STATUS_SUCCESS);
  // The results of a query allowing `max_workspace` bytes of workspace, `requested` at most.
  const auto query = [&](uint64_t max_workspace, int requested) {
    cublasLtMatmulPreference_t pref;
    REQUIRE(cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace,
                                                 sizeof max_workspace) == CUBLAS_STATUS_SUCCESS);
    std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(requested));
    int found = -1;
    REQUIRE(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, requested, results.data(), &found) ==
            CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulPreferenceDestroy(pref);
    REQUIRE(found >= 1);
    REQUIRE(found <= requested);
    results.resize(size_t(found));
    return results;
  };
  const auto matmul = [&](cublasLtMatmulDesc_t desc, const cublasLtMatmulAlgo_t& algo, size_t bytes) {
    const float alpha = 1.0f, beta = 0.0f;
    return cublasLtMatmul(lt, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &algo, workspace, bytes, 0);
  };
  // A B = [[4, 5], [10, 11]]: 2 x 2 outputs, so a split-K algorithm of s parts needs 16 s bytes.
  const std::vector<cublasLtMatmulHeuristicResult_t> roomy = query(workspace_bytes, 16);
  CHECK(roomy.size() > 2);
  CHECK(query(workspace_bytes, 2).size() == 2);
  const std::vector<cublasLtMatmulHeuristicResult_t> no_workspace = query(0, 16);
  CHECK(no_workspace.size() < roomy.size());
  for (const auto& r : no_workspace) CHECK(r.workspaceSize == 0);
  bool some_need_workspace = false;
  for (size_t i = 0; i < roomy.size(); ++i) {
    CAPTURE(i);
    CHECK(roomy[i].state == CUBLAS_STATUS_SUCCESS);
    CHECK(roomy[i].workspaceSize <= workspace_bytes);
    some_need_workspace = some_need_workspace || roomy[i].workspaceSize > 0;
    for (size_t j = 0; j < i; ++j) CHECK(std::memcmp(&roomy[i].algo, &roomy[j].algo, sizeof roomy[i].algo) != 0);
    REQUIRE(cudaMemcpy(d, std::vector<float>(4, kSentinel).data(), 16, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(matmul(op, roomy[i].algo, workspace_bytes) == CUBLAS_STATUS_SUCCESS);
    CHECK(download(d, 4) == std::vector<float>{4, 10, 5, 11});
    // Documented: INVALID_VALUE when the workspace is smaller than the algorithm requires.
    if (roomy[i].workspaceSize > 0)
      CHECK(matmul(op, roomy[i].algo, roomy[i].workspaceSize - 1) == CUBLAS_STATUS_INVALID_VALUE);
    // An algorithm the query chose for a plain GEMM is refused for a bias epilogue.
    CHECK(matmul(bias_op, roomy[i].algo, workspace_bytes) == CUBLAS_STATUS_INVALID_VALUE);
  }
  CHECK(some_need_workspace);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatmulDescDestroy(bias_op);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(lt);
  cudaFree(a), cudaFree(b), cudaFree(d), cudaFree(workspace);
}

TEST_CASE("cublasGemmStridedBatchedEx: each batch entry at its stride, beta accumulates") {
  // Entry 0: A as above, B as above -> [[4, 5], [10, 11]]. Entry 1 (A offset 8, B offset 8, C
  // offset 8): A = 2 * A0, B = B0 -> [[8, 10], [20, 22]], plus beta = 1 times C's 1s.
  std::vector<float> a(16, kSentinel), b(16, kSentinel), c(16, 1.0f);
  for (int i = 0; i < 6; ++i) a[i] = kA[i], a[8 + i] = 2 * kA[i], b[i] = kB[i], b[8 + i] = kB[i];
  float *da = upload(a), *db = upload(b), *dc = upload(c);
  void* workspace = nullptr;
  REQUIRE(cudaMalloc(&workspace, 1024) == cudaSuccess);
  cublasHandle_t h;
  REQUIRE(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasSetWorkspace(h, workspace, 1024) == CUBLAS_STATUS_SUCCESS);
  const float alpha = 1.0f, beta = 1.0f;
  REQUIRE(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &alpha, da, CUDA_R_32F, 2, 8, db,
                                     CUDA_R_32F, 3, 8, &beta, dc, CUDA_R_32F, 2, 8, 2, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
  const auto got = download(dc, 16);
  CHECK(std::vector<float>(got.begin(), got.begin() + 4) == std::vector<float>{5, 11, 6, 12});
  CHECK(std::vector<float>(got.begin() + 8, got.begin() + 12) == std::vector<float>{9, 21, 11, 23});
  CHECK(got[4] == 1.0f);  // between the entries: untouched
  SUBCASE("ldc smaller than m, and a transposed A whose lda is smaller than k") {
    CHECK(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &alpha, da, CUDA_R_32F, 2, 8, db,
                                     CUDA_R_32F, 3, 8, &beta, dc, CUDA_R_32F, 1, 8, 2, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 3, &alpha, da, CUDA_R_32F, 2, 8, db,
                                     CUDA_R_32F, 3, 8, &beta, dc, CUDA_R_32F, 2, 8, 2, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_INVALID_VALUE);
  }
  SUBCASE("cublasSetStream resets the workspace to cuBLAS's own pool, which the emulator does not have") {
    REQUIRE(cublasSetStream(h, 0) == CUBLAS_STATUS_SUCCESS);
    const auto gemm = [&] {
      return cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &alpha, da, CUDA_R_32F, 2, 8, db,
                                        CUDA_R_32F, 3, 8, &beta, dc, CUDA_R_32F, 2, 8, 2, CUBLAS_COMPUTE_32F,
                                        CUBLAS_GEMM_DEFAULT);
    };
    CHECK(gemm() == CUBLAS_STATUS_NOT_SUPPORTED);
    REQUIRE(cublasSetWorkspace(h, workspace, 1024) == CUBLAS_STATUS_SUCCESS);
    CHECK(gemm() == CUBLAS_STATUS_SUCCESS);
  }
  cublasDestroy(h);
  cudaFree(da), cudaFree(db), cudaFree(dc), cudaFree(workspace);
}

// ---- FP8 (cuBLAS documentation, cublasLtMatmul, FP8): A and B in E4M3 or E5M2, C and D bf16 here ----

constexpr uint8_t kFp8Padding = 0x7F;  // NaN in both formats: a product that reads padding is NaN

// A stored FP8 matrix with leading dimension 16 (FP8's leading dimensions are multiples of 16),
// given by its columns of codes; the rows past them are padding.
uint8_t* fp8_columns(const std::vector<std::vector<uint8_t>>& columns) {
  std::vector<uint8_t> host(16 * columns.size(), kFp8Padding);
  for (size_t c = 0; c < columns.size(); ++c)
    for (size_t r = 0; r < columns[c].size(); ++r) host[r + 16 * c] = columns[c][r];
  return upload(host);
}

// The FP8 layout, "TN": op(A) = A^T (m x k) from A stored k x m, op(B) = B stored k x n, D m x n.
LtCall fp8_call(uint64_t m, uint64_t k, uint64_t n) {
  LtCall c;
  c.type = CUDA_R_16BF, c.a_type = CUDA_R_8F_E4M3, c.b_type = CUDA_R_8F_E4M3;
  c.trans_a = true, c.a_rows = k, c.a_cols = m, c.lda = 16;
  c.b_rows = k, c.b_cols = n, c.ldb = 16;
  c.d_rows = m, c.d_cols = n, c.ldd = int64_t(m);
  return c;
}

// E4M3 codes: 1 = 0.0111.000 = 0x38, 2 = 0x40, 0.5 = 0x30, 1.5 = 0.0111.100 = 0x3C,
// -3 = 1.1000.100 = 0xC4, -2 = 0xC0. op(A) = [[1, 2], [-3, -2]]: A's columns are op(A)'s rows.
// B = [[1, 0.5], [2, 1.5]]. op(A) B = [[1 + 4, 0.5 + 3], [-3 - 4, -1.5 - 3]] = [[5, 3.5], [-7, -4.5]].
TEST_CASE("cublasLtMatmul FP8 E4M3: D = alpha scale_A scale_B A^T B + beta scale_C C, the bias, amax_D") {
  uint8_t *a = fp8_columns({{0x38, 0x40}, {0xC4, 0xC0}}), *b = fp8_columns({{0x38, 0x40}, {0x30, 0x3C}});
  __nv_bfloat16* d = upload(bf16_vector(std::vector<float>(4, kSentinel)));
  float *scale_a = upload(std::vector<float>{0.5f}), *scale_b = upload(std::vector<float>{4.0f});
  float *scale_c = upload(std::vector<float>{3.0f}), *amax = upload(std::vector<float>{kSentinel});
  LtCall c = fp8_call(2, 2, 2);
  c.amax = amax;
  SUBCASE("no scales set: each is 1; amax_D is the largest |x|, here of a negative x") {
    REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
    CHECK(float_vector(download(d, 4)) == std::vector<float>{5, -7, 3.5f, -4.5f});
    CHECK(download(amax, 1)[0] == 7.0f);
  }
  SUBCASE("scale_A 0.5 and scale_B 4 multiply the product by 2; FAST_ACCUM changes nothing here") {
    c.scales[0] = scale_a, c.scales[1] = scale_b, c.fast_accum = true;
    REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
    CHECK(float_vector(download(d, 4)) == std::vector<float>{10, -14, 7, -9});
    CHECK(download(amax, 1)[0] == 14.0f);
  }
  SUBCASE("beta 1 and scale_C 3 on C = D = [[1, 1], [1, 1]]: 2 A^T B + 3") {
    REQUIRE(cudaMemcpy(d, bf16_vector({1, 1, 1, 1}).data(), 4 * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice) ==
            cudaSuccess);
    c.scales[0] = scale_a, c.scales[1] = scale_b, c.scales[2] = scale_c, c.beta = 1.0f;
    REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
    CHECK(float_vector(download(d, 4)) == std::vector<float>{13, -11, 10, -6});
    CHECK(download(amax, 1)[0] == 13.0f);
  }
  SUBCASE("the BIAS epilogue adds a bf16 bias per row; amax_D is taken after it (13, not 14)") {
    __nv_bfloat16* bias = upload(bf16_vector({0.25f, 1.0f}));
    c.scales[0] = scale_a, c.scales[1] = scale_b;
    c.epilogue = CUBLASLT_EPILOGUE_BIAS, c.bias = bias;
    REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
    CHECK(float_vector(download(d, 4)) == std::vector<float>{10.25f, -13, 7.25f, -8});
    CHECK(download(amax, 1)[0] == 13.0f);
    c.bias_type = CUDA_R_16BF;  // said explicitly: the same
    REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
    CHECK(float_vector(download(d, 4)) == std::vector<float>{10.25f, -13, 7.25f, -8});
    cudaFree(bias);
  }
  cudaFree(a), cudaFree(b), cudaFree(d), cudaFree(scale_a), cudaFree(scale_b), cudaFree(scale_c), cudaFree(amax);
}

// E4M3 240 = 0.1110.111 = 0x77 ((1 + 7/8) 2^7), 16 = 0.1011.000 = 0x58, 1 = 0x38, 3 = 0x44.
// op(A) = [[240, 16, 1], [240, 16, 3]], B = [1, 1, 1]^T: D = [257, 259], exact in fp32. bf16 keeps 8
// significant bits, so between 256 and 512 its step is 2: 257 is a tie between 256 (significand
// 1.0000000, even) and 258 (odd), 259 a tie between 258 (odd) and 260 (even).
TEST_CASE("cublasLtMatmul FP8: fp32 sums rounded once to bf16, to nearest even; amax_D before the rounding") {
  uint8_t *a = fp8_columns({{0x77, 0x58, 0x38}, {0x77, 0x58, 0x44}}), *b = fp8_columns({{0x38, 0x38, 0x38}});
  __nv_bfloat16* d = upload(bf16_vector({kSentinel, kSentinel}));
  float* amax = upload(std::vector<float>{kSentinel});
  LtCall c = fp8_call(2, 3, 1);
  c.amax = amax;
  REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
  CHECK(float_vector(download(d, 2)) == std::vector<float>{256, 260});
  CHECK(download(amax, 1)[0] == 259.0f);
  cudaFree(a), cudaFree(b), cudaFree(d), cudaFree(amax);
}

// One op(A) row of codes {0x44, 0x3C} and one B column {0x38, 0x48}, read in either format:
// E4M3 0x44 = 0.1000.100 = 3, 0x3C = 1.5, 0x38 = 1, 0x48 = 0.1001.000 = 4;
// E5M2 0x44 = 0.10001.00 = 4, 0x3C = 0.01111.00 = 1, 0x38 = 0.5, 0x48 = 0.10010.00 = 8.
TEST_CASE("cublasLtMatmul FP8: E4M3 x E5M2 and E5M2 x E4M3, each operand decoded in its own format") {
  uint8_t *a = fp8_columns({{0x44, 0x3C}}), *b = fp8_columns({{0x38, 0x48}});
  __nv_bfloat16* d = upload(bf16_vector({kSentinel}));
  LtCall c = fp8_call(1, 2, 1);
  c.b_type = CUDA_R_8F_E5M2;  // [3, 1.5] . [0.5, 8] = 1.5 + 12
  REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
  CHECK(__bfloat162float(download(d, 1)[0]) == 13.5f);
  c.a_type = CUDA_R_8F_E5M2, c.b_type = CUDA_R_8F_E4M3;  // [4, 1] . [1, 4] = 4 + 4
  REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
  CHECK(__bfloat162float(download(d, 1)[0]) == 8.0f);
  cudaFree(a), cudaFree(b), cudaFree(d);
}

TEST_CASE("cublasLtMatmul FP8 refuses what the documentation rules out or the emulator lacks, in both calls") {
  uint8_t *a = fp8_columns({{0x38, 0x40}, {0xC4, 0xC0}}), *b = fp8_columns({{0x38, 0x40}, {0x30, 0x3C}});
  const std::vector<float> untouched(4, kSentinel);
  __nv_bfloat16* d = upload(bf16_vector(untouched));
  float* one = upload(std::vector<float>{1.0f});
  LtCall c = fp8_call(2, 2, 2);
  // The heuristic query refuses it, and so does cublasLtMatmul with no algorithm; D is not written.
  const auto refused = [&](LtCall call, cublasStatus_t want) {
    CHECK(call.run(a, b, d) == want);
    call.heuristic = false;
    CHECK(call.run(a, b, d) == want);
    CHECK(float_vector(download(d, 4)) == untouched);
  };
  SUBCASE("the accepted call, for comparison") {
    REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
    c.heuristic = false;
    REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
    CHECK(float_vector(download(d, 4)) == std::vector<float>{5, -7, 3.5f, -4.5f});
  }
  SUBCASE("NN: A not transposed") {
    c.trans_a = false;
    refused(c, CUBLAS_STATUS_NOT_SUPPORTED);
  }
  SUBCASE("TT: B transposed") {
    c.trans_b = true;
    refused(c, CUBLAS_STATUS_NOT_SUPPORTED);
  }
  SUBCASE("E5M2 x E5M2") {
    c.a_type = c.b_type = CUDA_R_8F_E5M2;
    refused(c, CUBLAS_STATUS_NOT_SUPPORTED);
  }
  SUBCASE("FP8 A with a bf16 B") {
    c.b_type = CUDA_R_16BF;
    refused(c, CUBLAS_STATUS_NOT_SUPPORTED);
  }
  SUBCASE("FP32 C and D") {
    c.type = CUDA_R_32F;
    refused(c, CUBLAS_STATUS_NOT_SUPPORTED);
  }
  SUBCASE("a leading dimension of A that is not a multiple of 16 (8), then of B (24)") {
    c.lda = 8;
    refused(c, CUBLAS_STATUS_NOT_SUPPORTED);
    c.lda = 16, c.ldb = 24;
    refused(c, CUBLAS_STATUS_NOT_SUPPORTED);
  }
  SUBCASE("a GELU epilogue") {
    c.epilogue = CUBLASLT_EPILOGUE_GELU;
    refused(c, CUBLAS_STATUS_NOT_SUPPORTED);
  }
  SUBCASE("an fp32 bias (with bf16 D the bias is bf16)") {
    float* bias32 = upload(std::vector<float>{0, 0});
    c.epilogue = CUBLASLT_EPILOGUE_BIAS, c.bias = bias32, c.bias_type = CUDA_R_32F;
    refused(c, CUBLAS_STATUS_NOT_SUPPORTED);
    cudaFree(bias32);
  }
  SUBCASE("a heuristic preference promising A and B less than 16-byte alignment") {
    c.alignment = 8;
    CHECK(c.run(a, b, d) == CUBLAS_STATUS_NOT_SUPPORTED);
  }
  SUBCASE("a device of compute capability 8.0 (FP8 needs 8.9)") {
    {
      ScopedEnv ampere("LLMC_EMU_COMPUTE_CAPABILITY", "8.0");
      refused(c, CUBLAS_STATUS_NOT_SUPPORTED);
    }
    ScopedEnv ada("LLMC_EMU_COMPUTE_CAPABILITY", "8.9");
    CHECK(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
  }
  SUBCASE("a D scale with a bf16 D: INVALID_VALUE from cublasLtMatmul (the query accepts it)") {
    c.scales[3] = one;
    refused(c, CUBLAS_STATUS_INVALID_VALUE);
  }
  SUBCASE("an A or B scale 4 bytes off a 16-byte boundary: NOT_SUPPORTED from cublasLtMatmul (seen on an H100)") {
    float* four = upload(std::vector<float>{1.0f, 1.0f});  // cudaMalloc's: 256-byte aligned
    for (int i = 0; i < 2; ++i) {
      CAPTURE(i);
      LtCall off = c;
      off.scales[i] = four + 1;
      refused(off, CUBLAS_STATUS_NOT_SUPPORTED);
    }
    c.scales[0] = c.scales[1] = four;
    CHECK(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
    cudaFree(four);
  }
  cudaFree(a), cudaFree(b), cudaFree(d), cudaFree(one);
}

TEST_CASE("cublasLtMatmul: FP8 scales and amax_D on a bf16 GEMM are INVALID_VALUE, as documented") {
  __nv_bfloat16 *a = upload(bf16_vector(kA)), *b = upload(bf16_vector(kB));
  __nv_bfloat16* d = upload(bf16_vector(std::vector<float>(4, kSentinel)));
  float *one = upload(std::vector<float>{1.0f}), *amax = upload(std::vector<float>{kSentinel});
  LtCall c = plain_2x3x2();
  c.type = CUDA_R_16BF;
  REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);  // A B = [[4, 5], [10, 11]] without them
  CHECK(float_vector(download(d, 4)) == std::vector<float>{4, 10, 5, 11});
  for (int i = 0; i < 4; ++i) {
    CAPTURE(i);
    LtCall scaled = c;
    scaled.scales[i] = one;
    CHECK(scaled.run(a, b, d) == CUBLAS_STATUS_INVALID_VALUE);
  }
  c.amax = amax;
  CHECK(c.run(a, b, d) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(download(amax, 1)[0] == kSentinel);
  cudaFree(a), cudaFree(b), cudaFree(d), cudaFree(one), cudaFree(amax);
}

}  // namespace
