// Causal multi-head self-attention on the fused qkv activation (B x T x 3C: q, k, v side by side,
// head h owning channels [h*hs, (h+1)*hs) of each, hs = C/NH). Scores are scaled by 1/sqrt(hs).
#pragma once

namespace llmc {

// out: B x T x C. att: B x NH x T x T softmax probabilities (row t holds t+1 valid entries; the
// rest is 0), saved for the backward pass.
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH);

// dqkv (B x T x 3C) is overwritten. Work is split over (batch, head) pairs, which own disjoint
// slices of dqkv, so every sum is done by one thread in a fixed order.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T,
                        int C, int NH);

}  // namespace llmc
