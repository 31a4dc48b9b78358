// The CUDA trainer's speed switches (llmc/cuda/speed_switches.h): the table's rows, values by name
// and index, the environment (with the retired variables' notices) and the summary line.
#include <doctest/doctest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "llmc/cuda/speed_switches.h"
#include "tests/unit/test_support.h"

using namespace llmc;
using test_support::contains;

namespace {

// Every switch at the same value.
bool same_switches(const SpeedSwitches& a, const SpeedSwitches& b) {
  for (size_t row = 0; row < speed_switch_rows().size(); ++row)
    if (speed_switch_value(a, row) != speed_switch_value(b, row)) return false;
  return true;
}

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
      CHECK(same_switches(by_index, by_name));
      CHECK(same_switches(by_name, SpeedSwitches{}) == (value == 0));
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

TEST_CASE("speed switches: LLMC_CUDNN_BACKWARD, LLMC_GEMM_SEARCH and LLMC_CUDA_GRAPHS are their enums in order") {
  SpeedSwitches s;
  CHECK(s.cudnn_backward == CudnnBackward::kDefault);
  CHECK(s.gemm_search == GemmSearch::kTimed);
  CHECK(s.cuda_graphs == CudaGraphs::kOff);
  set_speed_switch(s, row_of("LLMC_CUDNN_BACKWARD"), "deterministic");
  set_speed_switch(s, row_of("LLMC_GEMM_SEARCH"), "heuristic");
  set_speed_switch(s, row_of("LLMC_CUDA_GRAPHS"), "on");
  CHECK(s.cudnn_backward == CudnnBackward::kDeterministic);
  CHECK(s.gemm_search == GemmSearch::kHeuristic);
  CHECK(s.cuda_graphs == CudaGraphs::kOn);
  CHECK(max_recompute(s) == 2);  // none of them limits the recompute
}

TEST_CASE("speed switches: the settled ones are gone from the table, and each is retired with what runs now") {
  const std::vector<RetiredSpeedSwitch>& retired = retired_speed_switches();
  CHECK(retired.size() == 12);
  for (const RetiredSpeedSwitch& r : retired) {
    CHECK(std::string(r.variable).rfind("LLMC_", 0) == 0);
    CHECK(std::string(r.now).size() > 10);
    for (const SpeedSwitchRow& row : speed_switch_rows()) CHECK(std::string(row.variable) != r.variable);
  }
}

TEST_CASE("speed switches: a retired variable in the environment gets one notice, and changes nothing") {
  ::setenv("LLMC_CLASSIFIER", "whole", 1);
  ::setenv("LLMC_FAST_MATH", "", 1);  // empty: as unset, no notice
  std::FILE* notices = std::tmpfile();
  REQUIRE(notices != nullptr);
  CHECK(same_switches(speed_switches_from_env(notices), SpeedSwitches{}));
  std::rewind(notices);
  std::string text;
  for (int c; (c = std::fgetc(notices)) != EOF;) text += char(c);
  std::fclose(notices);
  CHECK(text == "LLMC_CLASSIFIER=whole: this switch no longer exists (the classifier always runs in chunks of rows); "
                "ignored\n");
  ::unsetenv("LLMC_CLASSIFIER");
  ::unsetenv("LLMC_FAST_MATH");
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

TEST_CASE("speed switches: the summary names every variable and value, in the table's order") {
  const std::vector<SpeedSwitchRow>& rows = speed_switch_rows();
  SpeedSwitches last;
  std::string expected_defaults, expected_last;
  for (size_t row = 0; row < rows.size(); ++row) {
    set_speed_switch(last, row, int(rows[row].values.size()) - 1);
    expected_defaults += (row ? " " : "") + std::string(rows[row].variable) + "=" + rows[row].values.front();
    expected_last += (row ? " " : "") + std::string(rows[row].variable) + "=" + rows[row].values.back();
  }
  CHECK(speed_switches_summary(SpeedSwitches{}) == expected_defaults);
  CHECK(speed_switches_summary(last) == expected_last);
  CHECK(contains(speed_switches_summary(SpeedSwitches{}), "LLMC_GELU=mixed"));
}
