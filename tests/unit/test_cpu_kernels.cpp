// The CPU backend's performance-tuned kernels (SGEMM, vectorised exp, GELU) against plain
// references: the SGEMM must follow its documented summation order bit for bit, whatever the thread
// count; the exp and GELU must agree with libm to within rounding.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "llmc/cpu/fast_exp.h"
#include "llmc/cpu/gelu.h"
#include "llmc/cpu/matmul.h"
#include "llmc/rng.h"

using namespace llmc;

namespace {

std::vector<float> random_floats(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal();
  return v;
}

float at(MatrixView m, int r, int c) { return m.data[size_t(r) * m.row_stride + size_t(c) * m.col_stride]; }

// The order llmc/cpu/matmul.h documents: per K block of kGemmKBlock, a chain of multiply-adds from 0 in k
// order (fused where the target has FMA); block sums added to C in block order.
std::vector<float> gemm_in_documented_order(const std::vector<float>& c0, MatrixView A, MatrixView B, int M, int N,
                                            int K, bool accumulate) {
  std::vector<float> c = c0;
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      float& out = c[size_t(m) * N + n];
      if (!accumulate) out = 0.0f;
      for (int k0 = 0; k0 < K; k0 += kGemmKBlock) {
        float s = 0.0f;
        for (int k = k0; k < std::min(K, k0 + kGemmKBlock); ++k) {
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
          s = std::fma(at(A, m, k), at(B, k, n), s);
#else
          s += at(A, m, k) * at(B, k, n);  // no FMA instruction: the kernel rounds the product too
#endif
        }
        out = (!accumulate && k0 == 0) ? s : out + s;
      }
    }
  }
  return c;
}

// Restores the OpenMP thread count when a test that changes it ends.
struct ThreadCountGuard {
  int saved = omp_get_max_threads();
  ~ThreadCountGuard() { omp_set_num_threads(saved); }
};

}  // namespace

