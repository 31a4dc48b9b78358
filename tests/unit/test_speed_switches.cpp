// The CUDA trainer's speed switches (llmc/cuda/speed_switches.h): the table's rows, values by name
// and index, the environment, the summary line and the combinations the tests and the sweep run.
#include <doctest/doctest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "llmc/cuda/speed_switches.h"
#include "tests/unit/test_support.h"

using namespace llmc;
using test_support::contains;

namespace {

size_t row_of(const std::string& variable) {
  const std::vector<SpeedSwitchRow>& rows = speed_switch_rows();
  for (size_t row = 0; row < rows.size(); ++row)
    if (variable == rows[row].variable) return row;
  FAIL("no row for " << variable);
  return 0;
}

}  // namespace

TEST_CASE("speed switches: every row names an LLMC_ variable with at least two values, each once") {
  const std::vector<SpeedSwitchRow>& rows = speed_switch_rows();
  REQUIRE(!rows.empty());
  for (const SpeedSwitchRow& r : rows) {
    CHECK(std::string(r.variable).rfind("LLMC_", 0) == 0);
    CHECK(r.values.size() >= 2);
    for (size_t i = 0; i < r.values.size(); ++i) {
      CHECK(!r.values[i].empty());
      for (size_t j = 0; j < i; ++j) CHECK(r.values[i] != r.values[j]);
    }
    CHECK(std::string(r.what).size() > 10);
  }
}

TEST_CASE("speed switches: defaults are the first values; every value round-trips by index and by name") {
  const std::vector<SpeedSwitchRow>& rows = speed_switch_rows();
  const SpeedSwitches defaults;
  for (size_t row = 0; row < rows.size(); ++row) {
    CHECK(speed_switch_value(defaults, row) == 0);
    for (int value = 0; value < int(rows[row].values.size()); ++value) {
      SpeedSwitches by_index, by_name;
      set_speed_switch(by_index, row, value);
      set_speed_switch(by_name, row, rows[row].values[size_t(value)]);
      CHECK(speed_switch_value(by_index, row) == value);
      CHECK(speed_switch_value(by_name, row) == value);
      CHECK(by_index == by_name);
      CHECK((by_name == SpeedSwitches{}) == (value == 0));
      // Only this row changed.
      for (size_t other = 0; other < rows.size(); ++other)
        if (other != row) CHECK(speed_switch_value(by_name, other) == 0);
    }
    SpeedSwitches s;
    CHECK_THROWS_AS(set_speed_switch(s, row, int(rows[row].values.size())), std::out_of_range);
    CHECK_THROWS_AS(set_speed_switch(s, row, -1), std::out_of_range);
  }
  SpeedSwitches s;
  CHECK_THROWS_AS(set_speed_switch(s, rows.size(), 0), std::out_of_range);
}

TEST_CASE("speed switches: LLMC_GELU is the enum in the table's order") {
  const size_t row = row_of("LLMC_GELU");
  SpeedSwitches s;
  set_speed_switch(s, row, "kernels");
  CHECK(s.gelu == GeluPath::kKernels);
  set_speed_switch(s, row, "epilogues");
  CHECK(s.gelu == GeluPath::kEpilogues);
  CHECK(max_recompute(s) == 0);
  set_speed_switch(s, row, "mixed");
  CHECK(s.gelu == GeluPath::kMixed);
  CHECK(max_recompute(s) == 2);
}

TEST_CASE("speed switches: LLMC_FAST_MATH, LLMC_CUDNN_DQ_CLEAR and LLMC_CUDNN_BACKWARD are their enums in order") {
  SpeedSwitches s;
  // The defaults the H100 measured faster (docs/gpu-runs.md): fast math, dQ cleared only where needed.
  CHECK(s.fast_math == FastMath::kOn);
  CHECK(s.cudnn_dq_clear == CudnnDqClear::kAuto);
  CHECK(s.cudnn_backward == CudnnBackward::kDefault);
  set_speed_switch(s, row_of("LLMC_FAST_MATH"), "off");
  set_speed_switch(s, row_of("LLMC_CUDNN_DQ_CLEAR"), "always");
  set_speed_switch(s, row_of("LLMC_CUDNN_BACKWARD"), "deterministic");
  CHECK(s.fast_math == FastMath::kOff);
  CHECK(s.cudnn_dq_clear == CudnnDqClear::kAlways);
  CHECK(s.cudnn_backward == CudnnBackward::kDeterministic);
  CHECK(max_recompute(s) == 2);  // none of them limits the recompute
  const SpeedSwitches all = all_levers_on();
  CHECK(all.fast_math == FastMath::kOn);
  CHECK(all.cudnn_dq_clear == CudnnDqClear::kAuto);
  CHECK(all.cudnn_backward == CudnnBackward::kDefault);  // deterministic is slower: not a lever
}

