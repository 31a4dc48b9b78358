#!/usr/bin/env bash
# make test-quick: the edit loop's test, a few minutes on a built tree; make test is the whole
# suite. One line per step, as make test prints them:
#   unit       the doctest unit tests (build/unit_tests, without sanitizers);
#   parity     the CPU trainer against float64 PyTorch (tests/cpu/check_cpu_parity.sh);
#   kernels    every dev/cuda kernel family's checks at small shapes on the emulated GPU under ASan +
#              UBSan, in BF16 (tests/emu/check_emu.sh runs them under every checker, both precisions);
#   trainer    test_gpt2cu on the emulated GPU under ASan + UBSan, one step in BF16 and one in FP32,
#              against the CPU backend on a small odd-shaped model (tests/emu/check_emu_trainer.sh
#              runs four steps, and training runs).
# Logs in build/test-logs/quick/. Exits non-zero if a step failed.
set -u
cd "$(dirname "$0")/.." || exit 1
unset MAKEFLAGS MFLAGS MAKELEVEL
logs=build/test-logs/quick
rm -rf "$logs"
mkdir -p "$logs"
failed=0
start=$SECONDS

step() {  # step NAME COMMAND...: runs it into $logs/NAME.log, prints its line
  local name=$1; shift
  local began=$SECONDS rc=0
  "$@" >"$logs/$name.log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then
    printf 'PASS  %-8s %4ss  %s\n' "$name" $((SECONDS - began)) "$(tail -n 1 "$logs/$name.log" | cut -c1-100)"
  else
    failed=$((failed + 1))
    printf 'FAIL  %-8s %4ss  (log: %s)\n' "$name" $((SECONDS - began)) "$logs/$name.log"
    tail -n 15 "$logs/$name.log" | sed 's/^/      | /'
  fi
}

unit() {
  make -s -j2 build/unit_tests && build/unit_tests --no-intro --no-version | tail -n 3
}

cuda_home=${CUDA_HOME:-/usr/local/cuda}
# shellcheck source=tests/lib/emu_kernel_checks.sh
source tests/lib/emu_kernel_checks.sh
fail() { echo "FAIL  $*"; kernel_failures=$((kernel_failures + 1)); }
kernels() {
  kernel_failures=0 kernel_checks=0
  emu_kernel_checks address BF16 0 "$logs" && [ "$kernel_failures" -eq 0 ] &&
    echo "$kernel_checks kernel checks passed (bf16, ASan + UBSan)"
}

trainer() {
  local prec dir=$logs/trainer
  mkdir -p "$dir"
  for prec in BF16 FP32; do
    make --no-print-directory -s -j2 CUDA_HOME="$cuda_home" EMU_SANITIZER=address PRECISION=$prec \
      "build/emu-address/${prec,,}/trainer/test_gpt2cu" || return 1
  done
  /usr/bin/python3 tests/lib/tiny_model_and_shards.py "$dir" --seed 11 --first-token 5 --layers 3 --heads 3 \
    --channels 96 --max-seq-len 40 val_000000.bin:400 >/dev/null || return 1
  for prec in bf16 fp32; do
    OMP_NUM_THREADS=2 "build/emu-address/$prec/trainer/test_gpt2cu" --model "$dir/model.bin" --B 2 --T 40 --steps 1 \
      >"$dir/$prec.log" 2>&1 || { tail -n 20 "$dir/$prec.log"; return 1; }
    echo "$prec: $(tail -n 1 "$dir/$prec.log")"
  done
}

step unit unit
step parity bash tests/cpu/check_cpu_parity.sh
steps=2
if [ -f "$cuda_home/include/cuda_runtime.h" ]; then
  step kernels kernels
  step trainer trainer
  steps=4
else
  echo "SKIP  kernels, trainer: no CUDA toolkit headers in $cuda_home/include (the emulated GPU compiles against them)"
fi
echo "quick: $((steps - failed)) of $steps steps passed in $((SECONDS - start))s"
[ "$failed" -eq 0 ]
