// The exponentials of the fused classifier, the fallback attention's softmax and GELU's tanh
// (llmc/cuda/gelu.cuh): the hardware's approximate base-2 exponential (exp2f, which is ex2.approx,
// 2 ulp) of an argument the kernel has already scaled by log2(e):
//   e^(a x - b) = 2^((a log2 e) x - b log2 e),
// one FFMA and one MUFU.EX2, where expf spends several instructions reducing its argument. The
// products a log2(e) and b log2(e) are rounded to float once per row: an error of
// |b log2 e| * 2^-24 in the exponent, the same factor on every term of a row, which the softmax's
// normalisation divides out. A GPU measured these against expf and tanhf (docs/gpu-runs.md): faster,
// within the contract's bars, so they are the only form.
#pragma once
#include "llmc/cuda/common.cuh"

namespace llmc {

// log2(e): e^x = 2^(x log2 e).
constexpr float kLog2e = 1.44269504088896340736f;

struct FastExp {
  // The factor an exponent's scale and shift carry: log2(e), so that the exponent is in base 2.
  static constexpr float kUnit = kLog2e;

  // 2^y for an exponent y already scaled by kUnit.
  __device__ static float power(float y) { return exp2f(y); }
  // e^x of an unscaled x (the online softmax's rescale factors): __expf, which is ex2.approx of
  // x log2(e) with the product rounded to float.
  __device__ static float exp(float x) { return __expf(x); }
};

}  // namespace llmc
