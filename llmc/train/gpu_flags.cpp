#include "llmc/train/gpu_flags.h"

#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <stdexcept>
#include <string>

#include "llmc/backend.h"

namespace llmc {

namespace {

// The row of llmc/cuda/speed_switches.def whose field is `gelu` (LLMC_GELU), found in the table so
// that the variable's name is written only there.
size_t gelu_row() {
  static const size_t row = [] {
    size_t index = 0, found = SIZE_MAX;
#define LLMC_SPEED_SWITCH(type, field, variable, values, what) \
  if (std::strcmp(#field, "gelu") == 0) found = index;                \
  ++index;
#include "llmc/cuda/speed_switches.def"
#undef LLMC_SPEED_SWITCH
    if (found == SIZE_MAX) throw std::logic_error("speed_switches.def has no gelu row");
    return found;
  }();
  return row;
}

std::string gelu_setting(GeluPath path) {
  const SpeedSwitchRow& row = speed_switch_rows()[gelu_row()];
  return fmt::format("{}={}", row.variable, row.values[size_t(path)]);
}

}  // namespace

GeluPath gelu_path_for_fusion(int gelu_fusion) {
  if (gelu_fusion == 0) return GeluPath::kKernels;
  if (gelu_fusion == 2) return GeluPath::kEpilogues;
  throw std::invalid_argument(fmt::format("-ge: {} is not 0 or 2", gelu_fusion));
}

SpeedSwitches cuda_speed_switches(const TrainOptions& o) {
  SpeedSwitches speed = speed_switches_from_env();
  if (o.gelu_fusion < 0) return speed;
  const GeluPath wanted = gelu_path_for_fusion(o.gelu_fusion);
  const char* env = std::getenv(speed_switch_rows()[gelu_row()].variable);
  if (env != nullptr && *env != '\0' && speed.gelu != wanted)
    throw FlagError(fmt::format("-ge: {} means {}, but the environment sets {}: give one of the two, or the same "
                                "choice in both",
                                o.gelu_fusion, gelu_setting(wanted), gelu_setting(speed.gelu)));
  speed.gelu = wanted;
  if (o.recompute != kRecomputeAuto && o.recompute > max_recompute(speed))
    throw FlagError(fmt::format("-ge: 2 ({}) stores the GELU output of the forward GEMM's epilogue, which no "
                                "recompute reproduces: it needs -r 0 (or -r auto), not -r {}",
                                gelu_setting(wanted), o.recompute));
  return speed;
}

void check_tf32_flag(const TrainOptions& o, bool fp32_build) {
  if (o.tf32 == 1 && fp32_build)
    throw FlagError("-f: 1 (TF32 for fp32 matmuls) is not offered: this FP32 build computes every matmul in full "
                    "fp32 (CUBLAS_COMPUTE_32F), which its agreement with the CPU trainer needs; use -f 0 (what it "
                    "does), or the bf16 build (make train_gpt2cu) for speed");
}

}  // namespace llmc
