#!/usr/bin/env bash
# `make gpu-session`: check and benchmark this GPU in one command. One time budget
# (GPU_SESSION_BUDGET seconds, default 540: the whole run stays under 10 minutes) is cut into
# per-step limits, so that a hang costs only its own step and the summary always prints. The
# binaries: the bundle `make gpu-dist` builds (GPU_SESSION_DIST, default build/gpu-dist) when it is
# there and runs on this machine, else ours built here from source for this GPU (scripts/gpu_steps_lib.sh).
# The most valuable results first:
#   1. facts: the GPU, its memory and driver, the cuBLAS/cuDNN/NCCL libraries the trainer loads, our
#      commit and llm.c's
#   2. correctness: test_gpt2cu FP32 and BF16 (cuDNN attention; when cuDNN rejects the graph, once
#      more with LLMC_ATTENTION=fallback, and every BF16 run below uses the fallback), a 20-step d12
#      run on the corpus whose loss falls, its -y 1 resume from step 10 (cuDNN's flash backward
#      adds dQ up with atomics, so the resumed run must match step 10 exactly and the rest within
#      1e-4), the same run twice from the same seed with LLMC_CUDNN_BACKWARD=deterministic and
#      LLMC_GEMM_SEARCH=heuristic (main.log
#      and the final model bit-identical), the resume pair with the fallback attention, whose
#      kernels are deterministic (bit-identical too), compute-sanitizer memcheck on a small config,
#      NCCL with 1 rank and 2 ranks through the bundled mpirun
#   3. against llm.c (dev/bench/vs_llmc.sh): llm.c's train_gpt2cu built here for this GPU from the
#      checkout LLMC_DIR names (e.g. LLMC_DIR=~/llm.c, with cudnn-frontend beside it or in
#      ~/cudnn-frontend); else the bundle's, when it starts here; else built here from the snapshots
#      of llm.c and cudnn-frontend, the bundle's or those in LLMC_SNAPSHOTS (default
#      ../shared/external); with none of these the step is skipped, saying how to enable it.
#      d12, B=64, T=1024, bf16: llm.c at its defaults and at its fastest setting (-r 0 -ge 2) and
#      ours at our defaults, the same shards in the same order from the same initial weights, A B A B
#      (the order reversed in the second round): ms/step, tok/s, MFU, peak memory, the losses after
#      the same steps, and a row per pair "ours defaults vs llm.c ...: N.NNNx tokens/s, ..."
#   4. our settings: one run per performance setting (-r 0/1/2, every value of every speed switch of
#      llmc/cuda/speed_switches.def, LLMC_CUDA_GRAPHS=on at -b 8 beside -b 8 without it,
#      LLMC_ATTENTION=fallback, --fp8 1 and every FP8 switch on), same shape and weights: ms/step,
#      tok/s, peak memory, the loss after the same steps; the fastest that keeps the loss within 1%
#      is marked
#   5. where the time goes: a d12 run with LLMC_PROFILE=on (CUDA events around every kernel, GEMM
#      and cuDNN call: llmc/cuda/launch_profile.h), the top 15 of its table; then one d12 run's
#      kernels under ncu (gpu__time_duration), the top 15
#   6. d48 (1.5B) at the largest -b the memory plan allows on this card: tok/s and peak memory
#   7. reliability (scripts/gpu_reliability_lib.sh), in at most GPU_SESSION_RELIABILITY_SECONDS (120):
#      SIGTERM at a random step and kill -9 during a checkpoint write, each resumed bit-identically;
#      a NaN in the gradients skipped (-sg) or stopping the run; memory another process holds; two
#      ranks on the GPU, one stopped, ended by the watchdog; compute-sanitizer's racecheck, synccheck
#      and initcheck on test_gpt2cu and the dev/cuda checks
#   8. the dev/cuda kernel checks, with the time that is left
# Output: the summary table, printed last (every line names the GPU and the commit: the header and
# the last line; each row its settings); every log in build/gpu-session-logs; and in GPU_SESSION_OUT
# (default out/gpu-session; a relative path is taken from the folder it is run in) 7 files:
# summary.txt, the main logs (test_gpt2cu-bf16.log, vs_llmc.log, sweep.txt, kernels.txt, d48.log)
# and gpu-session-logs.tgz with all the logs.
# GPU_SESSION_STEPS=a,b,...: only these steps (the facts always), to re-run what failed: correctness
# (test_gpt2cu, the d12 run), resume, memcheck, ranks, llmc, sweep, kernels, d48, reliability,
# devcuda; default all. More: docs/cuda-trainer.md, "make gpu-session".
set -u
caller_dir=$PWD  # relative paths in the environment are the caller's
cd "$(dirname "$0")/.." || exit 1
root=$PWD
# in_caller_dir PATH: PATH, made absolute from the caller's folder when relative.
in_caller_dir() { if [[ "$1" == /* ]]; then echo "$1"; else echo "$caller_dir/$1"; fi; }
out_dir=$(in_caller_dir "${GPU_SESSION_OUT:-out/gpu-session}")
llmc_dir=${LLMC_DIR:+$(in_caller_dir "$LLMC_DIR")}
dist=${GPU_SESSION_DIST:-build/gpu-dist}
logs=build/gpu-session-logs
rm -rf "$logs"
mkdir -p "$logs"
budget=${GPU_SESSION_BUDGET:-540}
usage_error() { echo "gpu-session: $*" >&2; exit 2; }
[[ "$budget" =~ ^[1-9][0-9]*$ ]] || usage_error "GPU_SESSION_BUDGET='$budget' is not a whole number of seconds"
[[ "${GPU_SESSION_RELIABILITY_SECONDS:-120}" =~ ^[1-9][0-9]*$ ]] ||
  usage_error "GPU_SESSION_RELIABILITY_SECONDS='$GPU_SESSION_RELIABILITY_SECONDS' is not a whole number of seconds"
all_steps=correctness,resume,memcheck,ranks,llmc,sweep,kernels,d48,reliability,devcuda
steps=${GPU_SESSION_STEPS:-$all_steps}
for s in ${steps//,/ }; do
  [[ ",$all_steps," == *",$s,"* ]] || usage_error "GPU_SESSION_STEPS: '$s' is not one of $all_steps"
done
wanted() { [[ ",$steps," == *",$1,"* ]]; }
# shellcheck source=scripts/gpu_steps_lib.sh
source scripts/gpu_steps_lib.sh
# shellcheck source=scripts/gpu_bench_lib.sh
source scripts/gpu_bench_lib.sh
# shellcheck source=scripts/speed_switches.sh
source scripts/speed_switches.sh
# shellcheck source=scripts/wait_for.sh
source scripts/wait_for.sh
# shellcheck source=scripts/gpu_reliability_lib.sh
source scripts/gpu_reliability_lib.sh
# shellcheck source=scripts/nonfinite_step.sh
source scripts/nonfinite_step.sh
python=${PYTHON:-python3}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "gpu-session: no GPU found (nvidia-smi lists none): nothing was run;" \
    "\`make test\` covers what runs without one" >&2
  exit 1
fi
mkdir -p "$out_dir" || usage_error "GPU_SESSION_OUT: cannot create the folder $out_dir"
[ -d "$dist" ] || echo "gpu-session: no bundle at $dist (\`make gpu-dist\`): the binaries are built here from source"
# shellcheck source=scripts/gpu_env.sh
source scripts/gpu_env.sh >"$logs/gpu_env.txt"

# ---- 1. facts ----
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
# The bundle's commit (what runs); the working tree's git, if any, may be older than the bundle.
commit=$(cat "$dist/PROJECT_COMMIT" 2>/dev/null || git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ -n "$llmc_dir" ]; then
  llmc_commit="LLMC_DIR's (built below)"
else
  llmc_commit=$(cat "$dist/llmc/COMMIT" 2>/dev/null || echo none)
fi
row INFO "GPU" "$(nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader |
  head -n 1)"
row INFO "commits" "ours $commit, llm.c $llmc_commit"
gpu_binaries
# The libraries the loader picks for the trainer, by their real file names (which carry the versions).
libs=$(ldd "$bin/train_gpt2cu-bf16" 2>&1 | tee "$logs/ldd.txt" |
  awk '/libcublas|libcudnn\.|libnccl|libcudart/ && $3 ~ /^\// { print $3 }' | xargs -r readlink -f |
  xargs -r -n 1 basename | sort -u | tr '\n' ' ')
row INFO "libraries loaded" "${libs:-none found (ldd.txt)}"
find_corpus || row FAIL "corpus" "$corpus_missing"

# ---- 2. correctness ----
attention_env=()
wanted correctness && parity_rows

# d12_run NAME LOG_NAME [VAR=VALUE...]: 20 d12 steps at B=16 with a checkpoint at step 10 and 20,
# in $logs/LOG_NAME; one row: PASS when the loss falls by more than 1.0. Its status.
d12=(-j "$corpus/corpus_val_*.bin" -v 10 -m 4 -e d12 -b 16 -t 1024 -x 20 -l 6e-4 -u 5 -q 0.1 -c 0.1 -sh 0 -s 0 -n 10)
d12_run() {
  local name=$1 out=$logs/$2 rc steps first last
  shift 2
  limited 90 "$out.log" env "$@" "$bin/train_gpt2cu-bf16" -i "$corpus/corpus_train_*.bin" "${d12[@]}" -o "$out"
  rc=$?
  steps=$(train_steps "$out.log")
  first=$(first_loss <<<"$steps")
  last=$(last_loss <<<"$steps")
  if [ "$rc" -ne 0 ]; then row FAIL "$name" "$(status_text "$rc" "$out.log"), loss ${first:-?} -> ${last:-?}"
  elif awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 1.0) }'; then row PASS "$name" "loss $first -> $last"
  else row FAIL "$name" "loss ${first:-?} -> ${last:-?} (want a drop > 1.0)"; rc=1; fi
  return "$rc"
}
# d12_resume NAME LOG_NAME EXACT [VAR=VALUE...]: the run in $logs/LOG_NAME resumed (-y 1) from its
# step-10 checkpoint in a new folder; one row. EXACT=1: main.log and the step-20 model must be
# bit-identical to the uninterrupted run's; EXACT=0: step 10 (the first step from the restored
# state) must be, and every loss within 1e-4.
d12_resume() {
  local name=$1 full=$logs/$2 exact=$3 part=$logs/$2_resumed rc diff
  shift 3
  mkdir -p "$part"
  if ! cp "$full/model_00000010.bin" "$full/state_00000010_00000.bin" "$full/DONE_00000010" "$part/" 2>/dev/null; then
    row FAIL "$name" "no step-10 checkpoint in $full"
    return 1
  fi
  grep -E '^s:([0-9]|10) ' "$full/main.log" >"$part/main.log"
  limited 60 "$part.log" env "$@" "$bin/train_gpt2cu-bf16" -i "$corpus/corpus_train_*.bin" "${d12[@]}" -y 1 -o "$part"
  rc=$?
  diff=$(max_rel_diff "$full/main.log" "$part/main.log")
  if [ "$rc" -ne 0 ]; then row FAIL "$name" "$(status_text "$rc" "$part.log")"
  elif ! grep -q 'resume: continuing from checkpoint step 10' "$part.log"; then
    row FAIL "$name" "it did not resume from step 10 ($part.log)"
  elif cmp -s <(without_mfu "$full/main.log") <(without_mfu "$part/main.log") &&
    cmp -s "$full/model_00000020.bin" "$part/model_00000020.bin"; then
    row PASS "$name" "main.log and the step-20 model bit-identical to the uninterrupted run"
  elif [ "$exact" = 0 ] && [ "$(grep '^s:10 trl' "$full/main.log" | cut -d' ' -f2)" = \
    "$(grep '^s:10 trl' "$part/main.log" | cut -d' ' -f2)" ] && awk -v d="$diff" 'BEGIN { exit !(d + 0 <= 1e-4) }'; then
    row PASS "$name" "step 10 identical, then losses within $diff of the uninterrupted run (bar 1e-4)"
  else
    row FAIL "$name" "differs from the uninterrupted run: losses max rel $diff, step-20 model $(cmp -s \
      "$full/model_00000020.bin" "$part/model_00000020.bin" && echo same || echo differs)"
  fi
}
# d12_twice NAME [VAR=VALUE...]: the d12 run twice from the same seed, in train_d12_twice_1 and
# train_d12_twice_2, at most 60 s each; one row: PASS when main.log (less the mfu figures, which
# are timings) and the step-20 model are bit-identical.
d12_twice() {
  local name=$1 first=$logs/train_d12_twice_1 second=$logs/train_d12_twice_2 rc run model=differs
  shift
  for run in "$first" "$second"; do
    limited 60 "$run.log" env "$@" "$bin/train_gpt2cu-bf16" -i "$corpus/corpus_train_*.bin" "${d12[@]}" -o "$run"
    rc=$?
    if [ "$rc" -ne 0 ]; then
      row FAIL "$name" "$(status_text "$rc" "$run.log")"
      return 1
    fi
  done
  cmp -s "$first/model_00000020.bin" "$second/model_00000020.bin" && model=same
  if [ "$model" = same ] && cmp -s <(without_mfu "$first/main.log") <(without_mfu "$second/main.log"); then
    row PASS "$name" "main.log and the step-20 model bit-identical over the two runs"
  else
    row FAIL "$name" "the two runs differ: losses max rel $(max_rel_diff "$first/main.log" "$second/main.log"), step-20 model $model"
    return 1
  fi
}
if [ -n "$corpus" ]; then
  attention=${attention_env:+fallback attention}
  wanted correctness && d12_run "train d12 20 steps, B=16${attention:+, $attention}" train_d12 "${attention_env[@]}"
  if wanted resume; then
    # The correctness step's run, when it ran (failed, it has no checkpoint, which the resume says).
    wanted correctness || d12_run "train d12 20 steps, B=16${attention:+, $attention}" train_d12 "${attention_env[@]}"
    if [ ${#attention_env[@]} -eq 0 ]; then
      d12_resume "resume d12 at step 10, cuDNN attention" train_d12 0
      # The timed GEMM search (the default) may choose other algorithms in another run: the same
      # bits take the heuristic's (or a checkpoint's table, as the resume above).
      d12_twice "same seed twice, LLMC_CUDNN_BACKWARD=deterministic LLMC_GEMM_SEARCH=heuristic" \
        LLMC_CUDNN_BACKWARD=deterministic LLMC_GEMM_SEARCH=heuristic
      d12_run "train d12 20 steps, B=16, fallback attention" train_d12_fallback LLMC_ATTENTION=fallback &&
        d12_resume "resume d12 at step 10, fallback attention" train_d12_fallback 1 LLMC_ATTENTION=fallback
    else
      # With cuDNN's parity failed, train_d12 already ran with the fallback attention.
      d12_resume "resume d12 at step 10, fallback attention" train_d12 1 "${attention_env[@]}"
    fi
  fi
  rm -f "$logs"/train_d12*/*.bin
fi
wanted memcheck && sanitizer_rows memcheck 120
[ -n "$corpus" ] && wanted ranks && multi_rank_rows

# ---- 3. against llm.c ----
B=64
T=1024
init=build/gpu-session-init-d12.bf16.bin  # 250 MB: kept out of the logs
rc=0
if wanted llmc || wanted sweep || wanted kernels; then
  limited 60 "$logs/init.log" "$python" dev/pytorch/bench_gpt2.py --config d12 --write-init "$init" --init-bf16 \
    --init-only
  rc=$?
fi
if [ "$rc" -ne 0 ]; then
  row FAIL "initial weights d12 (bench_gpt2.py)" "$(status_text "$rc" "$logs/init.log"); runs below start from -e d12"
  init=d12
fi
# llm.c's train_gpt2cu, in the order of the header's step 3; `llmc` stays empty when there is none,
# its row saying why.
llmc=""
llmc_snapshots=""
for d in "$dist/llmc/snapshots" "${LLMC_SNAPSHOTS:-../shared/external}"; do
  if ls "$d"/llm.c-*.tar.gz >/dev/null 2>&1; then llmc_snapshots=$d; break; fi
done
if wanted llmc && [ -n "$llmc_dir" ]; then
  cc=$(gpu_compute_cap)
  limited 300 "$logs/llmc_build.log" env VS_LLMC_BUILD_ONLY=1 VS_LLMC_WORK="$root/build/gpu-local/vs_llmc" \
    GPU_COMPUTE_CAPABILITY="$cc" bash dev/bench/vs_llmc.sh "$llmc_dir"
  rc=$?
  if [ "$rc" -eq 0 ]; then
    llmc=build/gpu-local/vs_llmc/llm.c/train_gpt2cu
    llmc_commit=$(cat build/gpu-local/vs_llmc/llm.c/COMMIT)
    row PASS "llm.c binary" "built here for sm_$cc from LLMC_DIR=$llmc_dir (llm.c $llmc_commit)"
  else
    row FAIL "llm.c binary" "building LLMC_DIR=$llmc_dir: $(status_text "$rc" "$logs/llmc_build.log")"
  fi
elif wanted llmc; then
  # The bundle's, when it starts here: a flag without its value gets its usage text (the loader
  # found every library).
  why="no llm.c in the bundle $dist"
  if [ -x "$dist/llmc/train_gpt2cu" ]; then
    timeout 30 "$dist/llmc/train_gpt2cu" -x >"$logs/llmc_probe.log" 2>&1
    if grep -q '^Usage:' "$logs/llmc_probe.log"; then
      llmc=$dist/llmc/train_gpt2cu
      row PASS "llm.c binary" "prebuilt bundle $dist/llmc (llm.c $llmc_commit)"
    else
      why="the bundle's did not start: $(tail -n 1 "$logs/llmc_probe.log")"
    fi
  fi
  if [ -z "$llmc" ] && [ -n "$llmc_snapshots" ]; then
    cc=$(gpu_compute_cap)
    from="the snapshots in $llmc_snapshots"
    [ "$llmc_snapshots" = "$dist/llmc/snapshots" ] && from="the bundle's snapshots"
    rm -rf build/gpu-local/external  # these snapshots, not what an earlier build unpacked
    limited 300 "$logs/llmc_build.log" env LLMC_SNAPSHOTS="$llmc_snapshots" LLMC_EXTERNAL=build/gpu-local/external \
      LLMC_WORK=build/gpu-local/vs_llmc GPU_COMPUTE_CAPABILITY="$cc" bash scripts/llmc_snapshot.sh build/gpu-local/llmc
    rc=$?
    if [ "$rc" -eq 0 ]; then
      llmc=build/gpu-local/llmc/train_gpt2cu
      llmc_commit=$(cat build/gpu-local/llmc/COMMIT)
      row PASS "llm.c binary" "built here for sm_$cc from $from ($why)"
    else
      row FAIL "llm.c binary" "$why; building it here from $from: $(status_text "$rc" "$logs/llmc_build.log")"
    fi
  elif [ -z "$llmc" ]; then
    row SKIP "vs llm.c" "no llm.c to compare with ($why): LLMC_DIR=~/llm.c, a checkout of github.com/karpathy/llm.c, builds one here"
  fi
fi
name="vs llm.c $llmc_commit: d12 B=$B T=$T"
if ! wanted llmc || [ -z "$llmc" ]; then :
elif [ -z "$corpus" ]; then
  row FAIL "$name" "$corpus_missing"
else
  left=$((budget - SECONDS))
  # vs_llmc.sh's own budget: what this step's limit leaves after the script's start and end.
  vs_budget=$(((left < 200 ? left : 200) - 10))
  # d12 at B=64, llm.c's fastest as vs_llmc.sh defines it, no extra setting of ours: whatever the caller's
  # environment says.
  limited 200 "$logs/vs_llmc.log" env -u VS_LLMC_FASTEST -u VS_LLMC_OURS_EXTRA_NAME "${attention_env[@]}" \
    VS_LLMC_MODEL=d12 VS_LLMC_B="$B" VS_LLMC_OURS_EXTRA= VS_LLMC_OUT= VS_LLMC_THEIRS="$llmc" \
    VS_LLMC_OURS="$bin/train_gpt2cu-bf16" VS_LLMC_INIT="$([ "$init" != d12 ] && echo "$init")" \
    VS_LLMC_TRAIN="$(cd "$corpus" && pwd)/corpus_train_*.bin" VS_LLMC_VAL="$(cd "$corpus" && pwd)/corpus_val_*.bin" \
    VS_LLMC_STEPS=30 VS_LLMC_WARMUP=10 VS_LLMC_ROUNDS=2 VS_LLMC_BUDGET=$((vs_budget > 0 ? vs_budget : 1)) \
    VS_LLMC_WORK="$root/$logs/vs_llmc" bash dev/bench/vs_llmc.sh
  rc=$?
  if [ "$rc" -eq 0 ]; then
    # One row per pair (ours defaults vs llm.c defaults, vs llm.c fastest), then each setting's figures.
    while read -r line; do row PASS "$name" "$line"; done < <(grep ' vs llm\.c ' "$logs/vs_llmc.log")
    while read -r line; do row INFO "  $name" "$line"; done < <(grep ' ms/step ' "$logs/vs_llmc.log")
  else
    row FAIL "$name" "$(status_text "$rc" "$logs/vs_llmc.log")"
  fi
fi

# ---- 4. our settings ----
# NAME|VARIABLES|FLAGS, the baseline (the defaults) first. Then every other value of every speed switch
# (llmc/cuda/speed_switches.def), one at a time, at -r 0: no switch allows less recompute, some allow
# no more (LLMC_GELU=epilogues), so they compare with the -r 0 row. CUDA graphs save host launch time,
# which weighs most where micro-steps are short: LLMC_CUDA_GRAPHS=on again at -b 8 (-d keeps B*T
# tokens a step, 8 micro-steps), beside -b 8 without it. Then FP8, and the switches that act only
# with it (LLMC_FP8_*), which compare with its first row.
settings=("defaults (-r auto)||" "-r 0||-r 0" "-r 2||-r 2" "-r 1||-r 1")
fp8_settings=()
while read -r variable values; do
  IFS='|' read -r -a choices <<<"$values"
  for value in "${choices[@]:1}"; do
    case $variable in
      LLMC_FP8_*) fp8_settings+=("--fp8 1 $variable=$value|$variable=$value|--fp8 1") ;;
      *) settings+=("-r 0 $variable=$value|$variable=$value|-r 0") ;;
    esac
  done
done < <(speed_switch_rows)
settings+=("-r 0 -b 8||-r 0 -b 8" "-r 0 -b 8 LLMC_CUDA_GRAPHS=on|LLMC_CUDA_GRAPHS=on|-r 0 -b 8"
  "LLMC_ATTENTION=fallback|LLMC_ATTENTION=fallback|-r 1")
# FP8 matmuls (docs/cuda-trainer.md "FP8 matmuls"): with the defaults and at -r 1 (FP8 runs the GELU
# as kernels, which write the FP8 copies, so it takes no GELU epilogues), to compare with the
# defaults' and the -r 1 rows; then each FP8 switch alone and every FP8 switch on at once.
settings+=("--fp8 1||--fp8 1" "-r 1 --fp8 1||-r 1 --fp8 1" "${fp8_settings[@]}"
  "--fp8 1 every FP8 switch on|$(fp8_switches_on_env)|--fp8 1")
sweep_steps=20
sweep_runs=()
if [ -n "$corpus" ] && wanted sweep; then
  for s in "${settings[@]}"; do
    IFS='|' read -r sname svars sflags <<<"$s"
    slog="$logs/sweep_$(tr -c 'a-zA-Z0-9\n' '_' <<<"$sname").log"
    # shellcheck disable=SC2086
    mem=$(run_with_memory 45 "$slog" env "${attention_env[@]}" $svars "$bin/train_gpt2cu-bf16" -e "$init" \
      -i "$corpus/corpus_train_*.bin" -b $B -t $T -d $((B * T)) -x $sweep_steps -l 6e-4 -u 0 -q 1.0 -c 0.1 -v 0 -s 0 \
      -sh 0 $sflags)
    sweep_runs+=("$sname=$slog:${mem:-0}")
  done
  PYTHONPATH=scripts "$python" scripts/gpu_session_report.py sweep --tokens-per-step $((B * T)) --warmup 5 \
    --steps $sweep_steps "${sweep_runs[@]}" >"$logs/sweep.txt" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ]; then row FAIL "settings d12 B=$B" "$(tail -n 1 "$logs/sweep.txt")"
  else
    while read -r line; do
      status=PASS
      grep -q 'failed or fewer' <<<"$line" && status=FAIL
      row "$status" "setting d12 B=$B${attention_env:+ (fallback attention)}" "$line"
    done <"$logs/sweep.txt"
  fi
