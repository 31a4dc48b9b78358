#!/usr/bin/env bash
# Compiles every CUDA target without a GPU and fails on any warning: train_gpt2cu and test_gpt2cu in
# BF16 and FP32 for sm_80 (with its PTX) and sm_90a, the BF16 pair again without cuDNN, NCCL and MPI
# (USE_CUDNN=0 NO_MULTI_GPU=1, in build/no-mpi: its binaries need none of the three libraries, no
# object includes their headers, its --dry-run plans two ranks through host staging), and the
# dev/cuda kernel benchmarks for sm_80 and sm_90a.
# Then runs the bf16 train_gpt2cu's --dry-run, which needs no GPU (tests/lib/dry_run_checks.sh), and the build
# where cuBLAS, cuDNN and NCCL are only Python wheels (scripts/cuda_wheels.sh) on a fake wheel tree.
# Skips (exit 77, "SKIP: nvcc not found", counted as skipped by tests/run_all.sh) only when there is
# no nvcc.
#
# Everything is built with CUDA_WERROR=1, whose objects have folders of their own
# (build/cuda-bf16-werror, build/dev_cuda-werror, ...): every object there was compiled with warnings
# as errors, so an incremental run that compiles nothing still proves the whole build clean. These
# are the binaries that check_gpu_dist.sh bundles: nvcc compiles each object once for both checks.
set -u
cd "$(dirname "$0")/../.." || exit 1

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
  # "warning:" (gcc), "warning #N-D:" (nvcc), "ptxas warning :"; not the "-Werror=all-warnings" flag.
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

jobs=2
werror=(NVCC="$nvcc" CUDA_WERROR=1)
for precision in BF16 FP32; do
  step "train_gpt2cu + test_gpt2cu ($precision, -Werror)" \
    make --no-print-directory -j"$jobs" "${werror[@]}" PRECISION=$precision cuda-binaries
done
# Without cuDNN and NCCL at once: each #if of the two is on in the builds above and off here, and
# neither touches the other (tests/gpu/check_gpu_prereqs.sh checks each one's link line alone); BF16,
# the precision that has cuDNN's attention. About a minute of nvcc.
step "train_gpt2cu + test_gpt2cu (BF16, USE_CUDNN=0 NO_MULTI_GPU=1, -Werror)" \
  make --no-print-directory -j"$jobs" "${werror[@]}" PRECISION=BF16 USE_CUDNN=0 NO_MULTI_GPU=1 cuda-binaries
# dev/cuda's benchmarks as gpu-dist carries them (sm_80 and sm_90a), linked with the CPU references
# compiled above.
step "dev/cuda benchmarks (-Werror)" make --no-print-directory -j"$jobs" "${werror[@]}" dev-cuda
benches=0
for src in dev/cuda/*.cu; do
  if [ -x "${src%.cu}" ]; then benches=$((benches + 1))
  else echo "FAIL  ${src%.cu} was not built"; failed=$((failed + 1)); fi
done

# NO_MULTI_GPU=1 implies NO_USE_MPI=1, which builds in $(BUILD)/no-mpi.
bf16=build/cuda-bf16-werror
variant=build/no-mpi/cuda-bf16-nocudnn-nonccl-werror
for dir in "$bf16" build/cuda-fp32-werror "$variant"; do
  for b in train_gpt2cu test_gpt2cu; do
    [ -x "$dir/$b" ] || { echo "FAIL  $dir/$b was not built"; failed=$((failed + 1)); }
  done
done
# The libraries each bf16 binary loads (readelf's NEEDED: what the loader will look for), and the
# headers the variant's objects were compiled from (their .d files).
needed() { readelf -d "$1" 2>/dev/null | grep -oE 'lib(cudnn|nccl|mpi)[^]]*' | sort -u | paste -sd ' '; }
if [ -x "$variant/train_gpt2cu" ]; then
  headers=$(cat "$variant"/*.d "$variant"/llmc/*/*.d | grep -oE '[^ ]*/(nccl|cudnn|mpi)[^ /]*\.h' | sort -u | tr '\n' ' ')
  defaults=$(needed "$bf16/train_gpt2cu")
  if [ -z "$(needed "$variant/train_gpt2cu")$(needed "$variant/test_gpt2cu")$headers" ] &&
    [ "$defaults" = "libcudnn.so.9 libmpi.so.40 libnccl.so.2" ]; then
    echo "ok    USE_CUDNN=0 NO_MULTI_GPU=1: no libcudnn, libmpi or libnccl needed (the default build needs $defaults), no header of theirs"
  else
    echo "FAIL  USE_CUDNN=0 NO_MULTI_GPU=1 needs '$(needed "$variant/train_gpt2cu")', includes '$headers' (default build: '$defaults')"
    failed=$((failed + 1))
  fi
