// Token plus position embedding: out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:].
#pragma once

namespace llmc {

void encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T, int C);

// dwte[tokens[b,t],:] += dout[b,t,:] and dwpe[t,:] += sum_b dout[b,t,:]. Work is split over
// channels, so each gradient entry is summed by one thread in (b,t) order: deterministic.
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T, int C);

}  // namespace llmc
