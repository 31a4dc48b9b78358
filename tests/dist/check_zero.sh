#!/usr/bin/env bash
# Multi-rank training with CPU ranks (docs/multi-gpu.md): ZeRO stages 0 and 1 of the shared loop
# over MPI, on a tiny model (2 layers, 3 heads of 32, vocabulary 1000) written with numpy by
# tests/lib/tiny_model_and_shards.py.
#  1. mpirun -np 1/2/4, -z 0 and -z 1, same -d (accumulation 8/4/2): every step's train loss, the
#     val losses and grad norms agree to 1e-5 relative (docs/contract.md) with the one-process run;
#     -z 1 prints its optimizer state per rank falling as 1/ranks;
#  2. -np 2 against dev/pytorch/train_reference.py --world 2 (float64 replay of the contract's
#     data order for 2 ranks), with check_train_reference.sh's tolerances;
#  3. a 2-rank -z 1 checkpoint at step 3 resumed by 2 ranks: main.log byte-identical to the
#     uninterrupted run; resumed by 4 ranks (-z 1), by 1 rank (-z 0) and by 2 ranks with -z 0
#     (moments re-sharded): losses within 1e-5; a 1-rank checkpoint resumed by 2 ranks likewise;
#     a shuffled (-sh 1) checkpoint resumed by another rank count is refused with the reason;
#  4. SIGTERM to one rank only: every rank stops at the same step with one checkpoint, exit 0.
# Every multi-rank run sends its gradients in buckets during the backward pass (--overlap 1, the
# default); 1b checks that this is bit-identical to sending them after it on 2 ranks.
# The shards hold a multiple of 8 windows, so the data order of 1, 2 and 4 ranks is the same.
set -euo pipefail
cd "$(dirname "$0")/../.."
fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source-path=SCRIPTDIR source=../lib/mpirun.sh
source "$(dirname "$0")/../lib/mpirun.sh"
make -s train_gpt2
work=build/tmp/check_zero
rm -rf "$work"; mkdir -p "$work"
export OMP_NUM_THREADS=1
MPIRUN=(timeout 120 "${MPIRUN[@]}")

# B*T = 2*16 = 32 tokens per window: 16 and 8 windows (+ a few spare tokens), multiples of 8.
/usr/bin/python3 tests/lib/tiny_model_and_shards.py "$work" --seed 11 --first-token 17 \
  val_000000.bin:200 train_000001.bin:$((16 * 32 + 1 + 5)) train_000002.bin:$((8 * 32 + 1 + 3))

flags=(-e "$work/model.bin" -i "$work/train_*.bin" -j "$work/val_*.bin" -b 2 -t 16 -d 256 -l 3e-3 -u 2 -q 0.1 -c 0.1
       -m 3 -v 3 -s 0 -sh 0)