fi

# ---- 5. where the time goes ----
# The trainer's own table first (LLMC_PROFILE=on: 4 steps, the first the warm-up), its summary line
# and the 15 names with the most time, then ncu's view of the kernels.
name="LLMC_PROFILE=on, d12 B=$B, 3 steps"
if wanted kernels && [ -n "$corpus" ]; then
  limited 45 "$logs/profile.log" env "${attention_env[@]}" LLMC_PROFILE=on "$bin/train_gpt2cu-bf16" -e "$init" \
    -i "$corpus/corpus_train_*.bin" -b $B -t $T -d $((B * T)) -x 4 -v 0 -s 0 -sh 0
  rc=$?
  if [ "$rc" -eq 0 ] && grep -q '^profile: [0-9]* step(s) after' "$logs/profile.log"; then
    grep '^profile: ' "$logs/profile.log" | grep -v '^profile: *ms/step' | head -n 16 | sed 's/^profile: *//' \
      >"$logs/profile.txt"
    while read -r line; do row INFO "$name" "$line"; done <"$logs/profile.txt"
  else
    row FAIL "$name" "$(status_text "$rc" "$logs/profile.log") (no profile: table)"
  fi
fi
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
name="kernels under ncu, d12 B=$B, 3 steps"
if ! wanted kernels; then :
elif [ -z "$ncu" ]; then row SKIP "$name" "ncu not found"
elif [ -n "$corpus" ]; then
  limited 90 "$logs/ncu.log" env "${attention_env[@]}" "$ncu" --log-file "$logs/ncu.csv" --clock-control none \
    --metrics gpu__time_duration.sum --csv --print-units base --print-kernel-base function \
    "$bin/train_gpt2cu-bf16" -e "$init" -i "$corpus/corpus_train_*.bin" \
    -b $B -t $T -d $((B * T)) -x 3 -v 0 -s 0 -sh 0
  rc=$?
  if PYTHONPATH=scripts "$python" scripts/gpu_session_report.py kernels --steps 3 --top 15 "$logs/ncu.csv" \
    >"$logs/kernels.txt" 2>&1; then
    [ "$rc" -eq 0 ] || echo "(ncu: $(status_text "$rc" "$logs/ncu.log"))" >>"$logs/kernels.txt"
    while read -r line; do row INFO "$name" "$line"; done <"$logs/kernels.txt"
  else
    row FAIL "$name" "$(status_text "$rc" "$logs/ncu.log"); $(tail -n 1 "$logs/kernels.txt")"
  fi
