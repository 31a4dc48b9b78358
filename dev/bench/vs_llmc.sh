#!/usr/bin/env bash
# Our train_gpt2cu side by side with llm.c's, on one GPU: see usage() below.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
caller_dir=$PWD  # relative paths in the environment are the caller's
out_dir=${VS_LLMC_OUT-out/vs_llmc}
[ -z "$out_dir" ] || [[ "$out_dir" == /* ]] || out_dir=$caller_dir/$out_dir
cd "$root" || exit 1

usage() {
  cat <<'EOF'
usage: dev/bench/vs_llmc.sh LLMC_DIR [CUDNN_FRONTEND_DIR]
       VS_LLMC_THEIRS=PATH dev/bench/vs_llmc.sh     (a prebuilt llm.c, e.g. the bundle's)

Builds the train_gpt2cu of an llm.c checkout (github.com/karpathy/llm.c) and times it against ours,
like for like, at these settings:
  llm.c defaults   no -r, no -ge: llm.c's own defaults, -r 1 (the GELU recomputed in the backward)
                   and GELU fusion off (-ge 0);
  llm.c fastest    -r 0 -ge 2 (VS_LLMC_FASTEST below): no recompute, and the GELU and its gradient
                   computed in cuBLASLt's epilogues of the fc GEMMs (forward and backward);
  ours defaults    no LLMC_ variable (each one in the environment is removed for our runs, but
                   LLMC_ATTENTION, the fallback where cuDNN rejects the attention graph: the title
                   names it), no flag but the shared ones below;
  ours EXTRA       with VS_LLMC_OURS_EXTRA only (below): our defaults plus that setting.
Why -r 0 -ge 2 is llm.c's fastest on one GPU (llm.c f1e2ace's train_gpt2.cu and Makefile): -r 0
keeps each layer's GELU output instead of recomputing it (more memory, less work); -ge 2 fuses the
GELU into the forward GEMM's epilogue and its gradient into the backward's (cuBLASLt's GELU_AUX
and DGELU epilogues; llm.c's default leaves it off, and its code notes that cuBLAS's fused GELU
seemed slow before Hopper: on those GPUs, try VS_LLMC_FASTEST='-r 0 -ge 0'). No other flag of
llm.c is faster at one GPU like for like: -z (ZeRO) shards only across processes; -f (TF32) acts on
FP32 builds only; -w 0 drops the fp32 master weights, which changes the arithmetic (ours keeps
them, as llm.c's default does); -a trains on one batch; -sl/-sg (off by default) only add work;
-v, -s, -h and -lg act outside the timed steps. Its Makefile already builds with -O3
--use_fast_math and BF16, and USE_CUDNN=1 (cuDNN attention, its fastest) is what this script builds.

Each round runs every setting once, in the order above in odd rounds and reversed in even ones
(llm.c defaults, ours, llm.c fastest[, ours EXTRA], then [ours EXTRA,] llm.c fastest, ours,
llm.c defaults): llm.c and ours alternate (A B A B) within a round, and over each pair of rounds
every setting's runs sit at the same mean place, so a drift of the GPU's clocks or temperature
over the call weighs on every setting alike (keep VS_LLMC_ROUNDS even). All read the same shards
(data/corpus, `make data`; see VS_LLMC_TRAIN below) in the same order (llm.c's sequential order:
ours -sh 0, and llm.c's train loader made sequential in the copy, see below), with the same shape
and hyperparameters: GPT-2 VS_LLMC_MODEL, B=VS_LLMC_B, T=1024, -d B*T (no gradient accumulation),
lr 6e-4 constant (-u 0 -q 1.0), weight decay 0.1, from the same initial weights when VS_LLMC_INIT
names a model file (else each from its own random init). Prints for each setting: the median
ms/step over the steps after warm-up of all its runs, tokens/s, MFU and peak GPU memory, each
measured one way for all (MFU from our trainer's count, 6N + 6LCT FLOPs per token, against its
table of GPU peaks; memory as nvidia-smi's memory.used sampled every 100 ms), and the losses after
the same steps; then one line per pair of ours and llm.c's settings, e.g.
  ours defaults vs llm.c fastest: N.NNNx tokens/s, memory X GiB vs Y GiB, loss after 40 steps A vs B (+P.PP%)
(the ratio of tokens/s, both peak memories, the losses after the last step and their relative
difference; `grep ' vs llm.c '` lists them). Logs in build/vs_llmc/logs; the summary and the logs
packed (vs_llmc-summary.txt, vs_llmc-logs.tgz) in VS_LLMC_OUT (below).

The checkout is not touched: Makefile, train_gpt2.cu and llmc/ are copied to build/vs_llmc/llm.c
(see VS_LLMC_WORK) and built there with cuDNN attention (USE_CUDNN=1), without NCCL and MPI (one GPU), with
  - CUDA 13's cudaMemAdvise, which takes a cudaMemLocation where llm.c passes a device number;
  - its train loader's shuffle off (permute_train_loader = 0), so that both read the same batches;
  - the frontend linked as ./cudnn-frontend, the only place llm.c's Makefile finds it;
  - -lnvrtc -lcuda, which current cudnn-frontend needs (the toolkit's stub libcuda.so links where
    no driver is installed);
  - a link name for libnvidia-ml (llm.c links it): the toolkit's stub, else the driver's library,
    else an empty stub built here (llm.c calls NVML only when nvml.h is there);
  - cuBLAS and cuDNN from Python wheels where the toolkit lacks them (scripts/cuda_wheels.sh).

CUDNN_FRONTEND_DIR is a cudnn-frontend checkout (github.com/NVIDIA/cudnn-frontend: header-only,
include/cudnn_frontend.h); default $CUDNN_FRONTEND_PATH's parent folder, else
LLMC_DIR/cudnn-frontend or ~/cudnn-frontend (where llm.c's Makefile looks), else a cudnn-frontend
beside LLMC_DIR. Snapshots of both kept inside this repository go in external/ (git-ignored):
  dev/bench/vs_llmc.sh external/llm.c external/cudnn-frontend

Built and run against llm.c f1e2ace651495b74ae22d45d1723443fd00ecd3a (master of 2025-05-10; the
snapshot in ../shared/external, unpacked into external/ by `make gpu-dist`): its Makefile's
USE_CUDNN, CUDNN_FRONTEND_PATH, GPU_COMPUTE_CAPABILITY, NO_MULTI_GPU and NO_USE_MPI;
train_gpt2cu's flags -i -j -e -b -t -d -r -ge -x -l -u -q -c -v -m -s -g, its model descriptors
d12, d24, d48 and its "step N/M | loss ... | X ms |" lines. The summary names the commit of the
checkout it ran (git's, else the snapshot's SNAPSHOT file).

Environment:
  VS_LLMC_MODEL=d12         the model: d12 (124M), d24 (350M) or d48 (1.5B), llm.c's descriptors
  VS_LLMC_B=64              the batch size B of every run; 64 by default at d12 only: at d24 and d48
                            give the largest B that both trainers fit at every setting (ours:
                            train_gpt2cu --dry-run 1 -e d48 -b 64 -t 1024 prints the largest -b
                            that fits; llm.c: try -r 0, its setting that needs the most)
  VS_LLMC_STEPS=40          steps per run
  VS_LLMC_WARMUP=10         first steps of each run left out of the median
  VS_LLMC_ROUNDS=2          rounds (each runs every setting once, see above)
  VS_LLMC_BUDGET=540        seconds for all runs (the build not counted); a run out of time fails
  VS_LLMC_FASTEST='-r 0 -ge 2'  llm.c's flags for "llm.c fastest"
  VS_LLMC_OURS_EXTRA=''     a further setting of ours: words VAR=VALUE go to the environment, the
                            others are flags after the shared ones, e.g. '--fp8 1' or
                            'LLMC_GEMM_SEARCH=timed -r 0'; its name in the summary is
  VS_LLMC_OURS_EXTRA_NAME   (default: VS_LLMC_OURS_EXTRA's text), printed after "ours "
  VS_LLMC_WORK=build/vs_llmc  the folder for the copy, its build and the logs
  VS_LLMC_OUT=out/vs_llmc   the folder for vs_llmc-summary.txt and vs_llmc-logs.tgz (relative to
                            where the script is run; empty: none)
  VS_LLMC_BUILD_ONLY=1      build llm.c's train_gpt2cu and stop: needs no GPU
  VS_LLMC_INIT=FILE         a bf16 (version 5) model file all start from, of VS_LLMC_MODEL's depth
                            (dev/pytorch/bench_gpt2.py --config d12 --write-init FILE --init-bf16
                            --init-only writes one); default: -e VS_LLMC_MODEL
  VS_LLMC_THEIRS=PATH       an llm.c train_gpt2cu already built: no build (its commit is read from
                            COMMIT beside it, which the build writes, when LLMC_DIR is not given)
  VS_LLMC_OURS=PATH         our train_gpt2cu to time (default: the bundle's, build/gpu-local's, or
                            one built now, as `make bench` picks it)
  VS_LLMC_TRAIN=GLOB        train shards (default data/corpus/corpus_train_*.bin), and
  VS_LLMC_VAL=GLOB          val shards (default data/corpus/corpus_val_*.bin): llm.c-format shards
                            of at least B*T+1 tokens each, e.g. FineWeb's (dev/data/fineweb.py)
  GPU_COMPUTE_CAPABILITY=90 the architecture llm.c is built for (default: the GPU's, else 90)
  CCACHE=/usr/bin/ccache    a compiler cache for llm.c's compiles (make gpu-dist passes its own)
EOF
}

die() { echo "vs_llmc: $*" >&2; exit 1; }

case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  "") [ -n "${VS_LLMC_THEIRS:-}" ] || { usage >&2; exit 2; } ;;
esac
[ $# -le 2 ] || { echo "vs_llmc: too many arguments ($#): LLMC_DIR [CUDNN_FRONTEND_DIR]" >&2; exit 2; }

positive_int() {  # positive_int NAME DEFAULT: the environment variable NAME, checked
  local value=${!1:-$2}
  [[ "$value" =~ ^[1-9][0-9]*$ ]] || die "$1='$value' is not a positive whole number"
  echo "$value"
}
steps=$(positive_int VS_LLMC_STEPS 40) || exit 1
warmup=$(positive_int VS_LLMC_WARMUP 10) || exit 1
rounds=$(positive_int VS_LLMC_ROUNDS 2) || exit 1
budget=$(positive_int VS_LLMC_BUDGET 540) || exit 1
[ "$warmup" -lt "$steps" ] || die "VS_LLMC_WARMUP=$warmup leaves none of VS_LLMC_STEPS=$steps steps to time"
model=${VS_LLMC_MODEL:-d12}
case $model in
  d12) B=$(positive_int VS_LLMC_B 64) || exit 1 ;;
  d24 | d48)
    [ -n "${VS_LLMC_B:-}" ] || die "VS_LLMC_MODEL=$model needs VS_LLMC_B: the largest B that both trainers fit at" \
      "every setting (ours: train_gpt2cu --dry-run 1 -e $model -b 64 -t 1024 prints the largest -b that fits)"
    B=$(positive_int VS_LLMC_B "") || exit 1 ;;
  *) die "VS_LLMC_MODEL='$model' is not one of d12, d24, d48" ;;
esac
layers=${model#d}
T=1024
read -r -a fastest <<<"${VS_LLMC_FASTEST-"-r 0 -ge 2"}"
[ ${#fastest[@]} -gt 0 ] || die "VS_LLMC_FASTEST is empty: llm.c's fastest setting needs its flags (default '-r 0 -ge 2')"
# VS_LLMC_OURS_EXTRA: VAR=VALUE words to the environment, the rest flags.
extra_env=()
extra_flags=()
extra_text=${VS_LLMC_OURS_EXTRA:-}
read -r -a words <<<"${extra_text//$'\n'/ }"  # (a value over several lines, too)
for word in "${words[@]}"; do
  if [[ "$word" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; then extra_env+=("$word"); else extra_flags+=("$word"); fi
done
extra_name=${VS_LLMC_OURS_EXTRA_NAME:-${words[*]}}
[ ${#words[@]} -gt 0 ] || [ -z "$extra_name" ] ||
  die "VS_LLMC_OURS_EXTRA_NAME='$extra_name' names no setting: VS_LLMC_OURS_EXTRA is empty"
[ "$extra_name" != defaults ] || die "VS_LLMC_OURS_EXTRA_NAME=defaults: that is the name of ours without VS_LLMC_OURS_EXTRA"

# With VS_LLMC_THEIRS and no LLMC_DIR (a bundle's prebuilt binary), the commit is the one the
# build wrote beside it (COMMIT).
if [ $# -eq 0 ]; then
  commit=$(cat "$(dirname "$VS_LLMC_THEIRS")/COMMIT" 2>/dev/null) || commit="unknown (no COMMIT beside VS_LLMC_THEIRS)"
else
  llmc_dir=$1
  [ -d "$llmc_dir" ] || die "LLMC_DIR '$llmc_dir' is not a directory"
  llmc_dir=$(cd "$llmc_dir" && pwd)
  for f in Makefile train_gpt2.cu llmc; do
    [ -e "$llmc_dir/$f" ] || die "LLMC_DIR '$llmc_dir' is not an llm.c checkout: it has no $f"
  done
  if [ -n "${2:-}" ]; then frontends=("$2")
  elif [ -n "${CUDNN_FRONTEND_PATH:-}" ]; then frontends=("$(dirname "$CUDNN_FRONTEND_PATH")")
  else frontends=("$llmc_dir/cudnn-frontend" "$HOME/cudnn-frontend" "$(dirname "$llmc_dir")/cudnn-frontend"); fi
  frontend=""
  for d in "${frontends[@]}"; do
    if [ -f "$d/include/cudnn_frontend.h" ]; then frontend=$(cd "$d" && pwd); break; fi
  done
  [ -n "$frontend" ] || die "no cudnn-frontend: no include/cudnn_frontend.h in ${frontends[*]}"
  # The commit: git's when LLMC_DIR is the top of a checkout (a snapshot unpacked inside another
  # repository is not), else the snapshot's SNAPSHOT file ("karpathy/llm.c <commit> <date>").
  commit=""
  [ "$(git -C "$llmc_dir" rev-parse --show-toplevel 2>/dev/null)" = "$llmc_dir" ] &&
    commit=$(git -C "$llmc_dir" rev-parse --short=12 HEAD)
  [ -n "$commit" ] || commit=$(awk 'NR == 1 && NF >= 2 { print substr($2, 1, 12) }' "$llmc_dir/SNAPSHOT" 2>/dev/null)
  [ -n "$commit" ] || commit="unknown (neither a git checkout nor a SNAPSHOT file)"
fi
work=${VS_LLMC_WORK:-$root/build/vs_llmc}
mkdir -p "$work" || die "VS_LLMC_WORK '$work': cannot create it"
work=$(cd "$work" && pwd)
logs=$work/logs
# shellcheck source=scripts/cuda_wheels.sh
source scripts/cuda_wheels.sh

# llm_c_copy DEST: Makefile, train_gpt2.cu and llmc/ of the checkout, with CUDA 13's cudaMemAdvise:
# cudaMemAdvise(ptr, bytes, advice, cudaCpuDeviceId) becomes the host location
# cudaMemLocation{cudaMemLocationTypeHost, 0} (CUDA 13 dropped the device-number form).
llm_c_copy() {
  local dest=$1
  rm -rf "$dest"
  mkdir -p "$dest"
  cp -R "$llmc_dir/Makefile" "$llmc_dir/train_gpt2.cu" "$llmc_dir/llmc" "$dest/"
  # llm.c's Makefile looks for the frontend only in ./cudnn-frontend/include and ~/cudnn-frontend/include,
  # whatever CUDNN_FRONTEND_PATH says ("cuDNN not found" otherwise): put it where it looks.
  ln -s "$frontend" "$dest/cudnn-frontend"
  if grep -qE 'cudaMemAdvise\([^)]*struct cudaMemLocation location\)' "$toolkit/include/cuda_runtime_api.h"; then
    local files
    mapfile -t files < <(grep -rl 'cudaMemAdvise(' "$dest" --include='*.cu' --include='*.cuh' --include='*.h' \
      --include='*.cpp')
    [ ${#files[@]} -eq 0 ] || sed -i -E \
      's/cudaMemAdvise\(([^;]*), *cudaCpuDeviceId\)/cudaMemAdvise(\1, cudaMemLocation{cudaMemLocationTypeHost, 0})/g' \
      "${files[@]}"
    patched=$(grep -rho 'cudaMemLocation{cudaMemLocationTypeHost, 0}' "$dest" | wc -l)
  else
    patched=0
  fi
  # llm.c shuffles its train windows with its own generator; ours cannot draw the same order, so
  # both read llm.c's sequential order (ours -sh 0) and the losses after each step compare.
  sed -i -E 's/(int permute_train_loader = )[^;]*;/\10;/' "$dest/train_gpt2.cu"
  grep -q 'int permute_train_loader = 0;' "$dest/train_gpt2.cu" ||
    die "$llmc_dir/train_gpt2.cu has no 'int permute_train_loader = ...;' to turn the shuffle off"
}

# llm_c_link_dir DIR: link names (libX.so) for what llm.c links and the system's linker does not
# find: cuBLAS and cuDNN from the wheels, libnvidia-ml; sets link_flags (for nvcc) with the wheels'
# include folders, -L DIR and the toolkit's stubs.
llm_c_link_dir() {
  local dir=$1 arg path includes
  rm -rf "$dir"
  mkdir -p "$dir"
  cuda_wheel_make_args || die "cuBLAS or cuDNN found nowhere (above)"
  link_flags=()
  for arg in "${wheel_args[@]}"; do
    case $arg in
      CUDA_LIB_INCLUDES=*) read -r -a includes <<<"${arg#CUDA_LIB_INCLUDES=}"; link_flags+=("${includes[@]}") ;;
      *_LIBS=*)
        for path in ${arg#*=}; do
          [ "$path" = -Xlinker ] || ln -sf "$path" "$dir/$(basename "$path" | sed -E 's/\.so\..*/.so/')"
        done ;;
    esac
  done
  local stubs=$toolkit/lib64/stubs
  if [ ! -e "$stubs/libnvidia-ml.so" ]; then
    local driver
    driver=$( (ldconfig -p 2>/dev/null || /sbin/ldconfig -p) | sed -n 's/.*libnvidia-ml\.so\.1 .*=> //p' | head -n 1)
    if [ -n "$driver" ]; then ln -sf "$driver" "$dir/libnvidia-ml.so"
    else
      "${CC:-gcc}" -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o "$dir/libnvidia-ml.so" -x c /dev/null ||
        die "could not build the libnvidia-ml link stub"
    fi
  fi
  link_flags+=("-L$dir")
  [ -d "$stubs" ] && link_flags+=("-L$stubs")
}

if [ -n "${VS_LLMC_THEIRS:-}" ]; then
  [ -x "$VS_LLMC_THEIRS" ] || die "VS_LLMC_THEIRS '$VS_LLMC_THEIRS' is not an executable"
  theirs=$(cd "$(dirname "$VS_LLMC_THEIRS")" && pwd)/$(basename "$VS_LLMC_THEIRS")
else
  cc=${GPU_COMPUTE_CAPABILITY:-}
  [ -n "$cc" ] || cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '.')
  cc=${cc:-90}
  toolkit=$(cuda_toolkit_root) || die "no nvcc: the CUDA toolkit is needed to build llm.c"
  copy=$work/llm.c
  llm_c_copy "$copy"
  llm_c_link_dir "$work/lib"
  echo "vs_llmc: building llm.c $commit for sm_$cc in $copy (cudaMemAdvise calls patched: $patched)"
  if ! make -j"$(nproc)" -C "$copy" train_gpt2cu USE_CUDNN=1 CUDNN_FRONTEND_PATH="$frontend/include" \
    GPU_COMPUTE_CAPABILITY="$cc" NO_MULTI_GPU=1 NO_USE_MPI=1 NVCC="${CCACHE:+$CCACHE }$toolkit/bin/nvcc ${link_flags[*]}" \
    NVCC_LDLIBS="-lnvrtc -lcuda" >"$work/build.log" 2>&1 || [ ! -x "$copy/train_gpt2cu" ]; then
    tail -n 30 "$work/build.log" >&2
    die "building llm.c's train_gpt2cu failed (log: $work/build.log)"
  fi
  theirs=$copy/train_gpt2cu
  echo "$commit" >"$copy/COMMIT"
  echo "vs_llmc: built $theirs (llm.c $commit; log: $work/build.log)"
