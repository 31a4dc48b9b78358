#!/usr/bin/env bash
# scripts/gpu_session.sh (`make gpu-session`) without a GPU, on a stand-in bundle: stand-ins for
# nvidia-smi, our trainer and test binaries, llm.c's trainer, compute-sanitizer, ncu, mpirun, the
# dev/cuda checks and the PyTorch init writer, which print known figures and log each call. Checks:
#  (a) without nvidia-smi's GPU, a clear error and nothing run; a bad GPU_SESSION_STEPS is refused;
#  (b) a whole session but its reliability step (tests/gpu/check_gpu_reliability.sh): the steps in
#      the issue's order (facts, correctness, llm.c side by side, settings, LLMC_PROFILE's table and
#      ncu's kernels, d48, kernel checks), the settings sweep's runs against the speed switches'
#      table (every other value alone, LLMC_CUDA_GRAPHS=on at -b 8 beside -b 8, every FP8 switch
#      on), the figures of every table worked out by hand below, the summary last naming the GPU
#      and the commit, the summary, the 5 main logs and one tarball of all the logs in
#      GPU_SESSION_OUT;
#  (c) a stand-in that hangs (the d48 plan) costs only its own step's limit, and the steps after it
#      still run and the table prints;
#  (d) GPU_SESSION_STEPS runs only the steps it names; the same seed run twice with
#      LLMC_CUDNN_BACKWARD=deterministic LLMC_GEMM_SEARCH=heuristic passes when the two runs agree bit
#      for bit, and fails when the models differ (a stand-in that writes its process id into the model);
#  (e) an llm.c binary that does not start there is built from the snapshots the bundle carries
#      (a stand-in checkout, tests/lib/fake_llmc.sh, built with nvcc: SKIP of (e) and (h) alone
#      without it);
#  (f) a relative GPU_SESSION_OUT is taken from the folder the script runs in, and a main log an
#      earlier run left there is removed; `make gpu-session` passes GPU_SESSION_OUT and
#      GPU_SESSION_BUDGET on;
#  (g) no llm.c at all (none in the bundle, no LLMC_DIR, no snapshots): the llm.c step is skipped
#      with a line saying that LLMC_DIR builds one, and the session passes;
#  (h) LLMC_DIR names a checkout: llm.c is built from it for this GPU (before the bundle's) and
#      that one runs side by side.
set -u
cd "$(dirname "$0")/../.." || exit 1
tmp=$PWD/build/tmp/check_gpu_session
rm -rf "$tmp"
mkdir -p "$tmp"
# shellcheck source=tests/lib/tally.sh
source tests/lib/tally.sh
# shellcheck source=tests/lib/fake_llmc.sh
source tests/lib/fake_llmc.sh
# shellcheck source=scripts/cuda_wheels.sh
source scripts/cuda_wheels.sh
script=scripts/gpu_session.sh
export FAKE=$tmp/fake
dist=$tmp/dist
mkdir -p "$FAKE/bin" "$dist/bin" "$dist/llmc" "$dist/corpus"
echo 500 >"$FAKE/mem"

# ---- the stand-ins ----
cat >"$FAKE/bin/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
case "$*" in
  -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-stand-in)" ;;
  *memory.used*)  # every 50 ms, the memory the running stand-in holds; it waits to be seen
    echo $$ >"$FAKE/sampler.pid"
    while :; do v=$(cat "$FAKE/mem"); echo "$v"; echo "$v" >"$FAKE/seen.tmp"; mv "$FAKE/seen.tmp" "$FAKE/seen"; sleep 0.05; done ;;
  *name,memory.total*) echo "NVIDIA H100 80GB HBM3, 81559 MiB, 580.159.04, 9.0" ;;
  *name*) echo "NVIDIA H100 80GB HBM3" ;;
  *compute_cap*) echo "9.0" ;;
  *) exit 1 ;;
esac
EOF
# hold MIB: the memory the stand-in holds, once the sampler (if one runs) has seen it.
cat >"$FAKE/hold.sh" <<'EOF'
hold() {
  echo "$1" >"$FAKE/mem"
  kill -0 "$(cat "$FAKE/sampler.pid" 2>/dev/null)" 2>/dev/null || return 0
  for _ in $(seq 200); do [ "$(cat "$FAKE/seen" 2>/dev/null)" = "$1" ] && return 0; sleep 0.05; done
}
EOF
# Our trainer. Step times (ms) by setting: defaults (-r auto) 100, -r 0 90, -r 1 95, -r 2 110, -r 0 with
# LLMC_GELU=epilogues 80 (and losses 2% higher), LLMC_GELU=kernels 105, -r 0 with any other speed
# switch set 95 (so that -r 0 stays the fastest within 1%), -b 8 120 and with LLMC_CUDA_GRAPHS=on 112,
# LLMC_ATTENTION=fallback 150, d48 1000; the first 2 steps 999. Loss after step i of X: 11 - 4 (i + 1)
# / X. Memory held (MiB): 20480, d48 100000. Its checkpoints are the same for the same flags (a
# deterministic trainer), unless FAKE_NONDETERMINISTIC=1 writes its process id into each model. Each
# sweep run appends its -r, -b, FP8 and LLMC_ variables to $FAKE/sweep_env.
cat >"$FAKE/trainer" <<'EOF'
#!/usr/bin/env bash
source "$FAKE/hold.sh"
e=d12 b=4 x=10 o="" y=0 r=auto n=0 dry=0 fp8=""
while [ $# -gt 0 ]; do
  case $1 in
    -e) e=$2 ;; -b) b=$2 ;; -x) x=$2 ;; -o) o=$2 ;; -y) y=$2 ;; -r) r=$2 ;; -n) n=$2 ;; --dry-run) dry=1 ;;
    --fp8) [ "$2" = 1 ] && fp8=" fp8" ;;
  esac
  shift 2