fi

# ---- 6. d48 ----
if wanted d48; then
  name="d48 (1.5B), T=$T"
  limited 30 "$logs/d48_plan.log" "$bin/train_gpt2cu-bf16" --dry-run 1 -e d48 -b 128 -t $T -d $((128 * T))
  rc=$?
  d48_b=$(sed -n 's/^ *largest -b that fits: \([0-9]*\).*/\1/p' "$logs/d48_plan.log" | head -n 1)
  grep -q '^fits:' "$logs/d48_plan.log" && d48_b=128
  if [ -z "$d48_b" ] || [ "$d48_b" -lt 1 ]; then
    row FAIL "$name" "the memory plan gave no -b ($(status_text "$rc" "$logs/d48_plan.log"))"
  elif [ -n "$corpus" ]; then
    mem=$(run_with_memory 120 "$logs/d48.log" env "${attention_env[@]}" "$bin/train_gpt2cu-bf16" -e d48 \
      -i "$corpus/corpus_train_*.bin" -b "$d48_b" -t $T -d $((d48_b * T)) -x 8 -l 1e-4 -u 0 -v 0 -s 0 -sh 0)
    rc=$?
    if [ "$rc" -eq 0 ] && figures=$(PYTHONPATH=scripts "$python" scripts/gpu_session_report.py run \
      --tokens-per-step $((d48_b * T)) --warmup 3 "$logs/d48.log" "${mem:-0}"); then
      row PASS "$name, -b $d48_b (the plan's largest)" "$figures"
    else
      row FAIL "$name, -b $d48_b (the plan's largest)" "$(status_text "$rc" "$logs/d48.log")"
    fi
  fi
