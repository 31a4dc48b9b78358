#include "llmc/train/outlier_detector.h"

#include <cmath>
#include <fmt/format.h>
#include <stdexcept>

namespace llmc {

double OutlierDetector::z_score(float x) const {
  const size_t n = values_.size();
  if (n < kMinSamples) return 0.0;
  double sum = 0.0;
  for (float v : values_) sum += v;
  const double mean = sum / double(n);
  double squares = 0.0;
  for (float v : values_) squares += (v - mean) * (v - mean);
  const double std = std::sqrt(squares / double(n));
  return std > 0.0 ? (double(x) - mean) / std : 0.0;
}

void OutlierDetector::push(float x) {
  values_.push_back(x);
  if (values_.size() > kWindow) values_.pop_front();
}

void OutlierDetector::restore(const std::vector<float>& values) {
  if (values.size() > kWindow)
    throw std::invalid_argument(fmt::format("outlier window of {} values, more than {}", values.size(), kWindow));
  values_.assign(values.begin(), values.end());
}

}  // namespace llmc
