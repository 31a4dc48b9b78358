#!/usr/bin/env bash
# The bad-input catalogue of tests/cpu/check_bad_inputs.sh (files, flags, checkpoints, divergence,
# HellaSwag files), run through the CUDA trainer on the emulated GPU (FP32, ASan + UBSan): the same
# errors and recoveries as the CPU trainer, and for a GPU too small, an error before allocating that
# says what the run needs. Skips (77) without the CUDA headers.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source-path=SCRIPTDIR source=../lib/emu_headers.sh
source tests/lib/emu_headers.sh
trainer=build/emu-address/fp32/trainer/train_gpt2cu
mkdir -p build/tmp
make -s -j2 CUDA_HOME="$cuda_home" EMU_SANITIZER=address PRECISION=FP32 "$trainer" >build/tmp/emu_bad_inputs_build.log 2>&1 ||
  { tail -n 30 build/tmp/emu_bad_inputs_build.log; echo "FAIL: build of the emulated trainer (FP32)"; exit 1; }
BAD_INPUTS_TRAINER=$trainer source tests/cpu/check_bad_inputs.sh
