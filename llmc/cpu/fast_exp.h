// exp in double precision written so that GCC vectorises loops that call it (std::exp is an opaque
// library call that keeps such loops scalar). Used where the CPU backend takes millions of
// exponentials per step: the softmax over the vocabulary and GELU's tanh.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

namespace llmc {

// exp(x) with a relative error below 1e-14 for |x| <= 708; beyond, it saturates to about
// exp(-708.5) or exp(709.5) (still normal doubles; 0 and finite once rounded to float); NaN stays NaN.
//
// Method: x = n ln2 + r with n = round(x / ln2), |r| <= ln2 / 2; ln2 is split into a high part with
// trailing zero bits (so n * kLn2Hi is exact) and a low part (Cody-Waite), which keeps r accurate.
// exp(r) is its Taylor series to degree 11 (truncation error r^12 / 12! < 7e-15), and 2^n is built
// directly in the exponent bits. Rounding to an integer uses the 1.5 * 2^52 trick: adding it leaves
// the integer in the low mantissa bits, so no float-to-integer conversion (undefined for NaN) is
// needed. Saturation clamps n and r rather than x: clamping x would make the result a constant for
// out-of-range x, and GCC then splits the loop into branches and no longer vectorises it.
inline double exp_vectorisable(double x) {
  constexpr double kLog2e = 1.4426950408889634;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  constexpr double kShifter = 6755399441055744.0;  // 1.5 * 2^52
  // std::max(a, b) and std::min(a, b) return a when it is NaN, so NaN passes through the clamps.
  const double n = std::min(std::max((x * kLog2e + kShifter) - kShifter, -1022.0), 1023.0);
  const double r = std::min(std::max((x - n * kLn2Hi) - n * kLn2Lo, -0.5), 0.5);
  double p = 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  // The biased exponent n + 1023 (in [1, 2046]) as an integer, then as the bits of 2^n.
  const double biased = n + (1023.0 + kShifter);
  uint64_t bits, shifter_bits;
  std::memcpy(&bits, &biased, sizeof(bits));
  std::memcpy(&shifter_bits, &kShifter, sizeof(shifter_bits));
  const uint64_t scale_bits = (bits - shifter_bits) << 52;
  double scale;
  std::memcpy(&scale, &scale_bits, sizeof(scale));
  return p * scale;
}

}  // namespace llmc
