// Learning-rate schedules over a run of max_steps optimizer steps (0-based step s):
//   warmup (all kinds): lr * (s+1) / warmup for s < warmup;
//   cosine:   lr*q + (lr - lr*q) * 0.5 * (1 + cos(pi * r)),  r = (s - warmup) / (max_steps - 1 - warmup);
//   linear:   lr - (lr - lr*q) * r, same r;
//   constant: lr;
//   wsd:      lr until the last max(1, max_steps/5) steps, which decay linearly and end at lr*q.
// r is 1 when its denominator is 0 (a single post-warmup step is the last step), so lr*q is reached
// exactly at s = max_steps - 1 by cosine, linear and wsd.
#pragma once
#include <string>

namespace llmc {

enum class LrScheduleKind { kCosine, kLinear, kConstant, kWsd };

// "cosine", "linear", "constant", "wsd"; throws std::invalid_argument otherwise.
LrScheduleKind lr_schedule_kind_from_name(const std::string& name);

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kCosine;
  float lr = 3e-4f;
  int warmup_steps = 0;
  int max_steps = 1;
  float final_frac = 1.0f;

  float at(int step) const;
};

}  // namespace llmc