fi
# Two ranks without NCCL are planned as they would run: the fallback attention, the collectives
# through host staging, no overlapped buckets (a dry run needs no GPU).
if [ -x "$variant/train_gpt2cu" ]; then
  plan=$("$variant/train_gpt2cu" --dry-run 2 -e d12 -b 4 -t 64 2>&1)
  if grep -q '^memory plan per rank: .* over 2 ranks; bf16, fallback attention, collectives staged through host memory$' <<<"$plan" &&
    ! grep -q 'gradient bucket staging' <<<"$plan"; then
    echo "ok    USE_CUDNN=0 NO_MULTI_GPU=1 --dry-run 2: fallback attention, host staging, no NCCL buckets"
  else
    echo "FAIL  USE_CUDNN=0 NO_MULTI_GPU=1 --dry-run 2: $(head -n 1 <<<"$plan")"
    failed=$((failed + 1))
  fi
fi
# A dry run needs no GPU: the bf16 trainer just built plans its memory here (a few seconds).
dry_run="not run (no bf16 train_gpt2cu)"
if [ -x "$bf16/train_gpt2cu" ]; then
  if out=$(bash tests/lib/dry_run_checks.sh "$bf16/train_gpt2cu" 2>&1); then
    echo "ok    train_gpt2cu --dry-run"
  else
    echo "FAIL  train_gpt2cu --dry-run"
    sed 's/^/      /' <<<"$out"
    failed=$((failed + 1))
  fi
  dry_run=$(tail -n 1 <<<"$out")
fi
# ---- cuBLAS, cuDNN and NCCL as Python wheels (scripts/cuda_wheels.sh) ----
# A fake site-packages with the wheels' layout (tests/lib/fake_cuda_wheels.sh) and an empty toolkit
# folder: what the script finds; then that the bf16 train_gpt2cu links against the wheels' libraries
# by path.
# shellcheck source=scripts/cuda_wheels.sh
source scripts/cuda_wheels.sh
# shellcheck source=tests/lib/fake_cuda_wheels.sh
source tests/lib/fake_cuda_wheels.sh
cuda_home=$(cuda_toolkit_root "$nvcc")
wheels=$PWD/build/tmp/check_cuda_build/wheels
rm -rf "$wheels"
mkdir -p "$wheels/toolkit"
fake_cuda_wheels "$wheels/site" "$cuda_home"
site=$wheels/site/nvidia
wheel_ok=0
: >"$site/cudnn/lib/libcudnn.so.9.1.0"  # the major-version name wins over a longer one
wheel_check() {  # wheel_check NAME EXPECTED_EXIT EXPECTED_OUTPUT TOOLKIT SITES [VARIABLE=VALUE]: runs the script
  local out rc=0
  out=$(env CUDA_HOME="$4" CUDA_WHEEL_SITES="$5" ${6:+"$6"} bash scripts/cuda_wheels.sh 2>&1) || rc=$?
  if [ "$rc" = "$2" ] && [ "$out" = "$3" ]; then echo "ok    cuda_wheels.sh: $1"; wheel_ok=$((wheel_ok + 1))
  else
    echo "FAIL  cuda_wheels.sh: $1 (exit $rc, expected $2)"
    diff <(echo "$3") <(echo "$out") | sed 's/^/      /'
    failed=$((failed + 1))
  fi
}
expected="CUDA_LIB_INCLUDES=-I$site/cu13/include -I$site/cudnn/include -I$site/nccl/include
CUBLAS_LIBS=-Xlinker $site/cu13/lib/libcublasLt.so.13 -Xlinker $site/cu13/lib/libcublas.so.13
CUDNN_LIBS=-Xlinker $site/cudnn/lib/libcudnn.so.9
NCCL_LIBS=-Xlinker $site/nccl/lib/libnccl.so.2"
wheel_check "headers and versioned libraries found in the wheels" 0 "$expected" "$wheels/toolkit" \
  "$wheels/empty $wheels/site"