done
if [ "$dry" = 1 ]; then
  echo "d48-plan $e -b $b" >>"$FAKE/order"
  [ "${FAKE_HANG:-}" = plan ] && sleep 1000
  echo "does not fit: needs 267.14 GiB per rank, 79.00 GiB available; 188.14 GiB short"
  echo "  largest -b that fits: 60 (asked -b 128; -d keeps the tokens per step by accumulating)"
  exit 0
fi
ms=100 scale=1 mib=20480
if [ "$e" = d48 ]; then ms=1000 mib=100000
elif [ "${LLMC_ATTENTION:-}" = fallback ] && [ -z "$o" ]; then ms=150
elif [ "$b" = 8 ]; then ms=$([ "${LLMC_CUDA_GRAPHS:-}" = on ] && echo 112 || echo 120)
elif [ "${LLMC_GELU:-}" = kernels ]; then ms=105
elif [ "$r" = 0 ] && [ "${LLMC_GELU:-}" = epilogues ]; then ms=80 scale=1.02
elif [ "$r" = 0 ] && env | grep -E '^LLMC_' | grep -qvE '^LLMC_(GELU|ATTENTION|COMMUNICATOR)='; then ms=95
elif [ "$r" = 0 ]; then ms=90
elif [ "$r" = 1 ]; then ms=95
elif [ "$r" = 2 ]; then ms=110; fi
case "$o:$y:$x:$e" in
  *rank*) tag=ranks ;;
  *:1:*) tag=resume ;;
  *train_d12_twice*) tag="twice ${LLMC_CUDNN_BACKWARD:-default} ${LLMC_GEMM_SEARCH:-timed}" ;;
  *train_d12*) tag=train ;;
  *:*:20:*init*) tag=sweep ;;
  *:*:30:*) tag=llmc-ours ;;
  *:*:3:*) tag=ncu-run ;;
  *:*:4:*) tag=profile-run ;;
  *:*:*:d48) tag=d48 ;;
  *) tag="unexpected $o:$y:$x:$e" ;;
esac
echo "$tag ${LLMC_ATTENTION:-cudnn} -b $b$fp8" >>"$FAKE/order"
[ "$tag" = sweep ] && echo "-r $r -b $b$fp8 | $(env | grep -E '^LLMC_' | sort | tr '\n' ' ')" >>"$FAKE/sweep_env"
hold "$mib"
[ "${FAKE_RANKS:-1}" = 2 ] && echo "train_gpt2cu: 2 ranks over MPI"
[ "${LLMC_COMMUNICATOR:-}" = nccl ] && echo "train_gpt2cu: 1 rank over NCCL"
echo "mfu: 100000000 FLOPs per token (6N + 6LCT at T=1024) against 1000 TFLOP/s, the dense bf16 peak of NVIDIA H100 80GB HBM3"
start=0
if [ -n "$o" ]; then
  mkdir -p "$o"
  if [ "$y" = 1 ] && [ -f "$o/DONE_00000010" ]; then
    echo "resume: continuing from checkpoint step 10 in $o (the newest that verifies, checksums match)"
    start=10
    grep -vE '^s:(1[0-9]|20) ' "$o/main.log" >"$o/main.tmp"; mv "$o/main.tmp" "$o/main.log"
  else : >"$o/main.log"; fi
fi
for ((i = start; i < x; i++)); do
  loss=$(awk -v i=$i -v x=$x -v s=$scale 'BEGIN { printf "%.6f", s * (11 - 4 * (i + 1) / x) }')
  t=$([ $i -lt 2 ] && echo 999 || echo $ms)
  echo "step $i/$x | loss $loss | norm 1.0000 | lr 6.00e-04 | $t.0 ms | 1 tok/s | MFU 1.0% | eta 0s"
  if [ -n "$o" ]; then
    echo "s:$i trl:$loss lr:6.000000e-04 norm:1.000000 mfu:1.00" >>"$o/main.log"
    if [ "$n" -gt 0 ] && [ $(((i + 1) % n)) = 0 ]; then
      s=$(printf '%08d' $((i + 1)))
      echo "model $s${FAKE_NONDETERMINISTIC:+ $$}" >"$o/model_$s.bin"; echo "state $s" >"$o/state_${s}_00000.bin"
      : >"$o/DONE_$s"
    fi
  fi