run() {  # run NP OUTDIR ARGS...: NP=0 is a plain process without mpirun
  local np=$1 out=$2; shift 2
  if [ "$np" = 0 ]; then ./train_gpt2 "${flags[@]}" -o "$out" "$@" >"$out.stdout" 2>&1 || { cat "$out.stdout"; fail "$out"; }
  else "${MPIRUN[@]}" -np "$np" ./train_gpt2 "${flags[@]}" -o "$out" "$@" >"$out.stdout" 2>&1 || { cat "$out.stdout"; fail "$out"; }
  fi
}
compare() {  # compare A.log B.log TOLERANCE LABEL: same events, every value within TOLERANCE relative
  /usr/bin/python3 - "$@" <<'PY'
import sys
sys.path.insert(0, "tests/lib")
from main_log import parse, summary, worst_rel_errors
a, b, tol, label = parse(sys.argv[1]), parse(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
if set(a) != set(b): sys.exit(f"{label}: events differ: {sorted(set(a) ^ set(b))}")
tolerance = {key: tol if key in ("trl", "tel") else max(tol, 1e-4) for _, key in b}
print(f"{label}: " + summary(worst_rel_errors(a, b, tolerance, label)))
PY
}

# --- 1. np = 1, 2, 4 with -z 0 and -z 1 ----------------------------------------------------------
run 0 "$work/np1_z0" -x 6
summary=()
for z in 0 1; do
  for np in 1 2 4; do
    [ "$np$z" = 10 ] && continue
    run "$np" "$work/np${np}_z$z" -x 6 -z "$z"
    summary+=("$(compare "$work/np${np}_z$z/main.log" "$work/np1_z0/main.log" 1e-5 "np=$np -z $z vs np=1")")
    echo "${summary[-1]}"
  done
done
grep -q "ranks=4 accumulation=2 -> 256 tokens" "$work/np4_z1.stdout" || fail "np=4: no accumulation 2 in the summary"
[ "$(grep -c '^step [0-9]*/6 ' "$work/np4_z1.stdout")" -eq 6 ] || fail "np=4: step lines not printed exactly once (rank 0 only)"
/usr/bin/python3 - "$work" <<'PY' || exit 1
import re, sys
work = sys.argv[1]
def state(np):
    text = open(f"{work}/np{np}_z1.stdout").read()
    m = re.search(r"optimizer state: ([\d.]+) MiB per rank \(ZeRO-1 over (\d+) ranks?; ([\d.]+) MiB unsharded\)", text)
    if not m: sys.exit(f"np={np}: no optimizer state line")
    return float(m[1]), int(m[2]), float(m[3])
whole = state(1)[2]
for np in (1, 2, 4):
    per, ranks, unsharded = state(np)
    if ranks != np or abs(unsharded - whole) > 0.1 or abs(per - whole / np) > 0.1:
        sys.exit(f"np={np}: optimizer state {per} MiB per rank of {unsharded}, expected {whole / np:.1f}")
print(f"optimizer state per rank: {state(1)[0]} / {state(2)[0]} / {state(4)[0]} MiB for 1 / 2 / 4 ranks")
PY

# --- 1b. gradient sums overlapped with the backward pass (the default) or after it ------------------
# Two ranks sum each gradient element with one addition either way, so the runs are bit-identical:
# the final model and every rank's optimizer state, byte for byte. -d 64 is one micro-batch per
# rank, so the one backward pass of each step is the overlapped one.
for z in 0 1; do
  for overlap in 0 1; do run 2 "$work/overlap${overlap}_z$z" -x 4 -d 64 -z "$z" -n 4 --overlap "$overlap"; done
  grep -q "gradient sums: 3 buckets, sent while the backward pass runs (--overlap 1)" "$work/overlap1_z$z.stdout" ||
    fail "-z $z: --overlap 1 did not report its buckets"
  grep -q "gradient sums: after the backward pass (--overlap 0)" "$work/overlap0_z$z.stdout" ||
    fail "-z $z: --overlap 0 did not say so"
  for f in main.log model_00000004.bin state_00000004_00000.bin state_00000004_00001.bin; do
    cmp -s "$work/overlap0_z$z/$f" "$work/overlap1_z$z/$f" || fail "-z $z: $f differs between --overlap 0 and 1"
  done
done
echo "--overlap 1 vs 0 on 2 ranks, -z 0 and -z 1: model, optimizer states and main.log byte-identical"

# --- 2. np = 2 against the float64 reference with 2 ranks' data order -----------------------------
(cd dev/pytorch && /usr/bin/python3 train_reference.py --model "../../$work/model.bin" --train "../../$work/train_*.bin" \
  --val "../../$work/val_*.bin" -b 2 -t 16 -d 256 -x 6 -l 3e-3 -u 2 -q 0.1 -c 0.1 -m 3 --world 2) > "$work/reference.log"
/usr/bin/python3 - "$work/np2_z1/main.log" "$work/reference.log" <<'PY'
import sys
sys.path.insert(0, "tests/lib")
from main_log import REFERENCE_TOLERANCE, parse, summary, worst_rel_errors
label = "np=2 -z 1 vs float64 reference --world 2"
print(f"{label}: " + summary(worst_rel_errors(parse(sys.argv[1]), parse(sys.argv[2]), REFERENCE_TOLERANCE, label)))
PY

# --- 3. checkpoints and resume -------------------------------------------------------------------
run 2 "$work/ckpt2" -x 6 -z 1 -n 3
cmp -s "$work/ckpt2/main.log" "$work/np2_z1/main.log" || fail "checkpointing changed the 2-rank run"
for r in 0 1; do [ -f "$work/ckpt2/state_00000003_0000$r.bin" ] || fail "no state file of rank $r"; done
[ -f "$work/ckpt2/DONE_00000003" ] || fail "no DONE marker"
resume_from() {  # resume_from SRC DST: DST gets SRC's step-3 checkpoint and main.log
  mkdir -p "$2"
  cp "$1"/model_00000003.bin "$1"/state_00000003_*.bin "$1"/DONE_00000003 "$1"/main.log "$2"/
}
resume_from "$work/ckpt2" "$work/res2"
run 2 "$work/res2" -x 6 -z 1 -y 1
grep -q "resume: continuing from checkpoint step 3" "$work/res2.stdout" || fail "2 ranks did not resume"
cmp "$work/res2/main.log" "$work/ckpt2/main.log" || fail "2-rank resume: main.log differs from the uninterrupted run"
echo "resume 2 -> 2 ranks (-z 1): main.log identical to the uninterrupted run"
for spec in "4 1" "0 0" "2 0"; do
  set -- $spec
  out="$work/res_np$1_z$2"
  resume_from "$work/ckpt2" "$out"
  run "$1" "$out" -x 6 -z "$2" -y 1
  grep -q "resume: optimizer state of 2 rank(s) (sharded)" "$out.stdout" || fail "$out: no re-sharding message"
  summary+=("$(compare "$out/main.log" "$work/ckpt2/main.log" 1e-5 "resume 2 ranks -z 1 -> ${1/#0/1} -z $2")")
  echo "${summary[-1]}"
done
run 0 "$work/ckpt1" -x 6 -n 3
resume_from "$work/ckpt1" "$work/res_1to2"
run 2 "$work/res_1to2" -x 6 -z 1 -y 1
summary+=("$(compare "$work/res_1to2/main.log" "$work/ckpt1/main.log" 1e-5 "resume 1 rank -z 0 -> 2 -z 1")")
echo "${summary[-1]}"
run 2 "$work/shuffled" -x 6 -z 1 -n 3 -sh 1
resume_from "$work/shuffled" "$work/shuffled_1"
if ./train_gpt2 "${flags[@]}" -sh 1 -x 6 -y 1 -o "$work/shuffled_1" >"$work/shuffled_1.stdout" 2>&1; then
  fail "a shuffled 2-rank checkpoint resumed on 1 rank"
fi
grep -q "error: -y: checkpoint step 3 in .* written by 2 ranks with shuffled data (-sh 1).*resume it with 2 ranks" \
  "$work/shuffled_1.stdout" || { cat "$work/shuffled_1.stdout"; fail "no clear error for a shuffled re-shard"; }
echo "resume of a -sh 1 checkpoint with another rank count: refused, naming the reason"

# --- 4. a signal to one rank stops all of them at the same step -----------------------------------
"${MPIRUN[@]}" -np 2 ./train_gpt2 "${flags[@]}" -x 400 -z 1 -v 0 -o "$work/signal" >"$work/signal.stdout" 2>&1 &
launcher=$!
for _ in $(seq 100); do grep -q "^step *2/" "$work/signal.stdout" 2>/dev/null && break; sleep 0.1; done
rank1=$(pgrep -f "^./train_gpt2 .*-o $work/signal" | tail -n 1)
[ -n "$rank1" ] || fail "no rank process found"
kill -TERM "$rank1"
wait "$launcher" || fail "the signalled 2-rank run did not exit 0"
grep -q "stopped by SIGTERM before step" "$work/signal.stdout" || { cat "$work/signal.stdout"; fail "no stop message"; }
stop=$(sed -n 's/.*stopped by SIGTERM before step \([0-9]*\).*/\1/p' "$work/signal.stdout")
for r in 0 1; do [ -f "$work/signal/state_$(printf %08d "$stop")_0000$r.bin" ] || fail "no state file of rank $r at $stop"; done
[ -f "$work/signal/DONE_$(printf %08d "$stop")" ] || fail "no DONE marker at step $stop"
echo "SIGTERM to one of 2 ranks: both stopped before step $stop with a complete checkpoint"

worst=$(printf '%s\n' "${summary[@]}" | grep -o 'trl [0-9.e+-]*' | awk '{print $2}' | sort -g | tail -n 1)
echo "ZeRO 0/1 on 1/2/4 ranks and re-sharded resumes: worst train-loss rel. diff $worst (bar 1e-5); 2-rank resume identical"
