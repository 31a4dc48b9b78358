// Spots loss and gradient-norm spikes: the z-score of a new value against the last `window`
// accepted values, z = (x - mean) / std (population standard deviation). The trainer skips the
// update of a step whose z-score exceeds -sl (loss) or -sg (gradient norm). One-sided: only
// values above the mean are outliers; a loss that falls fast is not a problem.
#pragma once
#include <cstddef>
#include <deque>
#include <vector>

namespace llmc {

class OutlierDetector {
 public:
  static constexpr size_t kWindow = 100;     // the last 100 accepted steps
  static constexpr size_t kMinSamples = 10;  // fewer than this: every value is accepted (z = 0)

  // 0 until kMinSamples values are in the window, and 0 when they are all equal (no spread to
  // measure against: a constant window judges nothing).
  double z_score(float x) const;
  // True when threshold > 0 and z_score(x) > threshold.
  bool is_outlier(float x, double threshold) const { return threshold > 0 && z_score(x) > threshold; }
  // Adds an accepted value, dropping the oldest beyond kWindow.
  void push(float x);

  // The window, oldest first (saved in checkpoints; mean and std are recomputed from it in a
  // fixed order, so a restored detector judges exactly as the original).
  std::vector<float> values() const { return {values_.begin(), values_.end()}; }
  // Throws std::invalid_argument if there are more than kWindow values.
  void restore(const std::vector<float>& values);

 private:
  std::deque<float> values_;
};

}  // namespace llmc
