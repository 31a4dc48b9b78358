#!/usr/bin/env bash
# The GPU session's reliability step (GPU_SESSION_STEPS=reliability, scripts/gpu_reliability_lib.sh)
# without a GPU. Its trainer is the CPU trainer behind a stand-in for train_gpt2cu that gives it a
# small model in place of d12 (so the signals, checkpoints, resumes, the NaN test seam and the
# watchdog are the real training loop's, over real mpirun ranks); stand-ins for nvidia-smi,
# compute-sanitizer, test_gpt2cu, hold_gpu_memory (the trainer stand-in answers as the memory plan
# does while it holds) and the dev/cuda checks. Checks:
#  (a) the whole step passes: a row for SIGTERM at a random step, kill -9 during a checkpoint write,
#      the NaN gradient, the memory held elsewhere and the stopped rank, each PASS with its figures;
#      then racecheck, synccheck and initcheck on test_gpt2cu (both precisions) and the dev/cuda
#      checks with --small, 9 rows, the tools given those programs; no process left behind;
#  (b) each fault detected: a resume that is not bit-identical, a trainer that ignores the NaN test
#      seam, one that fails in cudaMalloc beside the held memory, ranks without a watchdog, a
#      sanitizer report: each of those rows FAIL, the session fails, and the ranks left hanging
#      are ended by the step itself;
#  (c) GPU_SESSION_RELIABILITY_SECONDS caps the step: what does not fit says so.
set -u
cd "$(dirname "$0")/../.." || exit 1
make -s train_gpt2 >/dev/null || { echo "FAIL: build of train_gpt2"; exit 1; }
tmp=$PWD/build/tmp/check_gpu_reliability
rm -rf "$tmp"
mkdir -p "$tmp"
# shellcheck source=tests/lib/tally.sh
source tests/lib/tally.sh
# shellcheck source-path=SCRIPTDIR source=../lib/mpirun.sh
source tests/lib/mpirun.sh
export FAKE=$tmp/fake ROOT=$PWD OMP_NUM_THREADS=1
dist=$tmp/dist
mkdir -p "$FAKE/bin" "$dist/bin" "$dist/corpus"
echo "stand-in" >"$dist/PROJECT_COMMIT"
echo "gelu layernorm" >"$dist/dev_cuda_benches.txt"
# The model every trainer run gets (2 layers of 128 channels, a vocabulary of 1000: steps of a few
# tens of ms on one core, so a signal lands among the 60 steps of a run) and the corpus shards.
/usr/bin/python3 tests/lib/tiny_model_and_shards.py "$FAKE" --seed 3 --first-token 11 --layers 2 --heads 4 \
  --channels 128 --max-seq-len 64 corpus_val_000000.bin:2000 corpus_train_000001.bin:30000 >/dev/null
mv "$FAKE"/corpus_*.bin "$dist/corpus/"

cat >"$FAKE/bin/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
case "$*" in
  -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-stand-in)" ;;
  *memory.free*) echo "70000" ;;
  *name,memory.total*) echo "NVIDIA H100 80GB HBM3, 81559 MiB, 580.159.04, 9.0" ;;
  *name*) echo "NVIDIA H100 80GB HBM3" ;;
  *compute_cap*) echo "9.0" ;;
  *) exit 1 ;;
esac
EOF
# compute-sanitizer: logs its tool and program; reports 2 errors with the tool FAKE_REPORTS names.
cat >"$FAKE/bin/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
tool="" prog=""
while [ $# -gt 0 ]; do
  case $1 in --tool) tool=$2; shift 2 ;; --*) shift 2 ;; *) prog="${1##*/} ${*:2}"; break ;; esac