TEST_CASE("speed switches: LLMC_GEMM_SEARCH and LLMC_ENCODER_BACKWARD default to timed and pieces") {
  SpeedSwitches s;
  CHECK(s.gemm_search == GemmSearch::kTimed);
  CHECK(s.encoder_backward == EncoderBackward::kPieces);
  CHECK(speed_switch_rows()[row_of("LLMC_GEMM_SEARCH")].values.front() == "timed");
  CHECK(speed_switch_rows()[row_of("LLMC_ENCODER_BACKWARD")].values.front() == "pieces");
  set_speed_switch(s, row_of("LLMC_GEMM_SEARCH"), "heuristic");
  set_speed_switch(s, row_of("LLMC_ENCODER_BACKWARD"), "chains");
  CHECK(s.gemm_search == GemmSearch::kHeuristic);
  CHECK(s.encoder_backward == EncoderBackward::kChains);
}

TEST_CASE("speed switches: LLMC_BIAS_GRAD and LLMC_LAYERNORM_BACKWARD are their enums in the table's order") {
  SpeedSwitches s;
  set_speed_switch(s, row_of("LLMC_BIAS_GRAD"), "epilogue");
  CHECK(s.bias_grad == BiasGradPath::kEpilogue);
  set_speed_switch(s, row_of("LLMC_BIAS_GRAD"), "layernorm");
  CHECK(s.bias_grad == BiasGradPath::kLayerNorm);
  set_speed_switch(s, row_of("LLMC_BIAS_GRAD"), "layernorm-fc-kernels");
  CHECK(s.bias_grad == BiasGradPath::kLayerNormFcKernels);
  set_speed_switch(s, row_of("LLMC_BIAS_GRAD"), "kernels");
  CHECK(s.bias_grad == BiasGradPath::kKernels);
  CHECK(all_levers_on().bias_grad == BiasGradPath::kLayerNorm);
  set_speed_switch(s, row_of("LLMC_LAYERNORM_BACKWARD"), "fused");
  CHECK(s.layernorm_backward == LayerNormBackwardPath::kFused);
  set_speed_switch(s, row_of("LLMC_LAYERNORM_BACKWARD"), "two-pass");
  CHECK(s.layernorm_backward == LayerNormBackwardPath::kTwoPass);
  CHECK(max_recompute(s) == 2);  // neither limits the recompute
}

TEST_CASE("speed switches: LLMC_ADAMW, LLMC_LAYERNORM_FORWARD and LLMC_CLASSIFIER are their enums in the table's order") {
  SpeedSwitches s;
  CHECK(s.adamw == AdamWLaunch::kMultiTensor);  // the defaults a GPU measured faster
  CHECK(s.layernorm_forward == LayerNormForwardPath::kRegisters);
  CHECK(s.classifier == ClassifierPath::kChunked);
  set_speed_switch(s, row_of("LLMC_ADAMW"), "per-tensor");
  CHECK(s.adamw == AdamWLaunch::kPerTensor);
  set_speed_switch(s, row_of("LLMC_LAYERNORM_FORWARD"), "shared");
  CHECK(s.layernorm_forward == LayerNormForwardPath::kShared);
  set_speed_switch(s, row_of("LLMC_CLASSIFIER"), "whole");
  CHECK(s.classifier == ClassifierPath::kWhole);
  CHECK(max_recompute(s) == 2);  // neither limits the recompute
  const SpeedSwitches all = all_levers_on();
  CHECK(all.adamw == AdamWLaunch::kMultiTensor);
  CHECK(all.layernorm_forward == LayerNormForwardPath::kRegisters);
}

TEST_CASE("speed switches: from the environment, a bad value named with the variable and every value") {
  const size_t row = row_of("LLMC_GELU");
  ::setenv("LLMC_GELU", "epilogues", 1);
  CHECK(speed_switches_from_env().gelu == GeluPath::kEpilogues);
  ::setenv("LLMC_GELU", "", 1);
  CHECK(speed_switches_from_env().gelu == GeluPath::kMixed);
  ::setenv("LLMC_GELU", "fast", 1);
  try {
    speed_switches_from_env();
    FAIL("LLMC_GELU=fast was accepted");
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    CHECK(contains(message, "LLMC_GELU: 'fast' is not"));
    for (const std::string& value : speed_switch_rows()[row].values) CHECK(contains(message, "'" + value + "'"));
  }
  ::unsetenv("LLMC_GELU");
  CHECK(speed_switches_from_env().gelu == GeluPath::kMixed);
}

TEST_CASE("speed switches: the summary names every variable and value; all levers on is every lever value") {
  const std::vector<SpeedSwitchRow>& rows = speed_switch_rows();
  const SpeedSwitches on = all_levers_on();
  std::string expected_defaults, expected_on;
  for (size_t row = 0; row < rows.size(); ++row) {
    REQUIRE(rows[row].lever >= 0);  // the default where no other value is faster (LLMC_CUDNN_BACKWARD)
    REQUIRE(rows[row].lever < int(rows[row].values.size()));
    CHECK(speed_switch_value(on, row) == rows[row].lever);
    expected_defaults += (row ? " " : "") + std::string(rows[row].variable) + "=" + rows[row].values.front();
    expected_on += (row ? " " : "") + std::string(rows[row].variable) + "=" + rows[row].values[size_t(rows[row].lever)];
  }
  CHECK(speed_switches_summary(SpeedSwitches{}) == expected_defaults);
  CHECK(speed_switches_summary(on) == expected_on);
  CHECK(contains(speed_switches_summary(SpeedSwitches{}), "LLMC_GELU=mixed"));
}
