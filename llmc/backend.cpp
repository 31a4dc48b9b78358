#include "llmc/backend.h"

#include <algorithm>
#include <stdexcept>

namespace llmc {

float Backend::forward_loss(const int* inputs, const int* targets, int B, int T) {
  const size_t n = size_t(std::max(B, 0)) * size_t(std::max(T, 0));
  losses_.resize(n);
  forward_losses(inputs, targets, B, T, losses_.data());
  return float(mean_in_order(losses_.data(), n));
}

void Backend::tune_kernels(const int*, const int*, int, int) {
  throw std::logic_error("tune_kernels: this backend does not choose its kernels by timing (tunes_kernels() is false)");
}

std::string Backend::set_kernel_choices(const std::vector<uint8_t>&) {
  throw std::logic_error("set_kernel_choices: this backend does not choose its kernels by timing (tunes_kernels() is "
                         "false)");
}

OptimizerPartition optimizer_partition(size_t num_elements, int zero_stage, int world_size, int rank) {
  return zero_stage == 1 ? zero1_partition(num_elements, world_size, rank, kPartitionAlignment)
                         : unsharded_partition(num_elements);
}

double mean_in_order(const float* values, size_t n) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += values[i];
  return sum / double(n);
}

}  // namespace llmc
