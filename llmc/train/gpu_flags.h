// llm.c's GPU flags as the CUDA trainer applies them (train_gpt2.cu): -ge chooses LLMC_GELU's
// value, -f is checked against the build's matmuls. Plain C++, so that the unit tests hold every
// mapping and refusal. The CPU trainer refuses both flags (trainer_main.cpp), as it refuses
// --device-memory.
#pragma once
#include "llmc/cuda/speed_switches.h"
#include "llmc/train/options.h"

namespace llmc {

// LLMC_GELU's path for llm.c's -ge value: 0 (no fusion) is `kernels`, 2 (forward and backward) is
// `epilogues`. llm.c's 1 never parses (options.cpp says what to use instead).
GeluPath gelu_path_for_fusion(int gelu_fusion);

// The speed switches of a CUDA run: every LLMC_* variable from the environment
// (speed_switches_from_env), with LLMC_GELU taken from -ge when -ge is given. Throws FlagError
// naming -ge when LLMC_GELU is also set, to another value (a flag and a variable that disagree are
// never settled silently), and when -ge 2 meets -r 1 or 2 (the forward epilogue's output cannot be
// recomputed: it needs -r 0, or -r auto, which then chooses 0).
SpeedSwitches cuda_speed_switches(const TrainOptions& options);

// -f against the build: the FP32 build computes every matmul in full fp32 (its 1e-4 agreement with
// the CPU trainer depends on it) and has no TF32 path, so -f 1 is a FlagError there; the bf16 build
// has no fp32 matmuls, so, as in llm.c, either value changes nothing.
void check_tf32_flag(const TrainOptions& options, bool fp32_build);

}  // namespace llmc
