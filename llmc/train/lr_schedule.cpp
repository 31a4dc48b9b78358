#include "llmc/train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace llmc {

LrScheduleKind lr_schedule_kind_from_name(const std::string& name) {
  if (name == "cosine") return LrScheduleKind::kCosine;
  if (name == "linear") return LrScheduleKind::kLinear;
  if (name == "constant") return LrScheduleKind::kConstant;
  if (name == "wsd") return LrScheduleKind::kWsd;
  throw std::invalid_argument("unknown LR schedule '" + name + "' (cosine, linear, constant or wsd)");
}

float LrSchedule::at(int step) const {
  // Double precision keeps the value independent of how the ratio is formed; the result is
  // rounded to float once.
  const double base = lr, final_lr = double(lr) * final_frac;
  if (step < warmup_steps) return float(base * (step + 1) / warmup_steps);
  const int last = max_steps - 1;
  switch (kind) {
    case LrScheduleKind::kConstant:
      return float(base);
    case LrScheduleKind::kCosine:
    case LrScheduleKind::kLinear: {
      const int span = last - warmup_steps;
      const double r = span > 0 ? std::clamp(double(step - warmup_steps) / span, 0.0, 1.0) : 1.0;
      if (kind == LrScheduleKind::kLinear) return float(base - (base - final_lr) * r);
      return float(final_lr + (base - final_lr) * 0.5 * (1.0 + std::cos(M_PI * r)));
    }
    case LrScheduleKind::kWsd: {
      const int decay_len = std::max(1, max_steps / 5);
      const int decay_start = max_steps - decay_len;
      if (step < decay_start) return float(base);
      const double r = std::min(1.0, double(step - decay_start + 1) / decay_len);
      return float(base - (base - final_lr) * r);
    }
  }
  return float(base);
}

}  // namespace llmc