fi

# ---- 7. reliability ----
wanted reliability && reliability_rows

# ---- 8. kernel checks, with what is left ----
if wanted devcuda; then
  # shellcheck disable=SC2046
  devcuda_row 600 $(devcuda_benches)
fi

# ---- summary ----
{
  echo "== gpu-session: $gpu | ours $commit | llm.c $llmc_commit | ${SECONDS}s of a ${budget}s budget | logs: $logs"
  printf '%s\n' "${rows[@]}"
  echo "gpu-session: $(printf '%s\n' "${rows[@]}" | grep -c '^PASS') passed, $failed failed," \
    "$(printf '%s\n' "${rows[@]}" | grep -c '^SKIP') skipped ($gpu, ours $commit)"
} >"$logs/summary.txt"
# GPU_SESSION_OUT: this run's files only (a main log an earlier run left there is removed).
main_logs=(test_gpt2cu-bf16.log vs_llmc.log sweep.txt kernels.txt d48.log)
(cd "$out_dir" && rm -f summary.txt gpu-session-logs.tgz "${main_logs[@]}")
cp "$logs/summary.txt" "$out_dir/"
for f in "${main_logs[@]}"; do
  [ -f "$logs/$f" ] && cp "$logs/$f" "$out_dir/"
done
tar czf "$out_dir/gpu-session-logs.tgz" -C "$(dirname "$logs")" --exclude='*.bin' "$(basename "$logs")"
echo "gpu-session: the summary, the main logs and gpu-session-logs.tgz (all the logs) in $out_dir"
echo
cat "$logs/summary.txt"
[ "$failed" -eq 0 ]