fi
[ "${VS_LLMC_BUILD_ONLY:-0}" = 1 ] && exit 0

# ---- the runs: need a GPU ----
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  die "needs a GPU (nvidia-smi lists none); nothing was measured (VS_LLMC_BUILD_ONLY=1 builds only)"
fi
train=${VS_LLMC_TRAIN:-$root/data/corpus/corpus_train_*.bin}
val=${VS_LLMC_VAL:-$root/data/corpus/corpus_val_*.bin}
for glob in "$train" "$val"; do
  # shellcheck disable=SC2086
  ls $glob >/dev/null 2>&1 ||
    die "no shards match $glob: run \`make data\`, or set VS_LLMC_TRAIN/VAL"
done
# shellcheck source=scripts/gpu_env.sh
source scripts/gpu_env.sh
# shellcheck source=scripts/gpu_bench_lib.sh
source scripts/gpu_bench_lib.sh
if [ -n "${VS_LLMC_OURS:-}" ]; then
  [ -x "$VS_LLMC_OURS" ] || die "VS_LLMC_OURS '$VS_LLMC_OURS' is not an executable"
  trainer=$VS_LLMC_OURS
else
  bench_trainer vs_llmc || exit 1
fi
ours=$(cd "$(dirname "$trainer")" && pwd)/$(basename "$trainer")
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)

