// The exponentials of the kernels LLMC_FAST_MATH switches (llmc/cuda/speed_switches.h): the fused
// classifier's and the fallback softmax's e^x, and GELU's tanh (llmc/cuda/gelu.cuh). Each of those
// kernels is a template on `bool kFast`; with_fast_math picks the instance at every launch, so one
// binary runs either (the GPU sweep times both without a rebuild, and nothing else in the build,
// cuBLASLt's epilogues included, changes with it, as a --use_fast_math build would change it).
//
// Accurate (kFast false): expf, within 2 ulp. Fast: the hardware's approximate base-2 exponential
// (exp2f, which is ex2.approx, 2 ulp) of an argument the kernel has already scaled by log2(e):
//   e^(a x - b) = 2^((a log2 e) x - b log2 e),
// one FFMA and one MUFU.EX2, where expf spends several instructions reducing its argument. The
// products a log2(e) and b log2(e) are rounded to float once per row: an error of
// |b log2 e| * 2^-24 in the exponent, the same factor on every term of a row, which the softmax's
// normalisation divides out.
#pragma once
#include <type_traits>
#include <utility>

#include "llmc/cuda/common.cuh"
#include "llmc/cuda/speed_switches.h"

namespace llmc {

// log2(e): e^x = 2^(x log2 e).
constexpr float kLog2e = 1.44269504088896340736f;

// The base of the exponentials the fast and the accurate kernels compute.
template <bool kFast>
struct ExpBase {
  // The factor an exponent's scale and shift carry: log2(e) in base 2, 1 in base e.
  static constexpr float kUnit = kFast ? kLog2e : 1.0f;

  // base^y for an exponent y already in this base's units (scaled by kUnit).
  __device__ static float power(float y) {
    if constexpr (kFast)
      return exp2f(y);
    else
      return expf(y);
  }
  // e^x of an unscaled x (the online softmax's rescale factors): __expf, which is ex2.approx of
  // x log2(e) with the product rounded to float, or expf.
  __device__ static float exp(float x) {
    if constexpr (kFast)
      return __expf(x);
    else
      return expf(x);
  }
};

// Calls launch_instance(std::bool_constant<fast>{}) with fast = (fast_math == FastMath::kOn), so
// that a launcher instantiates its kernel for both and launches the one asked for:
//   with_fast_math(fast_math, [&](auto fast) { launch<kernel<floatX, decltype(fast)::value>>(...); });
template <class Launch>
inline void with_fast_math(FastMath fast_math, Launch&& launch_instance) {
  if (fast_math == FastMath::kOn)
    std::forward<Launch>(launch_instance)(std::true_type{});
  else
    std::forward<Launch>(launch_instance)(std::false_type{});
}

}  // namespace llmc