done
echo "done: $x steps in 1s"
# LLMC_PROFILE=on: 16 names, name kNN taking NN ms and NN calls per step (136 ms and 136 calls in all).
if [ "${LLMC_PROFILE:-}" = on ]; then
  echo "profile: $((x - 1)) step(s) after 1 warm-up: 136 calls, 136.000 ms of GPU time per step (CUDA events)"
  echo "profile:    ms/step   share  calls/step  name"
  for k in $(seq 16 -1 1); do
    awk -v k=$k 'BEGIN { printf "profile: %10.3f %6.2f%% %11d  k%02d<bf16>\n", k, 100 * k / 136, k, k }'
  done
fi
hold 500
EOF
# test_gpt2cu: --probe prints the device; else a known summary; with FAKE_CUDNN_FAILS=1 the bf16 test
# with cuDNN attention stops on a cuDNN error.
cat >"$FAKE/test_gpt2cu" <<'EOF'
#!/usr/bin/env bash
p=$1
shift
if [ "${1:-}" = --probe ]; then echo "device: NVIDIA H100 80GB HBM3 (stand-in) | precision $p"; exit 0; fi
echo "parity-$p ${LLMC_ATTENTION:-cudnn}" >>"$FAKE/order"
if [ "${FAKE_CUDNN_FAILS:-}" = 1 ] && [ "$p" = bf16 ] && [ -z "${LLMC_ATTENTION:-}" ]; then
  echo "error: cuDNN attention: no engine for this graph"; exit 1
fi
echo "test_gpt2cu ($p, attention cudnn): 47 checks passed, 0 failed"
EOF
# llm.c's trainer: its usage for a flag without a value (the session's probe); else 110 ms steps and
# 24000 MiB at its defaults, 104 ms and 26000 MiB with -ge 2 (its fastest), the same losses as ours.
cat >"$FAKE/llmc" <<'EOF'
#!/usr/bin/env bash
source "$FAKE/hold.sh"
if [ "$*" = -x ]; then echo "Usage:   ./train_gpt2cu [options]"; exit 1; fi  # a flag without its value
echo "llmc-theirs $*" >>"$FAKE/order"
ms=110 mib=24000
[[ " $* " == *" -ge 2 "* ]] && ms=104 mib=26000
hold $mib
x=30
for ((i = 1; i <= x; i++)); do
  t=$([ $i -le 2 ] && echo 999 || echo $ms)
  loss=$(awk -v i=$((i - 1)) -v x=$x 'BEGIN { printf "%.6f", 11 - 4 * (i + 1) / x }')
  printf 'step %4d/%d | loss %s (+0.00z)| norm 1.0000 (+0.00z)| lr 6.00e-04 | %.2f ms | 1.0%% bf16 MFU | 1 tok/s\n' \
    $i $x "$loss" "$t"
done
hold 500
EOF
# compute-sanitizer: logs which binary it was given and reports no errors.
cat >"$FAKE/bin/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
for a in "$@"; do case $a in */test_gpt2cu-*) echo "memcheck ${a##*/}" >>"$FAKE/order" ;; esac; done
echo "========= ERROR SUMMARY: 0 errors"
EOF
# ncu: three kernels per profiled step: gemm_a twice (3 ms each), attn_b (2 ms), ln_c (1 ms), in ns.
cat >"$FAKE/bin/ncu" <<'EOF'
#!/usr/bin/env bash
log=""
while [[ "$1" == --* ]]; do
  case $1 in --log-file) log=$2; shift 2 ;; --csv) shift ;; *) shift 2 ;; esac
