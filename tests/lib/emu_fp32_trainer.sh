# shellcheck shell=bash
# The emulated CUDA trainer in FP32 under ASan + UBSan, which the checks of several ranks run. Sourced
# from the repository root after common.sh (it writes the build's log to $tmp): ends the check as
# skipped without the CUDA headers (emu_headers.sh), builds the trainer or fails with the build's
# tail, and sets emu to its path.
# shellcheck source-path=SCRIPTDIR source=emu_headers.sh
source tests/lib/emu_headers.sh
emu=build/emu-address/fp32/trainer/train_gpt2cu
make -s -j2 CUDA_HOME="$cuda_home" EMU_SANITIZER=address PRECISION=FP32 "$emu" >"$tmp/build.log" 2>&1 ||
  { tail -n 30 "$tmp/build.log"; echo "FAIL: build of the emulated trainer (FP32)"; exit 1; }