mv "$site/nccl" "$wheels/nccl-aside"
wheel_check "no NCCL anywhere: an error naming it" 1 "cuda_wheels: cannot build the CUDA targets here; missing:
  nccl.h (not in $wheels/toolkit/include, the compiler's include path or <site>/nvidia/*/include)
  libnccl.so (not in $wheels/toolkit/lib64, $wheels/toolkit/lib or the compiler's library path) or libnccl.so.N (not in <site>/nvidia/*/lib)
  (site-packages searched: $wheels/site; CUDA_WHEEL_SITES=\"DIR...\" names others)" "$wheels/toolkit" "$wheels/site"
wheel_check "no NCCL anywhere, NO_MULTI_GPU=1: not looked for" 0 "CUDA_LIB_INCLUDES=-I$site/cu13/include -I$site/cudnn/include
CUBLAS_LIBS=-Xlinker $site/cu13/lib/libcublasLt.so.13 -Xlinker $site/cu13/lib/libcublas.so.13
CUDNN_LIBS=-Xlinker $site/cudnn/lib/libcudnn.so.9" "$wheels/toolkit" "$wheels/site" NO_MULTI_GPU=1
mv "$wheels/nccl-aside" "$site/nccl"
wheel_check "nothing to add where the toolkit has everything" 0 "" "$cuda_home" "$wheels/site"
# nvcc as a wrapper script on PATH (as /usr/local/bin/nvcc may be), CUDA_HOME unset: the toolkit is
# where nvcc says it is, not the wrapper's folder's parent.
mkdir -p "$wheels/wrapper/bin"
printf '#!/bin/sh\nexec %s "$@"\n' "$nvcc" >"$wheels/wrapper/bin/nvcc"
chmod +x "$wheels/wrapper/bin/nvcc"
wrapped=$(env -u CUDA_HOME PATH="$wheels/wrapper/bin:/usr/bin:/bin" bash -c \
  'source scripts/cuda_wheels.sh && cuda_toolkit_root && bash scripts/cuda_wheels.sh && echo "exit $?"' 2>&1)
if [ "$wrapped" = "$cuda_home
exit 0" ] && [ -f "$cuda_home/include/cuda_runtime.h" ]; then
  echo "ok    cuda_wheels.sh: the toolkit found through an nvcc wrapper, nothing to add"; wheel_ok=$((wheel_ok + 1))
else
  echo "FAIL  cuda_wheels.sh through an nvcc wrapper: expected $cuda_home (with include/cuda_runtime.h) and exit 0, got:"
  sed 's/^/      /' <<<"$wrapped"
  failed=$((failed + 1))
fi
# The headers resolve to the wheels' copies, and the bf16 trainer links the wheels' libraries.
CUDA_HOME=$wheels/toolkit CUDA_WHEEL_SITES=$wheels/site cuda_wheel_make_args
printf '#include <cublasLt.h>\n#include <cublas_v2.h>\n#include <cudnn.h>\n#include <nccl.h>\n' >"$wheels/includes.cu"
# shellcheck disable=SC2086
deps=$($nvcc -M ${wheel_args[0]#CUDA_LIB_INCLUDES=} "$wheels/includes.cu" 2>&1)
from_wheels=$(grep -Eo "$site/[a-z0-9]+/include/(cublasLt|cublas_v2|cudnn|nccl)\.h" <<<"$deps" | sort -u | wc -l)
if [ "$from_wheels" = 4 ]; then echo "ok    the four headers come from the wheels' include folders"; wheel_ok=$((wheel_ok + 1))
else echo "FAIL  $from_wheels of 4 headers from the wheels: $(head -c 600 <<<"$deps")"; failed=$((failed + 1)); fi
# The link line as make writes it with the wheels' variables (-n), then that link run into the wheels'
# folder: the trainer that check_gpu_dist.sh bundles stays linked as it was built.
out=$(make --no-print-directory -n -W "$bf16/train_gpt2.o" "${werror[@]}" PRECISION=BF16 "${wheel_args[@]}" \
  "$bf16/train_gpt2cu" 2>&1)
rc=$?
link=$(grep -F -- "-o $bf16/train_gpt2cu" <<<"$out")
if [ "$rc" -eq 0 ] && [ -n "$link" ]; then
  out+=$'\n'$(bash -c "${link/"-o $bf16/train_gpt2cu"/"-o $wheels/train_gpt2cu"}" 2>&1) || rc=$?
  [ -x "$wheels/train_gpt2cu" ] || rc=1
fi
wheel_link=1  # record's exit status: 0 when the link took every library from the wheels
if [ "$rc" -eq 0 ] && grep -qF "$site/cudnn/lib/libcudnn.so.9" <<<"$link" && grep -qF "$site/nccl/lib/libnccl.so.2" <<<"$link" &&
  grep -qF "$site/cu13/lib/libcublas.so.13" <<<"$link" && ! grep -qE -- ' -l(cudnn|nccl|cublas|cublasLt) ' <<<"$link"; then
  wheel_link=0
fi
record "train_gpt2cu (bf16) linked against the wheels' libraries by path" "$wheel_link" "$out"

echo "full compiler output: $log"
if [ "$failed" -ne 0 ]; then
  echo "cuda build: $failed of $((failed + built + 1)) builds and checks failed or warned"
  exit 1
fi
echo "cuda build: $built builds (bf16, fp32; bf16 without cuDNN, NCCL and MPI; dev/cuda; sm_80 + sm_90a) warning-free, $benches dev/cuda binaries; $wheel_ok wheel-discovery checks and a link against the wheels; $dry_run"
