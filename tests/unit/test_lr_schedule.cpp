#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "llmc/train/lr_schedule.h"

using llmc::LrSchedule;
using llmc::LrScheduleKind;

namespace {

// Field by field: warmup and max_steps are both ints, and a reordered struct must not swap them.
LrSchedule make(LrScheduleKind kind, float lr, int warmup, int max_steps, float final_frac) {
  LrSchedule s;
  s.kind = kind;
  s.lr = lr;
  s.warmup_steps = warmup;
  s.max_steps = max_steps;
  s.final_frac = final_frac;
  return s;
}

struct LrAt {
  int step;
  double lr;
};

void check_lrs(const LrSchedule& s, const std::vector<LrAt>& expected) {
  for (const LrAt& e : expected) {
    CAPTURE(e.step);
    CHECK(s.at(e.step) == doctest::Approx(e.lr));
  }
}

}  // namespace

// Expected values below are worked out by hand from the formulas in docs/training.md:
// lr 1, warmup 10, 111 steps (last step 110, 100 post-warmup intervals), final fraction 0.1.
TEST_CASE("lr schedule: cosine warms up, passes the midpoint, ends at lr*q on the last step") {
  check_lrs(make(LrScheduleKind::kCosine, 1.0f, 10, 111, 0.1f),
            {{0, 0.1},   // 1 * 1/10
             {4, 0.5},   // 5/10
             {9, 1.0},   // 10/10
             {10, 1.0},  // ratio 0
             // ratio 1/4: 0.1 + 0.9 * 0.5 * (1 + cos(pi/4)) = 0.1 + 0.45 * 1.7071067811865
             {35, 0.868198051533946},
             {60, 0.55},  // ratio 1/2: cos = 0
             // ratio 3/4: 0.1 + 0.45 * (1 - 0.70710678118655)
             {85, 0.231801948466054},
             {110, 0.1}});
}

TEST_CASE("lr schedule: cosine with q=1 and no warmup is a constant lr") {
  const LrSchedule s = make(LrScheduleKind::kCosine, 3e-4f, 0, 50, 1.0f);
  for (int step : {0, 1, 24, 49}) CHECK(s.at(step) == 3e-4f);
}

TEST_CASE("lr schedule: linear") {
  check_lrs(make(LrScheduleKind::kLinear, 2.0f, 10, 111, 0.1f),
            {{0, 0.2}, {9, 2.0}, {10, 2.0}, {35, 2.0 - 1.8 * 0.25}, {60, 1.1}, {110, 0.2}});
}

TEST_CASE("lr schedule: constant after warmup, final fraction ignored") {
  check_lrs(make(LrScheduleKind::kConstant, 1.0f, 4, 20, 0.0f), {{0, 0.25}, {2, 0.75}, {3, 1.0}, {10, 1.0}, {19, 1.0}});
}

TEST_CASE("lr schedule: wsd holds lr, then decays linearly over the last 20% to lr*q") {
  // 100 steps: decay over the last 20, steps 80..99, reaching 0 at step 99.
  check_lrs(make(LrScheduleKind::kWsd, 1.0f, 10, 100, 0.0f),
            {{0, 0.1}, {9, 1.0}, {50, 1.0}, {79, 1.0}, {80, 0.95}, {89, 0.5}, {99, 0.0}});
  // 10 steps and q 0.5: the decay is over steps 8, 9.
  check_lrs(make(LrScheduleKind::kWsd, 1.0f, 0, 10, 0.5f), {{7, 1.0}, {8, 0.75}, {9, 0.5}});
}

TEST_CASE("lr schedule: a single post-warmup step is the last step and gets lr*q") {
  CHECK(make(LrScheduleKind::kCosine, 1.0f, 0, 1, 0.25f).at(0) == doctest::Approx(0.25));
  const LrSchedule s = make(LrScheduleKind::kLinear, 1.0f, 3, 4, 0.5f);
  CHECK(s.at(2) == doctest::Approx(1.0));
  CHECK(s.at(3) == doctest::Approx(0.5));
}

TEST_CASE("lr schedule: names") {
  CHECK(llmc::lr_schedule_kind_from_name("cosine") == LrScheduleKind::kCosine);
  CHECK(llmc::lr_schedule_kind_from_name("linear") == LrScheduleKind::kLinear);
  CHECK(llmc::lr_schedule_kind_from_name("constant") == LrScheduleKind::kConstant);
  CHECK(llmc::lr_schedule_kind_from_name("wsd") == LrScheduleKind::kWsd);
  CHECK_THROWS_AS(llmc::lr_schedule_kind_from_name("step"), std::invalid_argument);
}
