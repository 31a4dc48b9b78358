#include <algorithm>
#include <cmath>
#include <vector>

#include "emulator/runtime/blas_lt.h"

namespace emu {
namespace {

// The tanh approximation, as cuBLASLt's GELU epilogues compute it, and its derivative. The constants
// are the library's own, written here rather than taken from the product's (llmc/gpt2_constants.h),
// so that a caller and the emulation cannot share one misreading (emulator/tests/test_blas.cu).
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;
float gelu(float x) {
  const float t = std::tanh(kGeluScale * (x + kGeluCubic * x * x * x));
  return 0.5f * x * (1.0f + t);
}
float gelu_grad(float x) {
  const float t = std::tanh(kGeluScale * (x + kGeluCubic * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
}

}  // namespace

// D = alpha scale_A scale_B op(A) op(B) + beta scale_C C and the epilogue, on host-visible device
// memory, each scale 1 unless set; amax_D, when set, gets the largest |x| over D's elements x as
// computed in fp32 after the epilogue, before the D scale and their rounding to D's type. `c` may
// equal `d` (the product is formed in full before D is written). C, the bias and the bias
// gradients are in C's type, the GELU aux in its own (aux_type_of).
void run_lt(const LtDesc& o, const LtShape& s, float alpha, const void* a, const LtLayout& la, const void* b,
            const LtLayout& lb, float beta, const void* c, const LtLayout& lc, void* d, const LtLayout& ld) {
  const cudaDataType_t t = ld.type, ct = lc.type, aux_t = aux_type_of(o, t);
  const GemmOperand ga{a, element_type(la.type), la.ld, o.trans_a == CUBLAS_OP_T},
      gb{b, element_type(lb.type), lb.ld, o.trans_b == CUBLAS_OP_T};
  // The scales are read now, when the GEMM runs on its stream, as the library's kernel reads them.
  const auto scale_value = [](const float* p) { return p ? *p : 1.0f; };
  const float ab_factor = alpha * scale_value(o.scales[0]) * scale_value(o.scales[1]);
  const float c_factor = beta * scale_value(o.scales[2]);
  const float d_scale = scale_value(o.scales[3]);
  float amax = 0.0f;
  std::vector<float> acc;
  gemm_fp32(acc, ga, gb, int(s.m), int(s.n), int(s.k));
  const EpilogueKind kind = s.kind;
  const bool add_bias = kind == EpilogueKind::bias || kind == EpilogueKind::gelu_bias ||
                        kind == EpilogueKind::gelu_aux_bias;
  const bool apply_gelu = kind == EpilogueKind::gelu || kind == EpilogueKind::gelu_bias ||
                          kind == EpilogueKind::gelu_aux || kind == EpilogueKind::gelu_aux_bias;
  const bool dgelu = kind == EpilogueKind::dgelu || kind == EpilogueKind::dgelu_bgrad;
  const bool write_aux = kind == EpilogueKind::gelu_aux || kind == EpilogueKind::gelu_aux_bias;
  // Bias gradients: reductions over k of op(A) (BGRADA, one per row of D) or op(B) (BGRADB, one per
  // column), read from the inputs as they are, before any scaling.
  if (kind == EpilogueKind::bgrada || kind == EpilogueKind::bgradb) {
    const bool by_rows = kind == EpilogueKind::bgrada;
    const GemmOperand& x = by_rows ? ga : gb;
    const uint64_t count = by_rows ? s.m : s.n;
    for (uint64_t i = 0; i < count; ++i) {
      float sum = 0.0f;
      for (uint64_t p = 0; p < s.k; ++p) {
        const long long r = by_rows ? i : p, col = by_rows ? p : i;  // op(X)'s element
        sum += x.transposed ? operand_at(x, col, r) : operand_at(x, r, col);
      }
      store(o.bias, ct, i, sum);
    }
  }
  std::vector<float> row_sums(dgelu ? s.m : 0, 0.0f);
  for (uint64_t j = 0; j < s.n; ++j)
    for (uint64_t i = 0; i < s.m; ++i) {
      const size_t at = size_t(i + j * ld.ld);
      float x = ab_factor * acc[size_t(i + j * s.m)];
      if (beta != 0.0f) x += c_factor * load(c, ct, size_t(i + j * lc.ld));
      if (add_bias) x += load(o.bias, ct, i);
      const size_t aux_at = size_t(i + j * uint64_t(o.aux_ld));
      if (write_aux) store(o.aux, aux_t, aux_at, x);
      if (apply_gelu) x = gelu(x);
      if (dgelu) {
        x *= gelu_grad(load(o.aux, aux_t, aux_at));
        row_sums[i] += x;
      }
      amax = std::max(amax, std::fabs(x));
      store(d, t, at, x, d_scale);
    }
  if (kind == EpilogueKind::dgelu_bgrad)
    for (uint64_t i = 0; i < s.m; ++i) store(o.bias, ct, i, row_sums[i]);
  if (o.amax_d) *o.amax_d = amax;
}

}  // namespace emu
