#!/usr/bin/env bash
# The crash and signal scenarios of tests/cpu/check_crash_resume.sh (SIGKILL anywhere and in the
# middle of a checkpoint write, SIGTERM, two SIGINTs), run through the CUDA trainer on the emulated
# GPU (FP32, ASan + UBSan): each resumed run's main.log and final model byte-identical to an
# uninterrupted run's, as on the CPU. Skips (77) without the CUDA headers.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source-path=SCRIPTDIR source=../lib/emu_headers.sh
source tests/lib/emu_headers.sh
trainer=build/emu-address/fp32/trainer/train_gpt2cu
mkdir -p build/tmp
make -s -j2 CUDA_HOME="$cuda_home" EMU_SANITIZER=address PRECISION=FP32 "$trainer" >build/tmp/emu_crash_resume_build.log 2>&1 ||
  { tail -n 30 build/tmp/emu_crash_resume_build.log; echo "FAIL: build of the emulated trainer (FP32)"; exit 1; }
export OMP_NUM_THREADS=2
CRASH_RESUME_TRAINER=$trainer source tests/cpu/check_crash_resume.sh