done
echo "$tool $prog" >>"$FAKE/sanitized"
[ "$tool" = "${FAKE_REPORTS:-}" ] && { echo "========= ERROR SUMMARY: 2 errors"; exit 3; }
echo "========= ERROR SUMMARY: 0 errors"
EOF
# train_gpt2cu: the CPU trainer on the model above. -b keeps its value but runs at 2 (T 32), -r is
# the GPU's. While hold_gpu_memory holds, a -b over 8 gets the memory plan's error (or, with
# FAKE_OOM=1, a cudaMalloc failure). FAKE_RESUME_DIFFERS=1: a resumed run trains at another rate;
# FAKE_NO_POISON=1: the NaN test seam is dropped; FAKE_NO_WATCHDOG=1: --step-timeout 0.
cat >"$FAKE/trainer" <<'EOF'
#!/usr/bin/env bash
args=() b=2
while [ $# -gt 0 ]; do
  case $1 in
    -e) args+=(-e "$FAKE/model.bin"); shift 2 ;;
    -t) args+=(-t 32); shift 2 ;;
    -b) b=$2; args+=(-b 2); shift 2 ;;
    -r) shift 2 ;;
    -y) args+=(-y "$2"); [ "${FAKE_RESUME_DIFFERS:-}" = 1 ] && args+=(-l 7e-4); shift 2 ;;
    --step-timeout) args+=(--step-timeout "$([ "${FAKE_NO_WATCHDOG:-}" = 1 ] && echo 0 || echo "$2")"); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
[ "${FAKE_NO_POISON:-}" = 1 ] && unset LLMC_TEST_POISON_GRADIENT
if [ -e "$FAKE/held" ] && [ "$b" -gt 8 ]; then
  if [ "${FAKE_OOM:-}" = 1 ]; then echo "error: CUDA error: out of memory (cudaMalloc)" >&2; exit 1; fi
  echo "error: not enough GPU memory for B=$b T=1024 -r 1 -z 0 over 1 rank(s) (bf16, cudnn attention); stopped before allocating: does not fit: needs 7.40 GiB per rank, 5.25 GiB available (the GPU's free 5.50 GiB less 256.0 MiB for library kernels); 2.15 GiB short" >&2
  echo "  largest -b that fits: 8 (asked -b $b; -d keeps the tokens per step by accumulating)" >&2
  exit 1
fi
exec "$ROOT/train_gpt2" "${args[@]}"
EOF
cat >"$FAKE/hold_gpu_memory" <<'EOF'
#!/usr/bin/env bash
trap 'rm -f "$FAKE/held"; exit 0' TERM
echo "$1" >"$FAKE/held"
echo "holding $1 MiB, 6144 MiB left free"
while :; do sleep 0.1; done
EOF
cat >"$FAKE/test_gpt2cu" <<'EOF'
#!/usr/bin/env bash
[ "${1:-}" = --probe ] && { echo "device: NVIDIA H100 80GB HBM3 (stand-in)"; exit 0; }
echo "test_gpt2cu: 47 checks passed, 0 failed"
EOF
cat >"$dist/bin/run_all.sh" <<'EOF'
#!/usr/bin/env bash
echo "dev/cuda: 12 checks passed, 0 failed"
EOF
cat >"$dist/bin/mpirun" <<'EOF'
#!/usr/bin/env bash
exec mpirun "$@"
EOF
for p in bf16 fp32; do
  cp "$FAKE/trainer" "$dist/bin/train_gpt2cu-$p"
  cp "$FAKE/test_gpt2cu" "$dist/bin/test_gpt2cu-$p"
