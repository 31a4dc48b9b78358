#!/usr/bin/env bash
# train_gpt2cu --dry-run and --device-memory, on the binary given as $1 (tests/gpu/check_cuda_build.sh
# runs it on the build it just made; it needs no GPU). A few seconds: every run only plans.
# Asserts the exit codes, the messages of malformed values, a plan that fits, one that does not
# (with the advice), the recompute -r auto takes on cards of five sizes, GPT-2 XL on eight 40 GiB
# cards with ZeRO-1, and that a dry run needs no data and only the model file's header (missing
# shards; a model file of a header and zeros whose size is checked).
# Prints "FAIL: ..." per problem and ends with one summary line; exit 1 on any failure.
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
cases=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

run() {  # run <args...>: sets rc, stdout in $tmp/out, stderr in $tmp/err
  cases=$((cases + 1))
  rc=0
  timeout 60 "$bin" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
}
expect_flag_error() {  # expect_flag_error <flag> <value> <text the message must contain>
  run "$1" "$2"
  [ "$rc" -eq 1 ] || fail "$1 $2: exit $rc, expected 1"
  grep -qF -- "error: $1: " "$tmp/err" && grep -qF -- "$3" "$tmp/err" ||
    fail "$1 $2: stderr does not say 'error: $1: ... $3': $(cat "$tmp/err")"
}
expect_out() {  # expect_out <text stdout must contain> (after a run that must have exited 0)
  [ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$tmp/err")"
  grep -qF -- "$1" "$tmp/out" || fail "stdout does not say '$1': $(cat "$tmp/out")"
}

expect_flag_error --device-memory 80 "'80' has no unit"
expect_flag_error --device-memory 80XB "unknown unit 'XB'"
expect_flag_error --device-memory -1GiB "is not a memory size"
expect_flag_error --device-memory 0GiB "must be more than 0 bytes"
expect_flag_error --device-memory GiB "is not a memory size"
expect_flag_error --device-memory 1e400GiB "unknown unit 'e400GiB'"
expect_flag_error --dry-run -1 "out of range"
expect_flag_error --dry-run x "is not an integer"

# Shards that do not exist: a dry run never opens them.
nodata=(-i "$tmp/none_*.bin" -j "$tmp/none_*.bin")

# GPT-2 small at B=4 fits an 80 GiB card: 80 GiB less the 1 GiB reserve of one rank = 79.00 GiB.
# The default -r auto takes no recompute there.
run --dry-run 1 -e d12 -b 4 -t 1024 --device-memory 80GiB "${nodata[@]}"
expect_out "memory plan per rank: L=12 H=12 C=768"
expect_out "-r auto: recompute 0"
expect_out "124475904 parameters; B=4 T=1024 -r 0 -z 0 over 1 rank;"
expect_out "79.00 GiB available (--device-memory 80.00 GiB less 1024.0 MiB"
grep -q '^fits: needs ' "$tmp/out" || fail "d12 B=4 on 80 GiB: no 'fits:' line: $(cat "$tmp/out")"

# d12 at B=64 T=1024, the logits in chunks of 16,384 rows (1572 MiB): -r 0 plans 22.53 GiB, -r 1 18.41
# (the 12 layers' GELU outputs, 12 x 65536 x 3072 bf16 = 4.5 GiB, recomputed into one buffer), -r 2
# 16.34 (the two LayerNorm outputs, 2 x 12 x 65536 x 768 bf16 = 2.25 GiB, less). At -r 1 on a 16 GiB
# card it does not fit: the advice names the biggest buffer (fc pre-GELU, 4608 MiB), the largest -b
# that fits, what -r 2 saves, and that -z 1 cannot help one rank.
run --dry-run 1 -e d12 -b 64 -t 1024 -r 1 --device-memory 16GiB "${nodata[@]}"
expect_out "does not fit: needs 18.41 GiB per rank, 15.00 GiB available"
expect_out "biggest buffers: fc pre-GELU 4608.0 MiB"
expect_out "largest -b that fits: 49 (asked -b 64;"
expect_out "-r 2: saves 2112.0 MiB, needs 16.34 GiB: does not fit either; with it the largest -b that fits is 57"
expect_out "-z 1: no help with one rank"
! grep -q "LLMC_CLASSIFIER" "$tmp/out" ||
  fail "the plan names a classifier switch that no longer exists: $(grep LLMC_CLASSIFIER "$tmp/out")"

# -r auto: the least recompute whose plan fits. The budget is the card less its 1 GiB reserve.
for case in "80GiB 0 fits 22.53" "24GiB 0 fits 22.53" "20GiB 1 fits 18.41" "18GiB 2 fits 16.34" \
  "16GiB 2 does_not_fit 16.34"; do
  read -r card want verdict needs <<<"$case"
  run --dry-run 1 -e d12 -b 64 -t 1024 -r auto --device-memory "$card" "${nodata[@]}"
  expect_out "-r auto: recompute $want"
  expect_out "B=64 T=1024 -r $want -z 0 over 1 rank; bf16, cudnn attention, logits in chunks of 16384 rows"
  grep -q "^${verdict//_/ }: needs $needs GiB per rank" "$tmp/out" ||
    fail "-r auto on $card: no '${verdict//_/ }: needs $needs GiB' line: $(cat "$tmp/out")"
done
# With LLMC_GELU=epilogues no recompute is allowed, so -r auto is 0 even where it does not fit (where
# the defaults take 1, above).
cases=$((cases + 1))
rc=0
LLMC_GELU=epilogues timeout 60 "$bin" --dry-run 1 -e d12 -b 64 -t 1024 -r auto --device-memory 20GiB "${nodata[@]}" \
  >"$tmp/out" 2>"$tmp/err" || rc=$?
expect_out "-r auto: recompute 0"
expect_out "does not fit: needs 22.53 GiB per rank"

# The question of the README: GPT-2 XL (d48: 1,557,686,400 parameters) at B=16 T=1024 on eight
# 40 GiB cards with ZeRO-1: 40 GiB less 1 GiB (context) and 512 MiB (NCCL) leaves 38.50 GiB. -r 1
# needs 70.4 MiB more than that (the README's earlier answer), so the default -r auto takes 2. Only
# the form of the verdict is checked here, not which one (the README prints "fits", 4.5 GiB to
# spare); a "does not fit" must come with its advice.
run --dry-run 8 -e d48 -b 16 -t 1024 -z 1 --device-memory 40GiB "${nodata[@]}"
expect_out "-r auto: recompute 2"
expect_out "1557686400 parameters; B=16 T=1024 -r 2 -z 1 over 8 ranks;"
expect_out "38.50 GiB available"
grep -qE '^(fits|does not fit): needs [0-9.]+ GiB per rank' "$tmp/out" || fail "d48: no verdict: $(cat "$tmp/out")"
if grep -q '^does not fit' "$tmp/out"; then
  expect_out "largest -b that fits: "
  expect_out "-r 2: saves "
fi
cp "$tmp/out" "$tmp/d48.txt"
# Several ranks send the gradient buckets during the backward pass through a staging buffer of the
# largest bucket (d48: 12 * 1600^2 + 15 * 1600 = 30,744,000 bf16 elements); --overlap 0 has none.
expect_out "gradient bucket staging            30744000   2"
run --dry-run 8 -e d48 -b 16 -t 1024 -z 1 --device-memory 40GiB --overlap 0 "${nodata[@]}"
! grep -q "gradient bucket" "$tmp/out" || fail "--overlap 0 still plans the gradient buckets: $(cat "$tmp/out")"

# scripts/scaling.py's memory column is this plan's total: d12 B=64 over 8 ranks, -z 0 with the
# gradient buckets, at the defaults: -r auto with no memory to fit is -r 0. One rank's buffers at -r 0
# (above: 22.53 GiB, 24,193,118,228 bytes) and, with 8 ranks, the gradient buckets' staging and spans
# (14,185,728 bytes, tests/unit/test_memory_fit.cpp): 24,207,303,956 bytes = 22.5 GiB.
cases=$((cases + 1))
row=$(python3 "$(dirname "$0")/../../scripts/scaling.py" --trainer "$bin" --models d12 --gpus 8 | grep -F "| d12 | 8 | 0 |")
[[ "$row" == *"| 22.5 GiB |" ]] || fail "scaling.py --trainer: d12 on 8 GPUs, -z 0: '$row' does not end with 22.5 GiB"

# --fp8 1 plans three more buffers (llmc/cuda/fp8_layout.h), d12 at B=64 T=1024: the weights' FP8
# copies, 2 x 12 x 12 x 768^2 = 169,869,312 bytes; one operand of B*T*4C = 65536 x 3072 =
# 201,326,592 bytes; the scaling state, 144 tensors x 1048 floats = 150,912 floats.
run --dry-run 1 -e d12 -b 64 -t 1024 --fp8 1 "${nodata[@]}"
expect_out "FP8 weight copies                 169869312   1"
expect_out "FP8 GEMM operand                  201326592   1"
expect_out "FP8 scales and amax history          150912   4"
# LLMC_FP8_LM_HEAD=on adds the LM head: wte's two copies, 2 x 50304 x 768 = 77,266,944 bytes more
# (247,136,256); the operand buffer holds a chunk of d(logits), 16384 x 50304 = 824,180,736 bytes,
# more than the layers' 201,326,592; lnf's copy, B*T*C = 65536 x 768 = 50,331,648 bytes; 147 tensors
# x 1048 = 154,056 floats.
LLMC_FP8_LM_HEAD=on run --dry-run 1 -e d12 -b 64 -t 1024 --fp8 1 "${nodata[@]}"
expect_out "FP8 weight copies                 247136256   1"
expect_out "FP8 GEMM operand                  824180736   1"
expect_out "FP8 lnf copy                       50331648   1"
expect_out "FP8 scales and amax history          154056   4"
# LLMC_FP8_GELU=epilogue keeps the bf16 GELU one layer at a time at -r 0: B*T*4C = 65536 x 3072 x 2
# = 402,653,184 bytes (384 MiB) where the 12 layers' take 4,831,838,208.
run --dry-run 1 -e d12 -b 64 -t 1024 --fp8 1 -r 0 "${nodata[@]}"
expect_out "fc GELU                          2415919104   2       4608.0  L*B*T*4C"
LLMC_FP8_GELU=epilogue run --dry-run 1 -e d12 -b 64 -t 1024 --fp8 1 -r 0 "${nodata[@]}"
expect_out "fc GELU                           201326592   2        384.0  B*T*4C (LLMC_FP8_GELU)"
run --dry-run 1 -e d12 -b 64 -t 1024 "${nodata[@]}"
! grep -q "FP8" "$tmp/out" || fail "the plan without --fp8 1 lists FP8 buffers: $(grep FP8 "$tmp/out")"

# Without --device-memory and without a GPU there is no limit to check against.
if ! command -v nvidia-smi >/dev/null 2>&1; then
  run --dry-run 2 -e d12 "${nodata[@]}"
  expect_out "no limit given"
fi

# A model file is needed for its header and its size: header + zeros (a sparse file), L1 H2 C64
# T32; one 4 bytes short is refused. (Parameters of zeros would load too: nothing here shows they
# are not read.)
python3 - "$tmp/model.bin" <<'PY'
import struct, sys
C, L, T, V, Vp = 64, 1, 32, 50257, 50304
n = Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<8i", 20240326, 3, T, V, L, 2, C, Vp) + bytes(4 * 248))
    f.truncate(1024 + 4 * n)
PY
run --dry-run 1 -e "$tmp/model.bin" -b 2 -t 32 --device-memory 1GiB "${nodata[@]}"
expect_out "memory plan per rank: L=1 H=2 C=64 maxT=32"
truncate -s -4 "$tmp/model.bin"
run --dry-run 1 -e "$tmp/model.bin" -b 2 -t 32 "${nodata[@]}"
[ "$rc" -eq 1 ] && grep -qF "error: -e: model file" "$tmp/err" || fail "a truncated model file: exit $rc, $(cat "$tmp/err")"
run --dry-run 1 -e d12 -t 2048 "${nodata[@]}"
[ "$rc" -eq 1 ] && grep -qF "error: -t: " "$tmp/err" || fail "-t beyond max_seq_len: exit $rc, $(cat "$tmp/err")"

if [ "$failures" -ne 0 ]; then
  echo "dry run: $failures of $cases runs failed"
  exit 1
fi
echo "dry run: $cases runs of $(basename "$bin") as expected; d48 B=16 on 8x40GiB -z 1: $(grep -E '^(fits|does not fit)' "$tmp/d48.txt" | cut -c1-60)"
