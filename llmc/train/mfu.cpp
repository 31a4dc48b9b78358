// MFU (llmc/train/mfu.h): the FLOP count.
#include "llmc/train/mfu.h"

namespace llmc {

double model_flops_per_token(const GPT2Config& config, int seq_len) {
  const double N = double(num_parameters(config));
  return 6.0 * N + 6.0 * config.num_layers * double(config.channels) * seq_len;
}

double mfu_percent(double flops_per_token, double tokens_per_second, double peak_flops_per_second) {
  return 100.0 * flops_per_token * tokens_per_second / peak_flops_per_second;
}

}  // namespace llmc
