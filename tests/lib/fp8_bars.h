// test_gpt2cu's bars for --fp8 1 (docs/cuda-trainer.md, "FP8 matmuls"), derived from the FP8
// rounding of each GEMM operand, on top of the floatX build's own bars.
//
// Round to nearest with p mantissa bits leaves an error uniform within +-ulp/2 = +-2^-p m/2
// relative to a value m 2^e; over significands m spread log-uniformly in [1, 2) its RMS relative
// size is 2^-p / (2 sqrt 3) * sqrt(E[1/m^2]), E[1/m^2] = (1/ln 2)(1/2 - 1/8) = 0.5410: 0.2123 2^-p,
// 0.02654 for E4M3 (p = 3) and 0.05308 for E5M2 (p = 2). A dot product of terms with independent
// relative errors of RMS e_a and e_b is off by about sqrt(e_a^2 + e_b^2) of its size (random signs:
// the error and the sum both grow as the root of the number of terms): 0.03753 for a forward GEMM
// (E4M3 x E4M3), 0.05934 for an input-gradient GEMM (E5M2 x E4M3). Independent errors add in
// quadrature along a path, so a tensor after n_f forward and n_b input-gradient FP8 GEMMs is held to
// the bf16 bar plus sqrt(n_f 0.03753^2 + n_b 0.05934^2); the worst path is layer 0's qkv weight
// gradient: all 4L forward GEMMs, then 4L - 1 input-gradient GEMMs on the way down. The logits see
// the 4L forward GEMMs only. LLMC_FP8_LM_HEAD=on (`lm_head`) adds the LM head's two: a forward GEMM
// on every path, an input-gradient GEMM on every gradient's. The loss moves with the logits:
// -dz_y + sum_i p_i dz_i, at most about sqrt(2) times their RMS error, which is the logits' relative
// bar times their RMS (the oracle's).
#pragma once
#include <cmath>
#include <cstddef>

namespace llmc {

constexpr double fp8_rms_rounding(int mantissa_bits) { return 0.2123 / double(1 << mantissa_bits); }
inline const double kFp8ForwardGemm = std::sqrt(2.0) * fp8_rms_rounding(3);
inline const double kFp8InputGradientGemm = std::hypot(fp8_rms_rounding(2), fp8_rms_rounding(3));

// The logits' and the worst gradient's relative bars for L layers, over the build's `tensor_bar`.
inline double fp8_logits_bar(int L, double tensor_bar, bool lm_head = false) {
  return tensor_bar + std::sqrt(4.0 * L + (lm_head ? 1 : 0)) * kFp8ForwardGemm;
}
inline double fp8_gradient_bar(int L, double tensor_bar, bool lm_head = false) {
  const double head = lm_head ? 1.0 : 0.0;
  return tensor_bar + std::sqrt((4.0 * L + head) * kFp8ForwardGemm * kFp8ForwardGemm +
                                (4.0 * L - 1 + head) * kFp8InputGradientGemm * kFp8InputGradientGemm);
}

// The loss's absolute bar over the build's `loss_bar`: sqrt(2) times the logits' bar times the RMS
// of the oracle's n logits.
inline double fp8_loss_bar(double loss_bar, double logits_bar, const float* logits, size_t n) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += double(logits[i]) * double(logits[i]);
  const double rms = n > 0 ? std::sqrt(sum / double(n)) : 0.0;
  return loss_bar + std::sqrt(2.0) * logits_bar * rms;
}

}  // namespace llmc
