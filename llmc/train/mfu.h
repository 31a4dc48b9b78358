// Model FLOPs utilisation (MFU): the FLOPs a step's tokens need, counted from the model's shape
// (not from the kernels that ran, so recomputation earns nothing), per second, over the GPU's
// dense peak. The count is llm.c's and the PaLM paper's (appendix B): per token, 6N for the
// matmuls of the forward (2N) and backward (4N) pass over all N parameters, plus 6LCT for the
// attention scores and their use (QK^T and AV, 2·2·L·C·T forward, twice that backward, halved by
// the causal mask). The peak it is counted against: llmc/peak_flops.h.
#pragma once
#include "llmc/gpt2.h"

namespace llmc {

// 6N + 6·L·C·T for sequences of seq_len tokens.
double model_flops_per_token(const GPT2Config& config, int seq_len);

// Percent of `peak_flops_per_second` that `tokens_per_second` tokens of `flops_per_token` each are.
double mfu_percent(double flops_per_token, double tokens_per_second, double peak_flops_per_second);

}  // namespace llmc
