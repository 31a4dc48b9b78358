// The emulated cuBLASLt's FP8 matmuls (emulator/runtime/blas_api.cpp) on small cases worked out by
// hand from NVIDIA's documentation, as test_blas.cu's. FP8 codes are worked out from the OCP 8-bit
// floating point specification: E4M3 is S.EEEE.MMM with bias 7, E5M2 S.EEEEE.MM with bias 15.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "emulator/tests/lt_call.h"
#include "emulator/tests/scoped_env.h"

namespace {

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

// An E4M3 D (the cuBLAS documentation's FP8 table: C bf16, the bias bf16): each value x of the
// product, bias and epilogue is stored as sat(x * D scale), rounded to nearest even, and amax_D is
// taken before the D scale. op(A) B = [[5, 3.5], [-7, -4.5]] as above.
TEST_CASE("cublasLtMatmul FP8 with an E4M3 D: sat(x * D scale) to nearest even, amax_D unscaled, GELU_AUX_BIAS") {
  uint8_t *a = fp8_columns({{0x38, 0x40}, {0xC4, 0xC0}}), *b = fp8_columns({{0x38, 0x40}, {0x30, 0x3C}});
  uint8_t* d = upload(std::vector<uint8_t>(4, 0x55));
  float *two = upload(std::vector<float>{2.0f}), *eight = upload(std::vector<float>{8.0f});
  float *big = upload(std::vector<float>{128.0f}), *amax = upload(std::vector<float>{kSentinel});
  LtCall c = fp8_call(2, 2, 2);
  c.type = CUDA_R_8F_E4M3, c.c_type = CUDA_R_16BF, c.amax = amax;
  SUBCASE("D scale 2: 10 = 1.25 x 2^3 is 0.1010.010, -14 1.1010.110, 7 0.1001.110, -9 1.1010.001") {
    c.scales[3] = two;
    REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
    CHECK(download(d, 4) == std::vector<uint8_t>{0x52, 0xD6, 0x4E, 0xD1});
    CHECK(download(amax, 1)[0] == 7.0f);
  }
  SUBCASE("D scale 128: 640, -896 and -576 saturate to +-448 (0x7E, 0xFE); 448 itself is 0x7E") {
    c.scales[3] = big;
    REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
    CHECK(download(d, 4) == std::vector<uint8_t>{0x7E, 0xFE, 0x7E, 0xFE});
  }
  SUBCASE("no D scale, a bias of -0.25 on row 0: 4.75 lies halfway, to even 5 (0x4A); 3.25 is 0x45") {
    __nv_bfloat16* bias = upload(bf16_vector({-0.25f, 0.0f}));
    c.epilogue = CUBLASLT_EPILOGUE_BIAS, c.bias = bias, c.bias_type = CUDA_R_16BF;
    REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
    CHECK(download(d, 4) == std::vector<uint8_t>{0x4A, 0xCE, 0x45, 0xC9});
    cudaFree(bias);
  }
  SUBCASE("GELU_AUX_BIAS, bias [-4.5, 4]: aux (bf16) the pre-activations [[0.5, -1], [-3, -0.5]], D gelu x 8") {
    // gelu(0.5) = 0.3457 (x 8 = 2.766: 2.75, 0.1000.011), gelu(-3) = -0.003638 (-0.02910 = -1.862 x
    // 2^-6: 1.0001.111), gelu(-1) = -0.1586 and gelu(-0.5) = -0.1543 (-1.269 and -1.234: -1.25,
    // 1.0111.010); amax_D 0.3457, unscaled.
    __nv_bfloat16* bias = upload(bf16_vector({-4.5f, 4.0f}));
    __nv_bfloat16* aux = upload(bf16_vector(std::vector<float>(16, kSentinel)));
    c.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS, c.bias = bias, c.aux = aux, c.aux_ld = 8;
    c.aux_type = CUDA_R_16BF, c.scales[3] = eight;
    REQUIRE(c.run(a, b, d) == CUBLAS_STATUS_SUCCESS);
    CHECK(download(d, 4) == std::vector<uint8_t>{0x43, 0x8F, 0xBA, 0xBA});
    const std::vector<float> pre = float_vector(download(aux, 16));
    CHECK(std::vector<float>{pre[0], pre[1], pre[8], pre[9]} == std::vector<float>{0.5f, -3, -1, -0.5f});
    CHECK(pre[2] == kSentinel);  // the rows past D's two are not written
    CHECK(download(amax, 1)[0] == doctest::Approx(0.3457).epsilon(1e-3));
    SUBCASE("refused: the aux type unset (then D's, E4M3) or E4M3, and an fp32 bias") {
      const auto refused = [&](LtCall call) {
        CHECK(call.run(a, b, d) == CUBLAS_STATUS_NOT_SUPPORTED);
        call.heuristic = false;
        CHECK(call.run(a, b, d) == CUBLAS_STATUS_NOT_SUPPORTED);
      };
      LtCall unset = c, fp8_aux = c, fp32_bias = c;
      unset.aux_type = -1, fp8_aux.aux_type = CUDA_R_8F_E4M3, fp32_bias.bias_type = CUDA_R_32F;
      refused(unset), refused(fp8_aux), refused(fp32_bias);
    }
    cudaFree(bias), cudaFree(aux);
  }
  SUBCASE("refused: an E5M2 D, an E4M3 C, a GELU aux type on a bf16 D (INVALID_VALUE)") {
    LtCall e5m2 = c, fp8_c = c;
    e5m2.type = CUDA_R_8F_E5M2, fp8_c.c_type = CUDA_R_8F_E4M3;
    CHECK(e5m2.run(a, b, d) == CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(fp8_c.run(a, b, d) == CUBLAS_STATUS_NOT_SUPPORTED);
    LtCall bf16_d = fp8_call(2, 2, 2);
    bf16_d.aux_type = CUDA_R_16BF;
    __nv_bfloat16* d16 = upload(bf16_vector(std::vector<float>(4, kSentinel)));
    CHECK(bf16_d.run(a, b, d16) == CUBLAS_STATUS_SUCCESS);  // D's own type: accepted
    bf16_d.aux_type = CUDA_R_32F;
    CHECK(bf16_d.run(a, b, d16) == CUBLAS_STATUS_INVALID_VALUE);
    cudaFree(d16);
  }
  cudaFree(a), cudaFree(b), cudaFree(d), cudaFree(two), cudaFree(eight), cudaFree(big), cudaFree(amax);
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
