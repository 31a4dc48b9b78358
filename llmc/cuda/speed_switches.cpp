// The speed switches' table (llmc/cuda/speed_switches.def) as rows, parsed from the environment.
#include "llmc/cuda/speed_switches.h"

#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>

namespace llmc {

namespace {

std::vector<std::string> split_values(const char* values) {
  std::vector<std::string> out(1);
  for (const char* c = values; *c; ++c) {
    if (*c == '|') out.emplace_back();
    else out.back() += *c;
  }
  return out;
}

// The field of each row, read and written as its value's index, in the table's order.
struct FieldAccess {
  int (*get)(const SpeedSwitches&);
  void (*set)(SpeedSwitches&, int);
};
const std::vector<FieldAccess>& field_access() {
  static const std::vector<FieldAccess> access = {
#define LLMC_SPEED_SWITCH(type, field, variable, values, what) \
  {[](const SpeedSwitches& s) { return int(s.field); }, [](SpeedSwitches& s, int v) { s.field = type(v); }},
#include "llmc/cuda/speed_switches.def"
#undef LLMC_SPEED_SWITCH
  };
  return access;
}

const SpeedSwitchRow& row_at(size_t row) {
  const std::vector<SpeedSwitchRow>& rows = speed_switch_rows();
  if (row >= rows.size())
    throw std::out_of_range(fmt::format("speed switch row {} of {}", row, rows.size()));
  return rows[row];
}

}  // namespace

const std::vector<SpeedSwitchRow>& speed_switch_rows() {
  static const std::vector<SpeedSwitchRow> rows = {
#define LLMC_SPEED_SWITCH(type, field, variable, values, what) \
  {variable, split_values(values), what},
#include "llmc/cuda/speed_switches.def"
#undef LLMC_SPEED_SWITCH
  };
  return rows;
}

// Settled by GPU runs (docs/gpu-runs.md, docs/cuda-trainer.md): the path each left is the
// trainer's only one.
const std::vector<RetiredSpeedSwitch>& retired_speed_switches() {
  static const std::vector<RetiredSpeedSwitch> retired = {
      {"LLMC_BIAS_GRAD", "the bias gradients are summed by their own kernels"},
      {"LLMC_FAST_MATH", "the classifier, the fallback softmax and GELU always use the fast exponentials"},
      {"LLMC_CUDNN_DQ_CLEAR", "cuDNN's dQ accumulator is cleared only where the loaded cuDNN does not clear it"},
      {"LLMC_LAYERNORM_BACKWARD", "LayerNorm backward always finishes its sums in a kernel of its own"},
      {"LLMC_LAYERNORM_BACKWARD_PREFETCH", "LayerNorm backward never prefetches"},
      {"LLMC_ENCODER_BACKWARD", "the encoder backward always sums a frequent token's positions in pieces"},
      {"LLMC_CLASSIFIER", "the classifier always runs in chunks of rows"},
      {"LLMC_CLASSIFIER_PASS", "the classifier always reads a row of logits from memory in both passes"},
      {"LLMC_CLASSIFIER_LOADS", "each classifier thread always loads one vector at a time"},
      {"LLMC_CLASSIFIER_CHECKS", "the classifier always checks once per vector"},
      {"LLMC_ADAMW", "AdamW always runs as one launch for every parameter tensor"},
      {"LLMC_LAYERNORM_FORWARD", "LayerNorm forward always holds its row in registers where it fits"},
  };
  return retired;
}

int speed_switch_value(const SpeedSwitches& s, size_t row) {
  row_at(row);
  return field_access()[row].get(s);
}

void set_speed_switch(SpeedSwitches& s, size_t row, int value) {
  const SpeedSwitchRow& r = row_at(row);
  if (value < 0 || size_t(value) >= r.values.size())
    throw std::out_of_range(fmt::format("{}: value {} of {}", r.variable, value, r.values.size()));
  field_access()[row].set(s, value);
}

void set_speed_switch(SpeedSwitches& s, size_t row, const std::string& value) {
  const SpeedSwitchRow& r = row_at(row);
  std::string names;
  for (size_t i = 0; i < r.values.size(); ++i) {
    if (r.values[i] == value) return set_speed_switch(s, row, int(i));
    names += (i == 0 ? "'" : i + 1 == r.values.size() ? " or '" : ", '") + r.values[i] + "'";
  }
  throw std::runtime_error(fmt::format("{}: '{}' is not {} ({})", r.variable, value, names, r.what));
}

SpeedSwitches speed_switches_from_env(std::FILE* notices) {
  for (const RetiredSpeedSwitch& r : retired_speed_switches()) {
    const char* env = std::getenv(r.variable);
    if (env != nullptr && *env != '\0' && notices != nullptr)
      fmt::print(notices, "{}={}: this switch no longer exists ({}); ignored\n", r.variable, env, r.now);
  }
  SpeedSwitches s;
  const std::vector<SpeedSwitchRow>& rows = speed_switch_rows();
  for (size_t row = 0; row < rows.size(); ++row) {
    const char* env = std::getenv(rows[row].variable);
    if (env != nullptr && *env != '\0') set_speed_switch(s, row, std::string(env));
  }
  return s;
}

int max_recompute(const SpeedSwitches& s) { return s.gelu == GeluPath::kEpilogues ? 0 : 2; }

std::string speed_switches_summary(const SpeedSwitches& s) {
  std::string out;
  const std::vector<SpeedSwitchRow>& rows = speed_switch_rows();
  for (size_t row = 0; row < rows.size(); ++row)
    out += fmt::format("{}{}={}", row ? " " : "", rows[row].variable, rows[row].values[size_t(speed_switch_value(s, row))]);
  return out;
}

}  // namespace llmc