done
cp "$FAKE/hold_gpu_memory" "$dist/bin/"
chmod +x "$FAKE"/bin/* "$dist"/bin/*

# session NAME [VAR=VALUE...]: the reliability step alone, its output in $tmp/NAME.out, its status.
# Its stand-in runs take a few seconds each on an idle core; the step gets 480 s (not its default
# 120), so that a busy machine (make test runs it beside two other checks) does not run it out of time.
session() {
  local name=$1
  shift
  rm -f "$FAKE/sanitized"
  env PATH="$FAKE/bin:$PATH" GPU_SESSION_STEPS=reliability GPU_SESSION_DIST="$dist" GPU_SESSION_OUT="$tmp/out-$name" \
    GPU_SESSION_BUDGET=600 GPU_SESSION_RELIABILITY_SECONDS=480 "$@" bash scripts/gpu_session.sh >"$tmp/$name.out" 2>&1
}
# row_of NAME STATUS TEXT: the summary of session NAME has a row of that status whose text holds TEXT.
row_of() { grep -E "^$2 +" "$tmp/$1.out" | grep -qF -- "$3"; }
summary() { sed -n '/^== gpu-session/,$p' "$tmp/$1.out"; }
left_behind() { pgrep -f -- "$tmp/" | grep -vx "$$" || true; }

# --- (a) the whole step passes ----------------------------------------------------------------
if session pass; then ok "the reliability step passed with a trainer that behaves"
else fail "the reliability step failed:"; summary pass; fi
expect_row() {  # expect_row SESSION STATUS TEXT
  if row_of "$1" "$2" "$3"; then ok "$1: $2 row '$3'"; else fail "$1: no $2 row with '$3'"; fi
}
expect_row pass PASS "SIGTERM at a random step, d12"
grep -Eq '^PASS +SIGTERM .*signal after step [0-9]+: exit 0, checkpoint at step [0-9]+; -y 1 ends bit-identical' "$tmp/pass.out" ||
  fail "the SIGTERM row does not give the steps: $(grep -m 1 SIGTERM "$tmp/pass.out")"
expect_row pass PASS "killed with model_00000040.bin.tmp of step 40 on disk: -y 1 took step 20's"
expect_row pass PASS "NaN gradient on the GPU, -sg 3, none"
expect_row pass PASS "63856 MiB held: -b 16 stopped before allocating (needs 7.40 GiB per rank, 5.25 GiB available), its -b 8 ran"
expect_row pass PASS "the watchdog ended the job (status 3, no process left): phase \"step\", step"
for tool in racecheck synccheck initcheck; do
  for p in fp32 bf16; do expect_row pass PASS "$tool test_gpt2cu $p (L1 C64)"; done
  expect_row pass PASS "$tool dev/cuda --check --small"
  grep -qx "$tool run_all.sh --check --small gelu layernorm" "$FAKE/sanitized" ||
    fail "$tool was not given the dev/cuda checks at their small shapes: $(grep "^$tool run_all" "$FAKE/sanitized")"
  grep -qx "$tool test_gpt2cu-bf16 --config L1H2C64T32 --B 2 --T 16 --quick" "$FAKE/sanitized" ||
    fail "$tool was not given test_gpt2cu-bf16 on the small config"
done
[ -z "$(left_behind)" ] || fail "processes left behind: $(left_behind)"
# The session runs from the repository root: its logs are there, and no checkpoint may stay in them.
leftover=$(find build/gpu-session-logs -name '*.bin' | head -n 3)
[ -z "$leftover" ] || fail "checkpoints left in the logs: $leftover"

# --- (b) each fault detected ------------------------------------------------------------------
if session faulty FAKE_RESUME_DIFFERS=1 FAKE_NO_POISON=1 FAKE_OOM=1 FAKE_NO_WATCHDOG=1 FAKE_REPORTS=synccheck; then
  fail "the reliability step passed with every fault in place"
else
  ok "the reliability step failed with every fault in place"
fi
expect_row faulty FAIL "SIGTERM at a random step, d12"
grep -Eq '^FAIL +SIGTERM .*unlike the uninterrupted run: losses max rel' "$tmp/faulty.out" ||
  fail "the SIGTERM row does not say how the resumed run differs"
expect_row faulty FAIL "kill -9 during a checkpoint write, d12"
expect_row faulty FAIL "NaN gradient on the GPU, -sg 3, none"
expect_row faulty FAIL "memory held by another process, d12"
grep -q '^FAIL .*-b 16: exit 1: error: CUDA error: out of memory' "$tmp/faulty.out" ||
  fail "the memory row does not show the cudaMalloc failure"
expect_row faulty FAIL "processes left behind when the job ended (status 124)"
expect_row faulty FAIL "synccheck test_gpt2cu fp32 (L1 C64)"
expect_row faulty FAIL "ERROR SUMMARY: 2 error"
expect_row faulty PASS "racecheck test_gpt2cu fp32 (L1 C64)"
[ -z "$(left_behind)" ] || fail "processes left behind by the ranks without a watchdog: $(left_behind)"

# --- (c) the step's time cap ------------------------------------------------------------------
start=$SECONDS
session capped GPU_SESSION_RELIABILITY_SECONDS=8
took=$((SECONDS - start))
if [ "$took" -le 60 ] && grep -qF "not run: no time left (the reliability step's 8s, the session's 600s)" "$tmp/capped.out"; then
  ok "GPU_SESSION_RELIABILITY_SECONDS=8: the step ended in ${took}s, what did not fit says so"
else
  fail "GPU_SESSION_RELIABILITY_SECONDS=8: ${took}s, rows: $(grep -c 'not run' "$tmp/capped.out") not run"
fi
[ -z "$(left_behind)" ] || fail "processes left behind by the capped step: $(left_behind)"

tally_end "gpu-session reliability step" "gpu-session reliability step with stand-ins: $checks checks passed (the faults on the CPU trainer, each also detected)"
