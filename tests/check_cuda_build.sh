#!/usr/bin/env bash
# Compiles every CUDA target without a GPU and fails on any warning: train_gpt2cu and test_gpt2cu in
# BF16 and FP32 for sm_80 and sm_90a, and the dev/cuda kernel benchmarks for sm_90a. Then runs the
# bf16 train_gpt2cu's --dry-run, which needs no GPU (tests/lib/dry_run_checks.sh).
# Skips (exit 77, "SKIP: nvcc not found", counted as skipped by tests/run_all.sh) only when there is
# no nvcc.
#
# The trainer is built in its own dir, build/cuda-check, with CUDA_WERROR=1: every object there
# was compiled with warnings as errors, so an incremental run that compiles nothing still proves
# the whole build is clean. dev/cuda's benchmarks are built the same way in build/cuda-check/dev_cuda.
set -u
cd "$(dirname "$0")/.." || exit 1

nvcc=${NVCC:-}
if [ -z "$nvcc" ]; then
  if command -v nvcc >/dev/null 2>&1; then nvcc=$(command -v nvcc)
  elif [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc
  fi
fi
if [ -z "$nvcc" ]; then
  echo "SKIP: nvcc not found (no CUDA toolkit: the CUDA targets were not compiled)"
  exit 77
fi

log=build/test-logs/cuda_build_output.log
mkdir -p build/test-logs
: >"$log"
failed=0
built=0
record() {  # record NAME EXIT OUTPUT: logs a finished build and fails it on an error or a warning
  local name=$1 rc=$2 out=$3
  printf '%s\n' "== $name" "$out" >>"$log"
  local warnings
  # "warning:" (gcc), "warning #N-D:" (nvcc), "ptxas warning :"; not the "-Werror all-warnings" flag.
  warnings=$(grep -Eci 'warning ?[:#]' <<<"$out")
  if [ "$rc" -ne 0 ] || [ "$warnings" -ne 0 ]; then
    echo "FAIL  $name (exit $rc, $warnings warning lines)"
    grep -Ei -m 20 -B2 -A2 'warning ?[:#]|error' <<<"$out" | sed 's/^/      /'
    failed=$((failed + 1))
  else
    echo "ok    $name"
    built=$((built + 1))
  fi
}
step() {  # step NAME COMMAND...: runs a build and records it
  local name=$1; shift
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  record "$name" "$rc" "$out"
}

jobs=${CUDA_BUILD_JOBS:-2}
check_build=build/cuda-check
for precision in BF16 FP32; do
  step "train_gpt2cu + test_gpt2cu ($precision, -Werror)" \
    make --no-print-directory -j"$jobs" NVCC="$nvcc" BUILD="$check_build" CUDA_WERROR=1 PRECISION=$precision \
    cuda-binaries
done
# dev/cuda through its own Makefile, but with its objects in build/cuda-check/dev_cuda and -Werror:
# the CPU references and llmc/cuda/*.cu archives, then each benchmark compiled and linked there too
# (same flags as dev/cuda/Makefile), skipped only when its object is newer than all it includes.
dev=$check_build/dev_cuda
mkdir -p "$dev/bin"
# The CPU references are the trainer's host objects of llmc/cpu/, already compiled above with
# dev/cuda's flags (-O3 -march=x86-64-v3) and -Werror: archived, not compiled again.
step "dev/cuda libraries (-Werror)" \
  make --no-print-directory -j"$jobs" -C dev/cuda OBJDIR="$PWD/$dev" NVCC="$nvcc -Werror all-warnings -Xcompiler -Werror" \
  CXX="${CXX:-g++} -Werror" REF_OBJS="$(echo "$PWD/$check_build"/cuda-host/llmc/cpu/*.o)" \
  "$PWD/$dev/libcpu_reference.a" "$PWD/$dev/libllmc_cuda.a"
stale() {  # stale OBJ DEPFILE: true when OBJ is missing or older than a file DEPFILE lists
  [ -f "$1" ] && [ -f "$2" ] || return 0
  local f
  for f in $(sed -e 's/\\$//' -e 's/^[^:]*://' "$2"); do
    [ "$f" -nt "$1" ] && return 0
  done
  return 1
}
# The benchmarks are checked for sm_90a, the GPU our sessions run them on; every kernel they share
# with the trainer was compiled for sm_80 too in the trainer builds above, and `make -C dev/cuda`
# still builds both architectures.
archs="-gencode arch=compute_90a,code=sm_90a"
benchmark() {  # benchmark NAME: compiles and links dev/cuda/NAME.cu; a failed compile leaves no object
  local obj=$dev/$1.o
  # shellcheck disable=SC2086
  $nvcc -std=c++17 -O3 $archs -I. -Xcompiler -Wall,-Wextra,-fopenmp -Werror all-warnings -Xcompiler -Werror \
    -MMD -MP -MF "$obj.d" -c "dev/cuda/$1.cu" -o "$obj" &&
    $nvcc $archs "$obj" -o "$dev/bin/$1" "$dev/libllmc_cuda.a" "$dev/libcpu_reference.a" -lfmt -lcublasLt -lcublas \
      -lcudnn -lgomp || { rm -f "$obj"; return 1; }
}
pending=()
for src in dev/cuda/*.cu; do
  name=$(basename "$src" .cu)
  stale "$dev/$name.o" "$dev/$name.o.d" && pending+=("$name")
done
# Each benchmark is one nvcc process at a time: $jobs of them run side by side, each with its own
# output, recorded in order once the batch is done.
for ((i = 0; i < ${#pending[@]}; i += jobs)); do
  batch=("${pending[@]:i:jobs}")
  pids=()
  for name in "${batch[@]}"; do
    benchmark "$name" >"$dev/$name.out" 2>&1 &
    pids+=($!)
  done
  for k in "${!batch[@]}"; do
    rc=0; wait "${pids[$k]}" || rc=$?
    record "dev/cuda/${batch[$k]} (-Werror)" "$rc" "$(cat "$dev/${batch[$k]}.out")"
  done
done

for p in bf16 fp32; do
  for b in train_gpt2cu test_gpt2cu; do
    [ -x "$check_build/cuda-$p/$b" ] || { echo "FAIL  $check_build/cuda-$p/$b was not built"; failed=$((failed + 1)); }
  done
done
# A dry run needs no GPU: the bf16 trainer just built plans its memory here (a few seconds).
dry_run="not run (no bf16 train_gpt2cu)"
if [ -x "$check_build/cuda-bf16/train_gpt2cu" ]; then
  if out=$(bash tests/lib/dry_run_checks.sh "$check_build/cuda-bf16/train_gpt2cu" 2>&1); then
    echo "ok    train_gpt2cu --dry-run"
  else
    echo "FAIL  train_gpt2cu --dry-run"
    sed 's/^/      /' <<<"$out"
    failed=$((failed + 1))
  fi
  dry_run=$(tail -n 1 <<<"$out")
fi
echo "full compiler output: $log"
if [ "$failed" -ne 0 ]; then
  echo "cuda build: $failed of $((failed + built + 1)) builds and checks failed or warned"
  exit 1
fi
echo "cuda build: $built builds (bf16, fp32 for sm_80 + sm_90a; dev/cuda for sm_90a) warning-free, $(ls "$dev/bin" | wc -l) dev/cuda binaries; $dry_run"