done
{
  echo "==PROF== Connected to process"
  echo '"ID","Process ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'
  id=0
  for step in 1 2 3; do
    for k in gemm_a:3000000 gemm_a:3000000 attn_b:2000000 ln_c:1,000,000; do
      echo "\"$id\",\"1\",\"${k%%:*}\",\"gpu__time_duration.sum\",\"ns\",\"${k#*:}\""
      id=$((id + 1))
    done
  done
} >"$log"
exec "$@"
EOF
# The bundle's mpirun: runs the command once as "2 ranks".
cat >"$dist/bin/mpirun" <<'EOF'
#!/usr/bin/env bash
while [[ "$1" == -* ]]; do case $1 in -np) shift 2 ;; *) shift ;; esac; done
FAKE_RANKS=2 exec "$@"
EOF
cat >"$dist/bin/run_all.sh" <<'EOF'
#!/usr/bin/env bash
echo "devcuda $*" >>"$FAKE/order"
echo "dev/cuda: 12 checks passed, 0 failed"
EOF
# The PyTorch init writer (python3 otherwise).
cat >"$FAKE/python" <<'EOF'
#!/usr/bin/env bash
if [ "$1" = dev/pytorch/bench_gpt2.py ]; then
  echo "init $*" >>"$FAKE/order"
  # A model file's header (magic, version 5, T, V, 12 layers), which vs_llmc.sh reads the depth of.
  while [ $# -gt 0 ]; do
    [ "$1" = --write-init ] && python3 -c 'import struct, sys; open(sys.argv[1], "wb").write(struct.pack("<256i", 20240326, 5, 1024, 50257, 12, *[0] * 251))' "$2"
    shift
  done
  exit 0
fi
exec python3 "$@"
EOF
for p in bf16 fp32; do
  printf '#!/usr/bin/env bash\nexec bash "$FAKE/trainer" "$@"\n' >"$dist/bin/train_gpt2cu-$p"
  printf '#!/usr/bin/env bash\nexec bash "$FAKE/test_gpt2cu" %s "$@"\n' "$p" >"$dist/bin/test_gpt2cu-$p"
done
printf '#!/usr/bin/env bash\nexec bash "$FAKE/llmc" "$@"\n' >"$dist/llmc/train_gpt2cu"
echo 0123456789ab >"$dist/llmc/COMMIT"
echo abcdef012345 >"$dist/PROJECT_COMMIT"
echo "matmul layernorm" >"$dist/dev_cuda_benches.txt"
: >"$dist/corpus/corpus_train_000001.bin"
: >"$dist/corpus/corpus_val_000000.bin"
chmod +x "$FAKE"/bin/* "$FAKE/python" "$dist"/bin/* "$dist/llmc/train_gpt2cu"
session_env=(GPU_SESSION_DIST="$dist" GPU_SESSION_OUT="$tmp/out-other" PYTHON="$FAKE/python" PATH="$FAKE/bin:$PATH")

# ---- (a) errors ----
out=$(env "${session_env[@]}" PATH=/usr/bin:/bin bash "$script" 2>&1)
rc=$?
if [ "$rc" = 1 ] && grep -qF "gpu-session: no GPU found (nvidia-smi lists none): nothing was run" <<<"$out" &&
  [ ! -e "$FAKE/order" ]; then ok "no GPU: a clear error, nothing run"
else fail "no GPU: exit $rc: $out"; fi
out=$(env "${session_env[@]}" GPU_SESSION_STEPS=correctness,bogus bash "$script" 2>&1)
rc=$?
if [ "$rc" = 2 ] && grep -qF "GPU_SESSION_STEPS: 'bogus' is not one of correctness,resume" <<<"$out"; then
  ok "a bad GPU_SESSION_STEPS is refused"
else fail "bad GPU_SESSION_STEPS: exit $rc: $out"; fi

# ---- (b) a whole session ----
# Every step but reliability, which tests/gpu/check_gpu_reliability.sh runs on the CPU trainer.
all_steps=$(sed -n 's/^all_steps=//p' "$script")
mkdir -p "$tmp/out"
out=$(env "${session_env[@]}" GPU_SESSION_OUT="$tmp/out" GPU_SESSION_STEPS="${all_steps/reliability,/}" \
  bash "$script" 2>&1 </dev/null)
rc=$?
[ "$rc" = 0 ] && ok "the whole session passes with stand-ins that pass" ||
  { fail "the whole session: exit $rc"; sed 's/^/      /' <<<"$out" | tail -n 40; }
# The sweep: the defaults, -r 0, -r 2, -r 1, every other value of every speed switch but the FP8 ones,
# -b 8 without and with LLMC_CUDA_GRAPHS=on, then the fallback, then --fp8 1 with the defaults, at
# -r 1, with every other value of each LLMC_FP8_* switch and with every FP8 switch on (at its last
# value). The table is read here by its own rows, not by the script's reading of it.
switch_rows() {  # switch_rows fp8|other: "VARIABLE VALUE..." of those rows, the default first
  grep '^LLMC_SPEED_SWITCH(' llmc/cuda/speed_switches.def |
    awk -F'"' -v want="$1" '($2 ~ /^LLMC_FP8_/ ? "fp8" : "other") == want { gsub(/\|/, " ", $4); print $2, $4 }'
}
other_values() { switch_rows "$1" | awk '{ n += NF - 2 } END { print n + 0 }'; }
sweep_cudnn_runs=$((4 + $(other_values other)))
sweep_fp8_runs=$((3 + $(other_values fp8)))
expected_order="parity-fp32 cudnn
parity-bf16 cudnn
train cudnn -b 16
resume cudnn -b 16
twice deterministic heuristic cudnn -b 16
twice deterministic heuristic cudnn -b 16
train fallback -b 16
resume fallback -b 16
memcheck test_gpt2cu-fp32
memcheck test_gpt2cu-bf16
ranks cudnn -b 4
ranks cudnn -b 4
ranks cudnn -b 4
init dev/pytorch/bench_gpt2.py --config d12 --write-init build/gpu-session-init-d12.bf16.bin --init-bf16 --init-only
llmc-theirs
llmc-ours cudnn -b 64
llmc-theirs
llmc-theirs
llmc-ours cudnn -b 64
llmc-theirs
$(for _ in $(seq "$sweep_cudnn_runs"); do echo "sweep cudnn -b 64"; done)
sweep cudnn -b 8
sweep cudnn -b 8
sweep fallback -b 64
$(for _ in $(seq "$sweep_fp8_runs"); do echo "sweep cudnn -b 64 fp8"; done)
profile-run cudnn -b 64
ncu-run cudnn -b 64
d48-plan d48 -b 128
d48 cudnn -b 60
devcuda --check matmul layernorm"
# llm.c's lines: its flags are checked by tests/gpu/check_vs_llmc.sh; here only its place in the order.
if [ "$(sed 's/^llmc-theirs .*/llmc-theirs/' "$FAKE/order")" = "$expected_order" ]; then
  ok "the steps in order: facts, correctness, llm.c side by side, settings, kernels, d48, kernel checks"
else fail "the order of the calls:"; diff <(echo "$expected_order") <(sed 's/^llmc-theirs .*/llmc-theirs/' "$FAKE/order") |
  sed 's/^/      /'; fi
# Each sweep run's recompute, micro-batch and variables (read off what the stand-in saw).
expected_sweep_env=$(
  printf '%s\n' "-r auto -b 64 | " "-r 0 -b 64 | " "-r 2 -b 64 | " "-r 1 -b 64 | "
  switch_rows other | while read -r variable _ others; do
    for value in $others; do echo "-r 0 -b 64 | $variable=$value "; done
  done
  printf '%s\n' "-r 0 -b 8 | " "-r 0 -b 8 | LLMC_CUDA_GRAPHS=on " "-r 1 -b 64 | LLMC_ATTENTION=fallback " \
    "-r auto -b 64 fp8 | " "-r 1 -b 64 fp8 | "
  switch_rows fp8 | while read -r variable _ others; do
    for value in $others; do echo "-r auto -b 64 fp8 | $variable=$value "; done
  done
  echo "-r auto -b 64 fp8 | $(switch_rows fp8 | awk '{ print $1 "=" $NF }' | sort | tr '\n' ' ')"
)
if [ "$(cat "$FAKE/sweep_env")" = "$expected_sweep_env" ]; then
  ok "the sweep: every other value of every switch alone, LLMC_CUDA_GRAPHS=on at -b 8 beside -b 8, every FP8 switch on"
else fail "the sweep's runs:"; diff <(echo "$expected_sweep_env") "$FAKE/sweep_env" | sed 's/^/      /'; fi
# By hand. vs llm.c: its defaults 110 ms, its fastest 104 ms, ours 100 ms -> 65536 / 0.110 = 595782
# tok/s, 65536 / 0.104 = 630154, 655360 tok/s: 1.100x and 1.040x; MFU 655360 x 1e8 / 1e15 = 6.6%,
# 595782 -> 6.0%, 630154 -> 6.3%; memory 24000 MiB = 23.4 GiB, 26000 = 25.4 GiB, 20480 = 20.0 GiB;
# the same losses, 11 - 4 x 30 / 30 = 7.0 after step 30, +0.00%.
# Settings (steps 5..19, 20 steps): defaults 100 ms 655360 tok/s; -r 0 90 ms 728178 tok/s 1.111x;
# -r 1 95 ms 65536 / 0.095 = 689853 tok/s 1.053x;
# -r 2 110 ms 595782 0.909x; epilogues 80 ms 819200 1.250x but loss 7.14 (2% over 7.0), so the
# fastest within 1% is -r 0; kernels 105 ms 624152 0.952x; -b 8 120 ms 546133 0.833x, with graphs 112
# ms 585143 0.893x; fallback 150 ms 436907 0.667x.
# LLMC_PROFILE=on over 4 steps: its summary line, then the 15 names with the most time, k16 (16 ms
# per step, 16/136 = 11.76%) down to k02 (2/136 = 1.47%); k01 is left out.
# Kernels over 3 steps: gemm_a 18 ms -> 6.00 ms/step, 2 calls/step, 18/27 = 66.7%; attn_b 2.00
# 22.2%; ln_c 1.00 11.1%; 9.0 ms per step in all.
# d48: -b 60 (the plan's), 1000 ms -> 61440 tok/s, 100000 MiB = 97.7 GiB, loss 7.0 after step 8.
expect_lines "$out" \
  "INFO  GPU                                    NVIDIA H100 80GB HBM3, 81559 MiB, 580.159.04, 9.0" \
  "INFO  commits                                ours abcdef012345, llm.c 0123456789ab" \
  "PASS  binaries                               prebuilt bundle $dist (device: NVIDIA H100 80GB HBM3 (stand-in)" \
  "PASS  llm.c binary                           prebuilt bundle $dist/llmc (llm.c 0123456789ab)" \
  "PASS  test_gpt2cu fp32                       test_gpt2cu (fp32, attention cudnn): 47 checks passed, 0 failed" \
  "PASS  train d12 20 steps, B=16               loss 10.800000 -> 7.000000" \
  "PASS  resume d12 at step 10, cuDNN attention main.log and the step-20 model bit-identical" \
  "PASS  same seed twice, LLMC_CUDNN_BACKWARD=deterministic LLMC_GEMM_SEARCH=heuristic main.log and the step-20 model bit-identical over the two runs" \
  "PASS  resume d12 at step 10, fallback attention main.log and the step-20 model bit-identical" \
  "PASS  memcheck test_gpt2cu bf16 (L1 C64)     ERROR SUMMARY: 0 error" \
  "PASS  ZeRO-1, 2 ranks on 1 GPU (MPI), bundled mpirun losses vs 1 rank: max rel diff 0.0e+00" \
  "PASS  vs llm.c 0123456789ab: d12 B=64 T=1024 ours defaults vs llm.c defaults: 1.100x tokens/s, memory 20.0 GiB vs 23.4 GiB, loss after 30 steps 7.000 vs 7.000 (+0.00%)" \
  "PASS  vs llm.c 0123456789ab: d12 B=64 T=1024 ours defaults vs llm.c fastest: 1.040x tokens/s, memory 20.0 GiB vs 25.4 GiB, loss after 30 steps 7.000 vs 7.000 (+0.00%)" \
  "llm.c defaults    110.0 ms/step    595782 tok/s  MFU   6.0%  peak  23.4 GiB" \
  "llm.c fastest     104.0 ms/step    630154 tok/s  MFU   6.3%  peak  25.4 GiB" \
  "ours defaults     100.0 ms/step    655360 tok/s  MFU   6.6%  peak  20.0 GiB" \
  "defaults (-r auto)                   100.0 ms/step    655360 tok/s 1.000x  peak  20.0 GiB  loss after step 20: 7.0000" \
  "-r 0                                  90.0 ms/step    728178 tok/s 1.111x  peak  20.0 GiB  loss after step 20: 7.0000  <- fastest within 1% loss" \
  "-r 1                                  95.0 ms/step    689853 tok/s 1.053x  peak  20.0 GiB  loss after step 20: 7.0000" \
  "-r 0 LLMC_GELU=epilogues              80.0 ms/step    819200 tok/s 1.250x  peak  20.0 GiB  loss after step 20: 7.1400" \
  "-r 0 LLMC_GELU=kernels               105.0 ms/step    624152 tok/s 0.952x" \
  "-r 0 -b 8                            120.0 ms/step    546133 tok/s 0.833x  peak  20.0 GiB  loss after step 20: 7.0000" \
  "-r 0 -b 8 LLMC_CUDA_GRAPHS=on        112.0 ms/step    585143 tok/s 0.893x  peak  20.0 GiB  loss after step 20: 7.0000" \
  "LLMC_ATTENTION=fallback              150.0 ms/step    436907 tok/s 0.667x" \
  "INFO  LLMC_PROFILE=on, d12 B=64, 3 steps     3 step(s) after 1 warm-up: 136 calls, 136.000 ms of GPU time per step" \
  "INFO  LLMC_PROFILE=on, d12 B=64, 3 steps     16.000  11.76%          16  k16<bf16>" \
  "INFO  LLMC_PROFILE=on, d12 B=64, 3 steps     2.000   1.47%           2  k02<bf16>" \
  "3 kernels, 9.0 ms of kernel time per step over 3 steps" \
  "6.00 ms/step  66.7%     2.0 calls/step  gemm_a" \
  "2.00 ms/step  22.2%     1.0 calls/step  attn_b" \
  "1.00 ms/step  11.1%     1.0 calls/step  ln_c" \
  "PASS  d48 (1.5B), T=1024, -b 60 (the plan's largest) 1000.0 ms/step, 61440 tok/s, peak 97.7 GiB, loss 7.0000" \
  "PASS  dev/cuda kernel checks                 dev/cuda: 12 checks passed, 0 failed"
if [ "$(grep -c '^INFO  LLMC_PROFILE=on' <<<"$out")" = 32 ] && ! grep -q 'k01<bf16>' <<<"$out"; then
  ok "LLMC_PROFILE's table: its summary and 15 rows (printed twice: live and in the summary), not the 16th"
else fail "LLMC_PROFILE's rows: $(grep -c '^INFO  LLMC_PROFILE=on' <<<"$out") lines, want 32 without k01"; fi
if [ "$(grep -c -- 'fastest within 1% loss' <<<"$out")" = 2 ]; then ok "one setting marked fastest (printed twice: live and in the summary)"
else fail "the fastest setting is not marked exactly once in the table"; fi
last=$(tail -n 1 <<<"$out")
header=$(grep '^== gpu-session: ' <<<"$out")
if [[ "$last" == "gpu-session: "*" passed, 0 failed, 0 skipped (NVIDIA H100 80GB HBM3, ours abcdef012345)" ]] &&
  [[ "$header" == "== gpu-session: NVIDIA H100 80GB HBM3 | ours abcdef012345 | llm.c 0123456789ab |"* ]]; then
  ok "the summary is printed last, between lines naming the GPU and the commits"
else fail "summary header/last line: '$header' / '$last'"; fi
files=$(cd "$tmp/out" && ls | tr '\n' ' ')
if [ "$files" = "d48.log gpu-session-logs.tgz kernels.txt summary.txt sweep.txt test_gpt2cu-bf16.log vs_llmc.log " ] &&
  cmp -s "$tmp/out/summary.txt" build/gpu-session-logs/summary.txt &&
  tar tzf "$tmp/out/gpu-session-logs.tgz" | grep -q 'gpu-session-logs/vs_llmc/logs/llmc_defaults_1.log'; then
  ok "GPU_SESSION_OUT: the summary, the 5 main logs and one tarball of all the logs"
else fail "GPU_SESSION_OUT holds: $files"; fi

# ---- (c) a hang costs its own step ----
rm -f "$FAKE/order"
start=$SECONDS
out=$(env "${session_env[@]}" FAKE_HANG=plan GPU_SESSION_STEPS=d48,devcuda bash "$script" 2>&1 </dev/null)
rc=$?
took=$((SECONDS - start))
if [ "$rc" = 1 ] && grep -qF "FAIL  d48 (1.5B), T=1024                     the memory plan gave no -b (timed out after 30s" <<<"$out" &&
  grep -qF "PASS  dev/cuda kernel checks" <<<"$out" && [ "$took" -lt 50 ] && tail -n 1 <<<"$out" | grep -q '1 failed'; then
  ok "a hanging d48 plan costs its 30 s limit (${took}s in all); the kernel checks still ran, the table printed"
else fail "hang: exit $rc after ${took}s"; sed 's/^/      /' <<<"$out" | tail -n 8; fi

# ---- (d) only the steps named ----
if [ "$(cut -d' ' -f1 "$FAKE/order" | tr '\n' ' ')" = "d48-plan devcuda " ]; then
  ok "GPU_SESSION_STEPS=d48,devcuda ran only those"
else fail "GPU_SESSION_STEPS=d48,devcuda ran: $(tr '\n' ';' <"$FAKE/order")"; fi

# ---- (d1) the deterministic pair: a stand-in whose models differ from run to run fails it ----
rm -f "$FAKE/order"
out=$(env "${session_env[@]}" FAKE_NONDETERMINISTIC=1 GPU_SESSION_STEPS=resume bash "$script" 2>&1 </dev/null)
rc=$?
if [ "$rc" = 1 ] && grep -qF "FAIL  same seed twice, LLMC_CUDNN_BACKWARD=deterministic LLMC_GEMM_SEARCH=heuristic the two runs differ: losses max rel 0.0e+00, step-20 model differs" <<<"$out" &&
  [ "$(grep -c '^twice deterministic heuristic cudnn -b 16$' "$FAKE/order")" = 2 ]; then
  ok "the same seed twice with LLMC_CUDNN_BACKWARD=deterministic: models that differ fail the row"
else fail "deterministic pair with differing models: exit $rc"; sed 's/^/      /' <<<"$out" | grep -E 'PASS|FAIL' | head -n 10; fi

# ---- (d2) cuDNN fails its parity: every later bf16 run takes the fallback attention, each once ----
rm -f "$FAKE/order"
out=$(env "${session_env[@]}" FAKE_CUDNN_FAILS=1 GPU_SESSION_STEPS=correctness,resume bash "$script" 2>&1 </dev/null)
order=$(tr '\n' ';' <"$FAKE/order")
if [ "$order" = "parity-fp32 cudnn;parity-bf16 cudnn;parity-bf16 fallback;train fallback -b 16;resume fallback -b 16;" ] &&
  grep -qF "PASS  test_gpt2cu bf16, fallback attention" <<<"$out" &&
  grep -qF "PASS  resume d12 at step 10, fallback attention main.log and the step-20 model bit-identical" <<<"$out" &&
  [ "$(grep -c 'train d12 20 steps' <<<"$out")" = 2 ]; then
  ok "cuDNN's parity failing: the fallback's parity, one d12 run with it and its exact resume"
else fail "cuDNN failing: order $order"; sed 's/^/      /' <<<"$out" | grep -E 'PASS|FAIL' | head -n 10; fi

# ---- (e) llm.c built there ----
if cuda_toolkit_root >/dev/null; then
  snap=$tmp/snap
  fake_llmc_checkout "$snap/llm.c" "$snap/cudnn-frontend"
  echo "karpathy/llm.c feedfacefeedfacefeedfacefeedfacefeedface 2025-05-10" >"$snap/llm.c/SNAPSHOT"
  mkdir -p "$dist/llmc/snapshots"
  tar czf "$dist/llmc/snapshots/llm.c-feedfac.tar.gz" -C "$snap" llm.c
  tar czf "$dist/llmc/snapshots/cudnn-frontend-0.0.0-include.tar.gz" -C "$snap" cudnn-frontend
  printf '#!/usr/bin/env bash
echo "train_gpt2cu: error while loading shared libraries: libcudnn.so.9"; exit 127
' \
    >"$dist/llmc/train_gpt2cu"
  out=$(env "${session_env[@]}" HOME="$tmp/home" GPU_SESSION_STEPS=llmc bash "$script" 2>&1 </dev/null)
  want="PASS  llm.c binary                           built here for sm_90 from the bundle's snapshots (the bundle's did not"
  want+=" start: train_gpt2cu: error while loading shared libraries: libcudnn.so.9)"
  # The stand-in checkout builds but does not run here (no libcuda): the side by side then fails.
  if grep -qF "$want" <<<"$out" && [ "$(cat build/gpu-local/llmc/COMMIT)" = feedfacefeed ] &&
    grep -qF "vs llm.c feedfacefeed: d12" <<<"$out" &&
    grep -q "build/gpu-local/llmc/train_gpt2cu" build/gpu-session-logs/vs_llmc/logs/llmc_defaults_1.log 2>/dev/null; then
    ok "an llm.c that does not start: built there for the GPU from the bundle's snapshots, and that one run"
  else fail "llm.c built there:"; sed 's/^/      /' <<<"$out" | grep -i 'llm' | head -n 6; fi
else
  echo "SKIP  (e) llm.c built on the GPU machine: nvcc not found (the stand-in checkout needs it)"
fi

# ---- (f) a relative GPU_SESSION_OUT, from the caller's folder ----
mkdir -p "$tmp/caller/rel/out"
echo stale >"$tmp/caller/rel/out/d48.log"
out=$(cd "$tmp/caller" && env "${session_env[@]}" GPU_SESSION_OUT=rel/out GPU_SESSION_STEPS=devcuda bash "$OLDPWD/$script" 2>&1 </dev/null)
rc=$?
if [ "$rc" = 0 ] && [ "$(cd "$tmp/caller/rel/out" && ls | tr '\n' ' ')" = "gpu-session-logs.tgz summary.txt " ] &&
  grep -qF "in $tmp/caller/rel/out" <<<"$out"; then
  ok "a relative GPU_SESSION_OUT is the caller's folder's; an earlier run's main log is gone"
else fail "relative GPU_SESSION_OUT: exit $rc, holds: $(ls "$tmp/caller/rel/out" 2>&1 | tr '\n' ' ')"; fi

# ---- (f2) through make: its options reach the script ----
out=$(env "${session_env[@]}" make --no-print-directory gpu-session GPU_SESSION_OUT="$tmp/via-make" \
  GPU_SESSION_BUDGET=77 GPU_SESSION_STEPS=devcuda 2>&1 </dev/null)
rc=$?
if [ "$rc" = 0 ] && [ -f "$tmp/via-make/summary.txt" ] && grep -q '^== gpu-session: .* of a 77s budget' "$tmp/via-make/summary.txt"; then
  ok "make gpu-session GPU_SESSION_OUT=... GPU_SESSION_BUDGET=...: both reach the script"
else fail "through make: exit $rc"; sed 's/^/      /' <<<"$out" | tail -n 4; fi

# ---- (g) no llm.c anywhere: skipped, saying how to enable it ----
cp -r "$dist" "$tmp/dist_without_llmc"
rm -rf "$tmp/dist_without_llmc/llmc"
out=$(env "${session_env[@]}" GPU_SESSION_DIST="$tmp/dist_without_llmc" LLMC_SNAPSHOTS="$tmp/no_snapshots" \
  GPU_SESSION_STEPS=llmc bash "$script" 2>&1 </dev/null)
rc=$?
want="SKIP  vs llm.c                               no llm.c to compare with (no llm.c in the bundle $tmp/dist_without_llmc):"
want+=" LLMC_DIR=~/llm.c, a checkout of github.com/karpathy/llm.c, builds one here"
if [ "$rc" = 0 ] && grep -qF "$want" <<<"$out" && tail -n 1 <<<"$out" | grep -qF '0 failed, 1 skipped'; then
  ok "no llm.c anywhere: the step is skipped, naming LLMC_DIR; the session passes"
else fail "no llm.c: exit $rc"; sed 's/^/      /' <<<"$out" | grep -E 'llm|skipped' | head -n 6; fi

# ---- (h) LLMC_DIR: built from the user's checkout ----
if cuda_toolkit_root >/dev/null; then
  user=$tmp/user
  fake_llmc_checkout "$user/llm.c" "$user/cudnn-frontend"
  echo "karpathy/llm.c beadbeadbeadbeadbeadbeadbeadbeadbeadbead 2025-05-10" >"$user/llm.c/SNAPSHOT"
  out=$(env "${session_env[@]}" HOME="$tmp/home" LLMC_DIR="$user/llm.c" GPU_SESSION_STEPS=llmc bash "$script" 2>&1 </dev/null)
  want="PASS  llm.c binary                           built here for sm_90 from LLMC_DIR=$user/llm.c (llm.c beadbeadbead)"
  # The stand-in builds but does not run here (no libcuda): the side by side then fails, naming it.
  if grep -qF "$want" <<<"$out" && grep -qF "vs llm.c beadbeadbead: d12" <<<"$out" &&
    grep -q "build/gpu-local/vs_llmc/llm.c/train_gpt2cu" build/gpu-session-logs/vs_llmc/logs/llmc_defaults_1.log 2>/dev/null; then
    ok "LLMC_DIR: llm.c built from that checkout for this GPU, before the bundle's, and that one run"
  else fail "LLMC_DIR:"; sed 's/^/      /' <<<"$out" | grep -i 'llm' | head -n 6; fi
else
  echo "SKIP  (h) llm.c built from LLMC_DIR: nvcc not found (the stand-in checkout needs it)"
fi

tally_end gpu_session "gpu_session.sh: $checks checks with stand-ins: the no-GPU error, the order, every table worked out by hand, GPU_SESSION_OUT, a hang, step choice, llm.c from the bundle, its snapshots, LLMC_DIR or none"
