#!/usr/bin/env bash
# The bad-input catalogue of the CPU trainer (docs/operations.md): files, flags and environments
# that must fail cleanly, or recover in the documented safe way. For every case it asserts:
#  - exit code 1..127 (or 0 for a documented recovery), never a signal death or "core dumped";
#  - no hang (each run under `timeout 60`; 124 would be a hang);
#  - stderr (or stdout, for recoveries) names the problem;
#  - nothing a later run would trust is left behind: no *.tmp, no DONE_<step> without its files.
# BAD_INPUTS_TRAINER runs the catalogue through another trainer: tests/emu/check_emu_bad_inputs.sh
# gives it the CUDA trainer on the emulated GPU, which must answer as the CPU trainer does, except
# for the GPU memory flags, which it takes (its own cases at the end of "flags").
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"

tests_python <tests/lib/bad_input_files.py

trainer=${BAD_INPUTS_TRAINER:-./train_gpt2}
model=L1H2C16T32
common=(-i "$tmp/train_*.bin" -j "$tmp/val_0.bin" -e "$model" -b 2 -t 16 -v 0 -s 0)
cases=0

# Nothing under $tmp that a later run would trust: no .tmp, no DONE marker without its files
# (except under $tmp/inputs, where cases put such files on purpose).
check_leftovers() {
  local what=$1 f s
  while IFS= read -r f; do fail "[$what] left a temporary file $f"; done < <(find "$tmp" -name '*.tmp' -not -path "$tmp/inputs/*")
  while IFS= read -r f; do
    s=${f##*DONE_}
    [ -e "$(dirname "$f")/model_$s.bin" ] && [ -e "$(dirname "$f")/state_${s}_00000.bin" ] ||
      fail "[$what] $f has no model or state file"
  done < <(find "$tmp" -name 'DONE_*' -not -path "$tmp/inputs/*")
}

run() {  # run <args...>: sets rc, output in $tmp/out.txt (stdout) and $tmp/err.txt (stderr)
  rc=0
  timeout 60 "$trainer" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt" || rc=$?
}

expect_error() {  # expect_error <text stderr must contain> <args...>
  local want=$1; shift
  cases=$((cases + 1))
  run "$@"
  if [ "$rc" -eq 0 ] || [ "$rc" -ge 124 ]; then
    fail "exit code $rc (124 = hang, >= 128 = killed by a signal) for: $*"
  elif grep -q 'core dumped' "$tmp/err.txt"; then
    fail "core dumped for: $*"
  elif ! grep -qF -- "$want" "$tmp/err.txt"; then
    fail "stderr of [$*] does not name '$want': $(cat "$tmp/err.txt")"
  fi
  check_leftovers "$want"
}

expect_recovery() {  # expect_recovery <text stdout must contain> <args...>: exit 0 and says what it did
  local want=$1; shift
  cases=$((cases + 1))
  run "$@"
  [ "$rc" -eq 0 ] || fail "exit code $rc for the recoverable [$*]: $(cat "$tmp/err.txt")"
  grep -qF -- "$want" "$tmp/out.txt" || fail "stdout of [$*] does not say '$want'"
  check_leftovers "$want"
}

# Good checkpoints to break: steps 1 and 2 of a tiny run.
"$trainer" "${common[@]}" -x 2 -n 1 -o "$tmp/ckpt" >/dev/null
ok_model="$tmp/model.bin"
cp "$tmp/ckpt/model_00000002.bin" "$ok_model"
python3 - "$ok_model" "$tmp" <<'PY'
import array, struct, sys
src, d = sys.argv[1], sys.argv[2]
b = bytearray(open(src, 'rb').read())
bad = bytearray(b); bad[0] ^= 0xFF; open(f'{d}/bad_magic_model.bin', 'wb').write(bad)
open(f'{d}/short_model.bin', 'wb').write(b[:-40])
other = bytearray(b); other[16:20] = struct.pack('<i', 2); open(f'{d}/other_size_model.bin', 'wb').write(other)
nan = bytearray(b); nan[1024 + 400:1024 + 404] = struct.pack('<f', float('nan')); open(f'{d}/nan_model.bin', 'wb').write(nan)
PY
copy_ckpt() {  # copy_ckpt <dir> <steps...>: a fresh dir with those checkpoints of $tmp/ckpt
  local dir=$1 s; shift
  rm -rf "$dir"; mkdir -p "$dir"
  for s in "$@"; do cp "$tmp/ckpt/"*"_0000000$s"* "$dir/"; done
}
flip_byte() { printf '\x5a' | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }
touch "$tmp/a_file"
mkdir -p "$tmp/empty_out"
nomatch="$tmp/nothing_*.bin"

# --- flags ---------------------------------------------------------------------------------------
expect_error "-i: missing value" -i
expect_error "unknown flag '--batch'" "${common[@]}" --batch 3
expect_error "-b: 'abc' is not an integer" "${common[@]}" -b abc
expect_error "-b: 0 is out of range" "${common[@]}" -b 0
expect_error "-l: -1 is out of range" "${common[@]}" -l -1
expect_error "-nk: -1 is out of range" "${common[@]}" -nk -1
expect_error "-sl: -2 is out of range" "${common[@]}" -sl -2
expect_error "--step-timeout: 'soon' is not a finite number" "${common[@]}" --step-timeout soon
expect_error "--step-timeout: -5 is out of range" "${common[@]}" --step-timeout -5
expect_error "-e: 'd13' is neither a model file (no such file) nor a model descriptor (d6, d12" "${common[@]}" -e d13
expect_error "-n: checkpoints need an output dir" "${common[@]}" -n 5
expect_error "-t: sequence length 64 exceeds the model's max_seq_len 32" "${common[@]}" -t 64
expect_error "-d: total batch of 100 tokens is not divisible" "${common[@]}" -d 100
expect_error "--device-memory: '80' has no unit" "${common[@]}" --device-memory 80
expect_error "--fp8: 'yes'" "${common[@]}" --fp8 yes
# llm.c's flags that ask for what neither trainer does say what to use instead.
expect_error "-w: 0 (no fp32 master weights) is not offered" "${common[@]}" -w 0
expect_error "-lg: 5: this trainer prints no NVML GPU line; run \`nvidia-smi" "${common[@]}" -lg 5
expect_error "-ge: 1 (GELU fused into the forward GEMM only) has no counterpart here: -ge 2" "${common[@]}" -ge 1
if [ "$trainer" = ./train_gpt2 ]; then
  # GPU memory is train_gpt2cu's business: the CPU trainer points there instead of ignoring the flags.
  expect_error "--dry-run: this trainer has no GPU memory to plan; ./train_gpt2cu --dry-run N" "${common[@]}" --dry-run 8
  expect_error "--device-memory: this trainer runs on the CPU" "${common[@]}" --device-memory 40GiB
  expect_error "--fp8: FP8 matmuls run on a GPU's FP8 tensor cores" "${common[@]}" --fp8 1
  expect_error "-ge: GELU fusion chooses cuBLASLt epilogues of train_gpt2cu's GEMMs" "${common[@]}" -ge 0
  expect_error "-f: TF32 is a GPU tensor-core format (train_gpt2cu)" "${common[@]}" -f 0
else
  # llm.c's -ge and -f in this (FP32) build: -f 1 has no TF32 path to map to, -ge 2 needs -r 0
  # or auto (the default), and -ge against an LLMC_GELU of another value is an error, not a silent pick.
  expect_error "-f: 1 (TF32 for fp32 matmuls) is not offered: this FP32 build" "${common[@]}" -f 1 -x 1
  expect_error "-ge: 2 (LLMC_GELU=epilogues) stores the GELU output" "${common[@]}" -ge 2 -r 1 -x 1
  LLMC_GELU=kernels expect_error "-ge: 2 means LLMC_GELU=epilogues, but the environment sets LLMC_GELU=kernels" \
    "${common[@]}" -ge 2 -r 0 -x 1
  # ... and what they map to, as the cuda: line reports it.
  expect_recovery "LLMC_GELU=epilogues " "${common[@]}" -ge 2 -x 1  # the default -r auto takes 0
  expect_recovery "LLMC_GELU=kernels " "${common[@]}" -ge 0 -x 1
  # A GPU too small for the run: stopped before allocating, naming what it needs and what would fit.
  expect_error "error: not enough GPU memory for B=2 T=16 -r 1" "${common[@]}" -r 1 --device-memory 1MiB -x 1
  grep -q "needs 50.6 MiB per rank" "$tmp/err.txt" || fail "the GPU memory error does not say what the run needs"
  grep -q -- "-r 2:" "$tmp/err.txt" || fail "the GPU memory error does not say whether -r 2 fits"
  # A GPU another process shares (LLMC_EMU_MEMORY_TAKEN: it holds all but 340 MiB of the 80 GiB): the
  # plan counts only the free memory, stops before allocating with the largest -b that fits, and
  # that -b runs.
  LLMC_EMU_MEMORY_TAKEN=81580 expect_error "error: not enough GPU memory for B=40 T=16 -r 1" "${common[@]}" -b 40 -r 1 -x 1
  grep -q "available (the GPU's free 340.0 MiB less 256.0 MiB for library kernels)" "$tmp/err.txt" ||
    fail "the GPU memory error does not count only the free memory: $(head -n 1 "$tmp/err.txt")"
  fits=$(sed -n 's/^  largest -b that fits: \([0-9]*\) .*/\1/p' "$tmp/err.txt")
  [ -n "$fits" ] && [ "$fits" -gt 1 ] || fail "the GPU memory error names no -b that fits: $(cat "$tmp/err.txt")"
  LLMC_EMU_MEMORY_TAKEN=81580 expect_recovery "recompute 1 |" "${common[@]}" -b "${fits:-1}" -r 1 -x 1
  # FP8 matmuls need bf16 activations (this is the FP32 build; the bf16 build's FP8 cases are in
  # tests/emu/check_emu_trainer.sh).
  expect_error "FP8 matmuls (--fp8 1) need the bf16 build" "${common[@]}" --fp8 1 -x 1
fi
expect_error "-b: B*T = 2147483647*2" "${common[@]}" -b 2147483647 -t 2
# A batch the shards cannot hold: names the shard and the tokens one step needs.
expect_error "it needs at least 1601 tokens" "${common[@]}" -b 100
# --- shards ----------------------------------------------------------------------------------
expect_error "$tmp/nodir/x_*.bin" -i "$tmp/nodir/x_*.bin" -e "$model" -t 16
expect_error "$nomatch" "${common[@]}" -v 1 -j "$nomatch"
expect_error "$tmp/tiny_0.bin" "${common[@]}" -i "$tmp/tiny_0.bin"
expect_error "$tmp/truncated_0.bin" "${common[@]}" -i "$tmp/truncated_0.bin"
expect_error "$tmp/extra_0.bin" "${common[@]}" -i "$tmp/extra_0.bin"
expect_error "$tmp/magic_0.bin" "${common[@]}" -i "$tmp/magic_0.bin"
expect_error "$tmp/token_0.bin" "${common[@]}" -i "$tmp/token_0.bin" -x 6
grep -q 50257 "$tmp/err.txt" || fail "the bad token id 50257 is not named: $(cat "$tmp/err.txt")"
expect_error "$tmp/badval_0.bin" "${common[@]}" -x 1 -v 1 -j "$tmp/badval_0.bin"
# --- model files -------------------------------------------------------------------------------
expect_error "$tmp/bad_magic_model.bin" "${common[@]}" -e "$tmp/bad_magic_model.bin"
expect_error "$tmp/short_model.bin" "${common[@]}" -e "$tmp/short_model.bin"
expect_error "$tmp/other_size_model.bin" "${common[@]}" -e "$tmp/other_size_model.bin"
expect_error "$tmp/no_such_model.bin" "${common[@]}" -e "$tmp/no_such_model.bin"
# A model whose loss is NaN: stops at step 0 naming it, writes no checkpoint.
expect_error "step 0: train loss nan" "${common[@]}" -e "$tmp/nan_model.bin" -x 3 -n 1 -o "$tmp/nan_out"
ls "$tmp/nan_out" | grep -q DONE_ && fail "a checkpoint was written for a non-finite state"
# --- output dir --------------------------------------------------------------------------------
expect_error "-o: cannot create the output dir '$tmp/a_file/out'" "${common[@]}" -o "$tmp/a_file/out"
if [ "$(id -u)" = 0 ]; then readonly_dir=/proc; else readonly_dir="$tmp/readonly"; mkdir -p "$readonly_dir"; chmod 555 "$readonly_dir"; fi
expect_error "$readonly_dir/main.log: cannot write" "${common[@]}" -x 1 -o "$readonly_dir"
# A full disk, as `ulimit -f` (1 MiB; the model file is 3.2 MB): EFBIG reported, not SIGXFSZ.
cases=$((cases + 1))
rc=0
(ulimit -f 1024; exec timeout 60 "$trainer" "${common[@]}" -x 2 -n 1 -o "$tmp/full" >"$tmp/out.txt" 2>"$tmp/err.txt") || rc=$?
[ "$rc" = 1 ] || fail "ulimit -f: exit code $rc, expected 1"
grep -q "model_00000001.bin: write failed: File too large" "$tmp/err.txt" || fail "ulimit -f: $(cat "$tmp/err.txt")"
ls "$tmp/full" | grep -q -e DONE_ -e '\.tmp$' && fail "ulimit -f: a DONE marker or .tmp was left in $tmp/full"
check_leftovers "ulimit -f"
# --- checkpoints and resume --------------------------------------------------------------------
# -y 1 with nothing to resume starts from step 0, as llm.c does (a dir that is not there yet, and
# one without DONE markers); markers of which none verifies stop the run (below).
expect_recovery "resume: no checkpoint in $tmp/new_out (no DONE_<step> marker): starting from step 0" \
  "${common[@]}" -x 1 -y 1 -o "$tmp/new_out"
mkdir -p "$tmp/empty_out"
expect_recovery "resume: no checkpoint in $tmp/empty_out" "${common[@]}" -x 1 -y 1 -o "$tmp/empty_out"
expect_error "-y: resuming needs the output dir" "${common[@]}" -y 1
expect_error "-b: is 4 but checkpoint step 2" "${common[@]}" -b 4 -x 3 -y 1 -o "$tmp/ckpt"
expect_error "-x: checkpoint step 2" "${common[@]}" -x 1 -y 1 -o "$tmp/ckpt"
copy_ckpt "$tmp/shape" 1 2
expect_error "-y: none of the 2 checkpoint(s)" "${common[@]}" -e L1H2C32T32 -x 3 -y 1 -o "$tmp/shape"
grep -q "differs from -e L1H2C32T32" "$tmp/out.txt" || fail "the other model shape is not named"
copy_ckpt "$tmp/corrupt_state" 2
flip_byte "$tmp/corrupt_state/state_00000002_00000.bin" 2000
expect_error "-y: none of the 1 checkpoint(s)" "${common[@]}" -x 3 -y 1 -o "$tmp/corrupt_state"
grep -q "state_00000002_00000.bin: checksum mismatch" "$tmp/out.txt" || fail "corrupt state: $(cat "$tmp/out.txt")"
copy_ckpt "$tmp/inputs/no_model" 2
rm "$tmp/inputs/no_model/model_00000002.bin"
expect_error "-y: none of the 1 checkpoint(s)" "${common[@]}" -x 3 -y 1 -o "$tmp/inputs/no_model"
grep -q "model_00000002.bin: cannot open" "$tmp/out.txt" || fail "missing model file: $(cat "$tmp/out.txt")"
# Recoveries: a corrupt newest checkpoint is skipped (named, with the reason) for the one before.
copy_ckpt "$tmp/corrupt_model" 1 2
flip_byte "$tmp/corrupt_model/model_00000002.bin" 5000
expect_recovery "resume: continuing from checkpoint step 1" "${common[@]}" -x 3 -y 1 -o "$tmp/corrupt_model"
grep -q "skipping checkpoint step 2: .*model_00000002.bin: checksum" "$tmp/out.txt" || fail "corrupt model not named"
# -z 1 with one rank: documented to run exactly as -z 0, and says so.
"$trainer" "${common[@]}" -x 3 -o "$tmp/z0" >/dev/null
expect_recovery "-z 1 with one rank has no optimizer state to shard" "${common[@]}" -x 3 -z 1 -o "$tmp/z1"
cmp -s "$tmp/z0/main.log" "$tmp/z1/main.log" || fail "-z 1 with one rank trained differently from -z 0"
# Divergence after a good checkpoint: exit 1 naming the step, no checkpoint of the diverged
# state (neither its NaN loss nor non-finite weights), the good one resumes.
copy_ckpt "$tmp/diverge" 1 2
expect_error "step 3: train loss" "${common[@]}" -x 6 -n 2 -l 1e30 -y 1 -o "$tmp/diverge"
ls "$tmp/diverge" | grep -q -e DONE_00000003 -e DONE_00000004 && fail "a checkpoint of the diverged state was written"
expect_recovery "continuing from checkpoint step 2" "${common[@]}" -x 4 -y 1 -o "$tmp/diverge"
# --- HellaSwag ---------------------------------------------------------------------------------
expect_error "--hellaswag-file: data/hellaswag/no_such.bin: no such file" "${common[@]}" -h 1 --hellaswag-file data/hellaswag/no_such.bin
expect_error "--hellaswag-file: $tmp/garbage.bin: bad magic" "${common[@]}" -h 1 --hellaswag-file "$tmp/garbage.bin"
expect_error "example 0 needs 20 positions, more than -t 16" "${common[@]}" -h 1 --hellaswag-file "$tmp/long_eval.bin"

# The checkpoint model loads as a model file (-e).
"$trainer" "${common[@]}" -e "$ok_model" -x 1 >/dev/null || fail "a checkpoint model file does not load"
exit_if_failed
echo "$cases bad inputs ($trainer): clean errors or documented recoveries, no crash, hang or trusted partial file"
