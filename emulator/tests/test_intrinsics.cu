// The emulated GPU's arithmetic intrinsics, each checked on a small kernel against what the CUDA
// programming guide defines: the fast approximations (__expf, __fdividef) within its error bounds,
// and the IEEE-rounded ones (__fmul_rn, __fsub_rn) rounded on their own, never fused into an FMA.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "emulator/tests/device_vectors.h"
#include "emulator/tests/launch_ok.h"

namespace {

// out[i] = __expf(x[i]), __fdividef(x[i], y[i]) for the n inputs.
__global__ void fast_intrinsics_kernel(const float* x, const float* y, float* exp_out, float* div_out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  exp_out[i] = __expf(x[i]);
  div_out[i] = __fdividef(x[i], y[i]);
}

// Distance in ulps between two finite floats of the same sign.
int64_t ulps_between(float a, float b) {
  return std::llabs(int64_t(__float_as_uint(a)) - int64_t(__float_as_uint(b)));
}

struct FastIntrinsicResults {
  std::vector<float> exp, div;
};

FastIntrinsicResults run_fast_intrinsics(const std::vector<float>& x, const std::vector<float>& y) {
  const int n = int(x.size());
  float* d_x = upload(x);
  float* d_y = upload(y);
  float* d_exp = device_array<float>(x.size());
  float* d_div = device_array<float>(x.size());
  launch_ok<fast_intrinsics_kernel>((n + 127) / 128, 128, 0, d_x, d_y, d_exp, d_div, n);
  FastIntrinsicResults r{download(d_exp, x.size()), download(d_div, x.size())};
  for (float* p : {d_x, d_y, d_exp, d_div}) cudaFree(p);
  return r;
}

TEST_CASE("__expf is ex2.approx of the rounded x log2(e): within the guide's 2 + floor(|1.173 x|) ulp, not exact") {
  std::vector<float> x;
  for (float v = -87.0f; v <= 88.0f; v += 0.173f) x.push_back(v);
  x.push_back(0.0f);
  const FastIntrinsicResults r = run_fast_intrinsics(x, std::vector<float>(x.size(), 1.0f));
  int64_t worst_large = 0;
  int inexact = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float exact = float(std::exp(double(x[i])));
    const int64_t ulps = ulps_between(r.exp[i], exact);
    CHECK_MESSAGE(ulps <= 2 + int64_t(std::floor(std::fabs(1.173 * x[i]))), "x = " << x[i]);
    inexact += ulps != 0;
    if (std::fabs(x[i]) > 60.0f) worst_large = std::max(worst_large, ulps);
  }
  CHECK(r.exp.back() == 1.0f);
  // The rounded product moves the exponent by up to |x log2 e| 2^-24: several ulps at large |x|,
  // which an exact expf would hide; and most results differ from the correctly rounded one.
  CHECK(worst_large > 2);
  CHECK(inexact > int(x.size()) / 4);
}

TEST_CASE("__fdividef is x times a rounded 1/y: within 2 ulp, and 0 (or NaN) for 2^126 < |y| < 2^128") {
  std::vector<float> x, y;
  for (int i = 1; i <= 200; ++i) {
    x.push_back(1.0f + 0.37f * float(i));
    y.push_back(0.01f + 0.731f * float(i * i));
  }
  const size_t checked = x.size();
  x.insert(x.end(), {1.0f, -3.0f, INFINITY, 3.0f, 1.0f});
  y.insert(y.end(), {0x1.8p126f, 0x1.8p126f, 0x1.8p126f, INFINITY, 0x1p125f});
  const FastIntrinsicResults r = run_fast_intrinsics(x, y);
  int inexact = 0;
  for (size_t i = 0; i < checked; ++i) {
    const int64_t ulps = ulps_between(r.div[i], x[i] / y[i]);
    CHECK(ulps <= 2);
    inexact += ulps != 0;
  }
  CHECK(inexact > 0);  // two roundings, not one correctly rounded division
  CHECK(1.0f / 0x1.8p126f > 0.0f);  // a division proper gives a subnormal...
  CHECK(r.div[checked] == 0.0f);    // ...__fdividef 0
  CHECK(r.div[checked + 1] == 0.0f);
  CHECK(std::signbit(r.div[checked + 1]));
  CHECK(std::isnan(r.div[checked + 2]));
  CHECK(r.div[checked + 3] == 0.0f);
  CHECK(r.div[checked + 4] == 0x1p-125f);  // below 2^126, an ordinary reciprocal
}

// out[0] = __fmul_rn(a, b) - c, out[1] = fmaf(a, b, -c), out[2] = __fsub_rn(one, tiny),
// out[3] = __fsub_rn(one, 2 tiny).
__global__ void rounded_intrinsics_kernel(float a, float b, float c, float one, float tiny, float* out) {
  out[0] = __fmul_rn(a, b) - c;
  out[1] = fmaf(a, b, -c);
  out[2] = __fsub_rn(one, tiny);
  out[3] = __fsub_rn(one, 2.0f * tiny);
}

TEST_CASE("__fmul_rn and __fsub_rn round to nearest even on their own: a product is not fused with the next add") {
  float* d_out = device_array<float>(4);
  // (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: the rounded product is 1 + 2^-11 (a tie, to even), so
  // subtracting that leaves 0, where the fused multiply-add keeps the 2^-24.
  const float a = 1.0f + 0x1p-12f, c = 1.0f + 0x1p-11f;
  launch_ok<rounded_intrinsics_kernel>(1, 1, 0, a, a, c, 1.0f, 0x1p-25f, d_out);
  const std::vector<float> out = download(d_out, 4);
  CHECK(out[0] == 0.0f);
  CHECK(out[1] == 0x1p-24f);
  CHECK(out[2] == 1.0f);             // 1 - 2^-25: a tie between 1 and 1 - 2^-24, to the even 1
  CHECK(out[3] == 1.0f - 0x1p-24f);  // 1 - 2^-24: exact
  cudaFree(d_out);
}

}  // namespace