rm -rf "$logs"
mkdir -p "$logs"
init=$model
if [ -n "${VS_LLMC_INIT:-}" ]; then
  init=$VS_LLMC_INIT
  [[ "$init" == /* ]] || init=$caller_dir/$init
  [ -f "$init" ] || die "VS_LLMC_INIT '$VS_LLMC_INIT' is not a file"
  # The model file's header: int32 words, the 5th the number of layers.
  init_layers=$(od -An -t d4 -j 16 -N 4 "$init" | tr -d ' ')
  [ "$init_layers" = "$layers" ] || die "VS_LLMC_INIT '$VS_LLMC_INIT' has ${init_layers:-no} layers," \
    "VS_LLMC_MODEL=$model has $layers"
fi
shape=(-i "$train" -j "$val" -e "$init" -b "$B" -t "$T" -d $((B * T)) -x "$steps" -l 6e-4 -u 0 -q 1.0 -c 0.1)
# llm.c evaluates and samples at the last step whatever -v and -s say: one val batch, 16 tokens.
# Ours does neither (0 = never). Neither is inside a step's time.
theirs_flags=(-v 1000000 -m 1 -s 1000000 -g 16)
ours_flags=(-v 0 -s 0 -sh 0)
# Every run without the caller's LLMC_ variables (our speed switches, the profiler; llm.c reads
# none), but LLMC_ATTENTION.
clean_env=()
for v in $(compgen -e | grep '^LLMC_' | grep -vx LLMC_ATTENTION); do clean_env+=(-u "$v"); done
settings=("llm.c defaults" "ours defaults" "llm.c fastest")
slugs=(llmc_defaults ours_defaults llmc_fastest ours_extra)  # the logs' names
[ -z "$extra_name" ] || settings+=("ours $extra_name")
# run_setting INDEX LOG: that setting's run, its peak MiB on stdout. Settings 0 and 2 are llm.c's
# (2 with its fastest flags), 1 and 3 ours (3 with the extra setting).
run_setting() {
  local more_env=() more_flags=()
  [ "$1" = 2 ] && more_flags=("${fastest[@]}")
  [ "$1" = 3 ] && more_env=("${extra_env[@]}") && more_flags=("${extra_flags[@]}")
  if [ "$1" = 0 ] || [ "$1" = 2 ]; then
    # From its build folder: llm.c looks for gpt2_tokenizer.bin in its working directory.
    (cd "$(dirname "$theirs")" && run_with_memory "$run_limit" "$2" env "${clean_env[@]}" "$theirs" "${shape[@]}" \
      "${theirs_flags[@]}" "${more_flags[@]}")
  else
    run_with_memory "$run_limit" "$2" env "${clean_env[@]}" "${more_env[@]}" "$ours" "${shape[@]}" "${ours_flags[@]}" \
      "${more_flags[@]}"
  fi
}
run_limit=$([ "$model" = d12 ] && echo 200 || echo 600)
SECONDS=0
failed=0
run_logs=()
memories=()
for round in $(seq 1 "$rounds"); do
  order=$(seq 0 $((${#settings[@]} - 1)))
  [ $((round % 2)) -eq 1 ] || order=$(seq $((${#settings[@]} - 1)) -1 0)
  for s in $order; do
    log=$logs/${slugs[$s]}_$round.log
    echo "== round $round: ${settings[$s]}"
    mem=$(run_setting "$s" "$log")
    rc=$?
    if [ "$rc" -ne 0 ]; then
      echo "vs_llmc: the ${settings[$s]} run of round $round failed (exit $rc):"
      tail -n 15 "$log"
      failed=1
    fi
    run_logs+=("$s:$log")
    memories+=("${mem:-0}")
  done
done
[ "$failed" -eq 0 ] || die "a run failed; logs in $logs"
legend="llm.c defaults: no -r, no -ge; llm.c fastest: ${fastest[*]}; ours defaults: no LLMC_ variable, no speed flag"
[ -z "$extra_name" ] || legend+="; ours $extra_name: ${words[*]}"
[ -z "${LLMC_ATTENTION:-}" ] || legend+="; ours with LLMC_ATTENTION=$LLMC_ATTENTION"
PYTHONPATH=scripts python3 dev/bench/vs_llmc_summary.py --tokens-per-step $((B * T)) --warmup "$warmup" \
  --steps "$steps" \
  --title "GPT-2 $model (${VS_LLMC_INIT:+same init }$(basename "$init")), B=$B T=$T, -d $((B * T)) on $gpu; llm.c $commit" \
  --legend "$legend" --settings "${settings[@]}" --runs "${run_logs[@]}" --memory-mib "${memories[@]}" |
  tee "$logs/summary.txt"
status=${PIPESTATUS[0]}
if [ -n "$out_dir" ]; then
  mkdir -p "$out_dir" || die "VS_LLMC_OUT: cannot create the folder $out_dir"
  tar czf "$out_dir/vs_llmc-logs.tgz" -C "$work" logs
  cp "$logs/summary.txt" "$out_dir/vs_llmc-summary.txt"
  echo "vs_llmc: the summary and the logs in $out_dir"
fi
exit "$status"