TEST_CASE("gemm: every layout, edge tile and K block in the documented order, bit-identical for 1-3 threads") {
  ThreadCountGuard guard;
  // 67 x 45 and 200 x 150 leave partial register tiles and partial K blocks; K = 600 spans three.
  struct Shape {
    int M, N, K;
  };
  for (const Shape s : {Shape{67, 45, 600}, Shape{200, 150, 300}, Shape{5, 3, 1}}) {
    const std::vector<float> a = random_floats(size_t(s.M) * s.K, 1), b = random_floats(size_t(s.K) * s.N, 2);
    const std::vector<float> c0 = random_floats(size_t(s.M) * s.N, 3);
    for (bool a_transposed : {false, true}) {
      for (bool b_transposed : {false, true}) {
        const MatrixView A = a_transposed ? MatrixView{a.data(), 1, size_t(s.M)} : MatrixView{a.data(), size_t(s.K), 1};
        const MatrixView B = b_transposed ? MatrixView{b.data(), 1, size_t(s.K)} : MatrixView{b.data(), size_t(s.N), 1};
        for (bool accumulate : {false, true}) {
          const std::vector<float> want = gemm_in_documented_order(c0, A, B, s.M, s.N, s.K, accumulate);
          for (int threads : {1, 2, 3}) {
            CAPTURE(fmt::format("M={} N={} K={} A^T={} B^T={} accumulate={} threads={}", s.M, s.N, s.K, a_transposed,
                                b_transposed, accumulate, threads));
            omp_set_num_threads(threads);
            std::vector<float> c = c0;
            gemm(c.data(), A, B, s.M, s.N, s.K, accumulate);
            CHECK(std::memcmp(c.data(), want.data(), c.size() * sizeof(float)) == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("gemm: a 40000-term sum stays within the blocked-summation error bound") {
  // Worst case for the documented order: (kGemmKBlock + K / kGemmKBlock) roundings, each at most
  // 2^-24 of the sum of |products| (one long chain would allow K of them).
  const int M = 3, N = 4, K = 40000;
  const std::vector<float> a = random_floats(size_t(M) * K, 4), b = random_floats(size_t(K) * N, 5);
  std::vector<float> c(size_t(M) * N);
  gemm(c.data(), MatrixView{a.data(), size_t(K), 1}, MatrixView{b.data(), size_t(N), 1}, M, N, K, false);
  const double bound_factor = (kGemmKBlock + double(K) / kGemmKBlock + 1) * std::ldexp(1.0, -24);
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      double exact = 0.0, magnitude = 0.0;
      for (int k = 0; k < K; ++k) {
        const double p = double(a[size_t(m) * K + k]) * b[size_t(k) * N + n];
        exact += p;
        magnitude += std::fabs(p);
      }
      CHECK(std::fabs(c[size_t(m) * N + n] - exact) <= bound_factor * magnitude);
    }
  }
}

TEST_CASE("matmul_forward and matmul_backward match double-precision sums") {
  const int N = 13, C = 70, OC = 37;
  const std::vector<float> inp = random_floats(size_t(N) * C, 6), weight = random_floats(size_t(OC) * C, 7),
                           bias = random_floats(OC, 8), dout = random_floats(size_t(N) * OC, 9);
  std::vector<float> out(size_t(N) * OC), dinp(size_t(N) * C, 123.0f), dweight(size_t(OC) * C, 0.5f),
      dbias(OC, -0.25f);
  matmul_forward(out.data(), inp.data(), weight.data(), bias.data(), N, C, OC);
  matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(), N, C, OC);
  const double tol = 1e-5;
  for (int n = 0; n < N; ++n) {
    for (int o = 0; o < OC; ++o) {
      double s = bias[o];
      for (int c = 0; c < C; ++c) s += double(inp[size_t(n) * C + c]) * weight[size_t(o) * C + c];
      CHECK(out[size_t(n) * OC + o] == doctest::Approx(s).epsilon(tol));
    }
    for (int c = 0; c < C; ++c) {
      double s = 0.0;  // dinp is overwritten, not accumulated
      for (int o = 0; o < OC; ++o) s += double(dout[size_t(n) * OC + o]) * weight[size_t(o) * C + c];
      CHECK(dinp[size_t(n) * C + c] == doctest::Approx(s).epsilon(tol));
    }
  }
  for (int o = 0; o < OC; ++o) {
    double sb = -0.25;
    for (int n = 0; n < N; ++n) sb += dout[size_t(n) * OC + o];
    CHECK(dbias[o] == doctest::Approx(sb).epsilon(tol));
    for (int c = 0; c < C; ++c) {
      double s = 0.5;  // dweight is accumulated into
      for (int n = 0; n < N; ++n) s += double(dout[size_t(n) * OC + o]) * inp[size_t(n) * C + c];
      CHECK(dweight[size_t(o) * C + c] == doctest::Approx(s).epsilon(tol));
    }
  }
}

TEST_CASE("exp_vectorisable: within 1e-14 of std::exp on [-708, 708], saturating beyond, NaN kept") {
  double worst = 0.0;
  for (double x = -708.0; x <= 708.0; x += 0.01337) {
    worst = std::max(worst, std::fabs(exp_vectorisable(x) / std::exp(x) - 1.0));
  }
  CHECK(worst < 1e-14);
  CHECK(exp_vectorisable(0.0) == 1.0);
  const double inf = std::numeric_limits<double>::infinity();
  for (double x : {-1000.0, -1e300, -inf}) {
    CHECK(exp_vectorisable(x) >= 0.0);
    CHECK(float(exp_vectorisable(x)) == 0.0f);
  }
  for (double x : {1000.0, 1e300, inf}) {
    CHECK(std::isfinite(exp_vectorisable(x)));
    CHECK(exp_vectorisable(x) > 1e307);
  }
  CHECK(std::isnan(exp_vectorisable(std::nan(""))));
}

TEST_CASE("gelu: forward and backward agree with long-double references to float rounding, also at extremes") {
  std::vector<float> x;
  for (float v = -12.0f; v <= 12.0f; v += 0.0371f) x.push_back(v);
  for (float v : {-1e30f, -1e4f, 1e4f, 1e30f, 0.0f}) x.push_back(v);
  const size_t n = x.size();
  const std::vector<float> dout = random_floats(n, 10);
  std::vector<float> y(n), dx(n);
  gelu_forward(y.data(), x.data(), n);
  gelu_backward(dx.data(), x.data(), dout.data(), n);
  const long double k = std::sqrt(2.0L / M_PI), c = 0.044715L;
  // Both sides round a more precise result to float: they may differ in the last place only.
  auto close = [](float got, long double want) { return std::fabs(got - want) <= 1.2e-7L * std::fabs(want) + 1e-30L; };
  for (size_t i = 0; i < n; ++i) {
    const long double v = x[i], u = k * (v + c * v * v * v), du = k * (1.0L + 3.0L * c * v * v);
    CAPTURE(v);
    // The definition, 0.5 x (1 + tanh u), where 1 + tanh u does not cancel badly in long double.
    if (v >= -5.0L && v <= 12.0L) {
      const long double th = std::tanh(u);
      CHECK(close(y[i], 0.5L * v * (1.0L + th)));
      CHECK(close(dx[i], (0.5L * (1.0L + th) + 0.5L * v * (1.0L - th * th) * du) * dout[i]));
    }
    // Everywhere: 0.5 (1 + tanh u) = 1 / (1 + exp(-2u)) = s, 0.5 (1 - tanh^2 u) = 2 s (1 - s).
    const long double e = std::exp(std::min(-2.0L * u, 11000.0L)), s = 1.0L / (1.0L + e);
    CHECK(close(y[i], v * s));
    CHECK(close(dx[i], (s + 2.0L * v * s * (e * s) * du) * dout[i]));
  }
}
