// The emulated cuBLAS and cuBLASLt (emulator/runtime/blas_api.cpp) on small cases worked out by
// hand from NVIDIA's documentation, not from the project's callers (llmc/cuda/matmul.cuh), so that
// a caller and the emulation cannot share one misreading. Matrices are column-major: a rows x cols
// matrix with leading dimension ld holds element (r, c) at r + c * ld. The GELU values are the tanh
// approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) and its derivative, computed
// separately in double precision. The FP8 cases are test_blas_fp8.cu.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "emulator/tests/lt_call.h"

namespace {

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

TEST_CASE("cublasLtMatmul: DGELU_BGRAD also writes the sums of DGELU's D over n, one per row, to the bias") {
  // DGELU's case above: D (column-major) = {2 g'(1.5), g'(3), g'(-0.5), 4 g'(-2)}, so the bias
  // gradient is row 0: 2 g'(1.5) + g'(-0.5), row 1: g'(3) + 4 g'(-2); it needs the bias pointer.
  std::vector<float> aux_host(16, kSentinel);
  aux_host[0] = 1.5f, aux_host[1] = 3.0f, aux_host[8] = -0.5f, aux_host[9] = -2.0f;
  float *a = upload(std::vector<float>{1, 0, 0, 1}), *b = upload(std::vector<float>{2, 1, 1, 4});
  float *d = upload(std::vector<float>(4)), *aux = upload(aux_host);
  float* bias = upload(std::vector<float>{kSentinel, kSentinel, kSentinel});
  LtCall c;
  c.a_rows = c.a_cols = c.b_rows = c.b_cols = c.d_rows = c.d_cols = 2;
  c.lda = c.ldb = c.ldd = 2;
  c.epilogue = CUBLASLT_EPILOGUE_DGELU_BGRAD, c.aux = aux, c.aux_ld = 8;
  CHECK(c.run(a, b, d) == CUBLAS_STATUS_INVALID_VALUE);
  c.bias = bias;
  REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
  const auto got = download(d, 4);
  CHECK(got[0] == doctest::Approx(2 * 1.1277107931514332).epsilon(1e-6));
  CHECK(got[3] == doctest::Approx(4 * -0.08609925662361825).epsilon(1e-6));
  const auto sums = download(bias, 3);
  CHECK(sums[0] == doctest::Approx(2 * 1.1277107931514332 + 0.13263009646535764).epsilon(1e-6));
  CHECK(sums[1] == doctest::Approx(1.0115841666309695 + 4 * -0.08609925662361825).epsilon(1e-6));
  CHECK(sums[2] == kSentinel);
  cudaFree(a), cudaFree(b), cudaFree(d), cudaFree(aux), cudaFree(bias);
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

}  // namespace
