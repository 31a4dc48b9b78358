// GELU, tanh approximation (llmc/gpt2_constants.h): gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
#pragma once
#include <cstddef>

namespace llmc {

void gelu_forward(float* out, const float* inp, size_t n);

// dinp = gelu'(inp) * dout (overwritten; dinp may alias dout).
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n);

}  // namespace llmc
