#!/usr/bin/env bash
# scripts/check_gpu_build.sh, the check that the GPU build runs before it compiles anything, against
# stand-ins: a fake CUDA toolkit (an nvcc script that names its release and its folder, empty headers
# and libraries), fake fmt and MPI folders, and folders that do not exist. Each piece taken away in
# turn gives one line that names it, the packages of the toolkit's CUDA major version and the make
# variable that leaves it out; that variable makes the check pass; the Makefile's variables are
# honoured (CUDA_LIB_INCLUDES, *_LIBS with -L or a library's path, FMT_INCLUDE, MPI_INCLUDE).
# Then the Makefile: `make train_gpt2cu` with a missing nvcc stops before compiling anything, and
# `make -n` shows what USE_CUDNN=0 and NO_MULTI_GPU=1 leave out of the link. On this machine's real
# toolkit (when there is one) the check passes with one line, and the default CUDA_ARCHS puts compute_80's
# PTX beside the machine code. Needs no GPU, and no nvcc but for those two.
set -u
cd "$(dirname "$0")/../.." || exit 1
tmp=build/tmp/check_gpu_prereqs
rm -rf "$tmp"
mkdir -p "$tmp"
tmp=$PWD/$tmp
failures=0
checks=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The fake toolkit: nvcc reports $t/release as its CUDA release and $t as its folder (as nvcc's
# dry run does); headers and libraries are empty files, cuDNN's version header says 9.1.
t=$tmp/toolkit
mkdir -p "$t/bin" "$t/include" "$t/lib64" "$tmp/fmt/fmt" "$tmp/mpi" "$tmp/wheel/include" "$tmp/wheel/lib"
cat >"$t/bin/nvcc" <<EOF
#!/bin/sh
case "\$*" in
  *--version*) echo "Cuda compilation tools, release \$(cat $t/release), V\$(cat $t/release).0" ;;
  *--dryrun*) echo "#\\\$ TOP=$t/bin/.." >&2 ;;
esac
EOF
chmod +x "$t/bin/nvcc"
echo 12.8 >"$t/release"
for h in cublasLt.h cublas_v2.h cudnn.h nccl.h; do : >"$t/include/$h"; done
printf '#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 1\n' >"$t/include/cudnn_version.h"
for l in libcublasLt.so libcublas.so libcudnn.so libnccl.so; do : >"$t/lib64/$l"; done
: >"$tmp/fmt/fmt/format.h"
: >"$tmp/mpi/mpi.h"
: >"$tmp/mpi/libmpi.so"
# A cuDNN wheel's layout: headers, and only a versioned library.
cp "$t/include/cudnn.h" "$t/include/cudnn_version.h" "$tmp/wheel/include/"
: >"$tmp/wheel/lib/libcudnn.so.9"

base=(NVCC="$t/bin/nvcc" FMT_INCLUDE="$tmp/fmt" MPI_INCLUDE="$tmp/mpi" MPI_LIBDIR="$tmp/mpi")
# expect NAME EXIT LINES TEXT... -- VARIABLE=VALUE...: the check run with the stand-ins and the
# variables given exits EXIT, prints LINES lines, and every TEXT is in what it prints.
expect() {
  local name=$1 rc=$2 lines=$3 texts=() out got=0 text
  shift 3
  while [ "$1" != -- ]; do texts+=("$1"); shift; done
  shift
  checks=$((checks + 1))
  out=$(env "${base[@]}" "$@" bash scripts/check_gpu_build.sh 2>&1) || got=$?
  local ok=1
  [ "$got" = "$rc" ] && [ "$(wc -l <<<"$out")" = "$lines" ] || ok=0
  for text in "${texts[@]}"; do grep -qF -- "$text" <<<"$out" || ok=0; done
  if [ "$ok" = 1 ]; then
    echo "ok    $name"
  else
    fail "$name: exit $got (expected $rc), $(wc -l <<<"$out") lines (expected $lines), or a text missing of: ${texts[*]}"
    sed 's/^/      /' <<<"$out"
  fi
}

expect "everything there: one line naming what the build uses" 0 1 \
  "gpu build: CUDA 12.8 ($t/bin/nvcc), cuBLAS, cuDNN 9.1, NCCL, MPI, fmt" --
# Without nvcc there is no toolkit to look in: cuDNN and NCCL are looked for in the compiler's paths
# alone (this machine has neither there), with the packages of both CUDA versions.
expect "no nvcc: how to get the toolkit, and NVCC" 1 4 "nvcc: $tmp/none/nvcc not found" "cuda-toolkit-13-0" \
  "make NVCC=/path/to/nvcc" "cudnn9-cuda-13 or cudnn9-cuda-12" -- NVCC="$tmp/none/nvcc"
echo 11.8 >"$t/release"
expect "CUDA 11.8: too old, named" 1 2 "nvcc: $t/bin/nvcc is CUDA 11.8; the GPU build needs CUDA 12.x or 13" --
echo 12.8 >"$t/release"

mkdir -p "$tmp/aside"
mv "$t/include/cudnn.h" "$t/lib64/libcudnn.so" "$tmp/aside/"
expect "no cuDNN: its packages for CUDA 12, its wheel, USE_CUDNN=0" 1 2 \
  "cuDNN 9: cudnn.h not in $t/include or the compiler's include path; libcudnn.so not in $t/lib64" \
  "apt-get install cudnn9-cuda-12 (NVIDIA's CUDA apt repository)" "pip install nvidia-cudnn-cu12" \
  "scripts/cuda_wheels.sh" "make USE_CUDNN=0" --
expect "no cuDNN, USE_CUDNN=0: passes" 0 1 "no cuDNN (USE_CUDNN=0)" -- USE_CUDNN=0
echo 13.0 >"$t/release"
expect "no cuDNN under CUDA 13: the CUDA 13 package and wheel" 1 2 "cudnn9-cuda-13" "nvidia-cudnn-cu13" --
echo 12.8 >"$t/release"
expect "cuDNN from a wheel (CUDA_LIB_INCLUDES, CUDNN_LIBS by path): passes" 0 1 "cuDNN 9.1" -- \
  CUDA_LIB_INCLUDES="-I$tmp/wheel/include" CUDNN_LIBS="-Xlinker $tmp/wheel/lib/libcudnn.so.9"
expect "CUDNN_LIBS naming a library that is not there" 1 2 \
  "CUDNN_LIBS names $tmp/wheel/lib/libcudnn.so.8, which does not exist" -- \
  CUDA_LIB_INCLUDES="-I$tmp/wheel/include" CUDNN_LIBS="-Xlinker $tmp/wheel/lib/libcudnn.so.8"
mv "$tmp/aside/cudnn.h" "$t/include/"
mv "$tmp/aside/libcudnn.so" "$t/lib64/"
printf '#define CUDNN_MAJOR 8\n#define CUDNN_MINOR 9\n' >"$t/include/cudnn_version.h"
expect "cuDNN 8: named, 9 asked for" 1 2 "cuDNN 9: the cudnn.h found is cuDNN 8.9" --
printf '#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 1\n' >"$t/include/cudnn_version.h"

mv "$t/include/nccl.h" "$tmp/aside/"
expect "no NCCL: its packages, its wheel, NO_MULTI_GPU=1" 1 2 "NCCL: nccl.h not in $t/include" \
  "apt-get install libnccl2 libnccl-dev (their +cuda12 build)" "pip install nvidia-nccl-cu12" "make NO_MULTI_GPU=1" --
expect "no NCCL and no MPI, NO_MULTI_GPU=1: passes" 0 1 "no NCCL (NO_MULTI_GPU=1)" -- \
  NO_MULTI_GPU=1 MPI_INCLUDE="$tmp/none" MPI_LIBDIR="$tmp/none"
mv "$tmp/aside/nccl.h" "$t/include/"

expect "MPI_INCLUDE without mpi.h: named, with the packages and NO_MULTI_GPU=1" 1 2 \
  "MPI: MPI_INCLUDE=$tmp/none has no mpi.h; MPI_LIBDIR=$tmp/none has no libmpi.so" "libopenmpi-dev" \
  "NO_MULTI_GPU=1" -- MPI_INCLUDE="$tmp/none" MPI_LIBDIR="$tmp/none"
expect "no MPI, NO_USE_MPI=1: passes" 0 1 "gpu build:" -- NO_USE_MPI=1 MPI_INCLUDE="$tmp/none"
expect "FMT_INCLUDE without fmt/format.h: named" 1 2 "fmt: FMT_INCLUDE=$tmp/none has no fmt/format.h" -- \
  FMT_INCLUDE="$tmp/none"

mkdir -p "$tmp/blas"
mv "$t/lib64/libcublasLt.so" "$t/lib64/libcublas.so" "$tmp/blas/"
expect "cuBLAS elsewhere: named with CUBLAS_LIBS" 1 2 "cuBLAS and cuBLASLt: libcublasLt.so, libcublas.so not in" \
  "libcublas-dev-12-8" --
expect "cuBLAS in CUBLAS_LIBS's -L folder: passes" 0 1 "cuBLAS" -- CUBLAS_LIBS="-L$tmp/blas -lcublasLt -lcublas"

# ---- the Makefile ----
# A missing nvcc stops `make train_gpt2cu` before any object, host or CUDA, is compiled (-j2).
checks=$((checks + 1))
out=$(make --no-print-directory -j2 BUILD="$tmp/build" NVCC="$tmp/none/nvcc" train_gpt2cu 2>&1)
rc=$?
objects=$(find "$tmp/build" -name '*.o' 2>/dev/null | wc -l)
if [ "$rc" -ne 0 ] && grep -qF "nvcc: $tmp/none/nvcc not found" <<<"$out" && [ "$objects" = 0 ]; then
  echo "ok    make train_gpt2cu without nvcc: stopped before compiling, naming nvcc"
else
  fail "make train_gpt2cu without nvcc: exit $rc, $objects objects compiled"
  head -n 20 <<<"$out" | sed 's/^/      /'
fi
# What each variant links (make -n prints the commands without running them).
link_of() {  # link_of DIR VARIABLE=VALUE...: the bf16 train_gpt2cu's link command, its objects in DIR
  local dir=$1
  shift
  make --no-print-directory -n BUILD="$tmp/plan" "$@" "$dir/cuda-bf16$variant/train_gpt2cu" |
    grep -F -- "-o $dir/cuda-bf16$variant/train_gpt2cu"
}
for spec in ":-lcudnn -lnccl -lmpi nccl_communicator.o cudnn_attention.o:" \
  "-nocudnn:-lnccl -lmpi nccl_communicator.o:-lcudnn cudnn_attention.o:USE_CUDNN=0" \
  "-nonccl:-lcudnn cudnn_attention.o:-lnccl -lmpi nccl_communicator.o:NO_MULTI_GPU=1" \
  "-nocudnn-nonccl::-lcudnn -lnccl -lmpi nccl_communicator.o cudnn_attention.o:USE_CUDNN=0 NO_MULTI_GPU=1"; do
  IFS=: read -r variant has lacks vars <<<"$spec"
  checks=$((checks + 1))
  # NO_MULTI_GPU=1 implies NO_USE_MPI=1, which builds in $(BUILD)/no-mpi.
  dir=$tmp/plan
  [[ $vars != *NO_MULTI_GPU=1* ]] || dir=$tmp/plan/no-mpi
  # shellcheck disable=SC2086
  link=$(link_of "$dir" $vars)
  ok=1
  for w in $has; do grep -qF -- "$w" <<<"$link" || ok=0; done
  for w in $lacks; do grep -qF -- "$w" <<<"$link" && ok=0; done
  if [ -n "$link" ] && [ "$ok" = 1 ]; then
    echo "ok    ${vars:-the default build} links ${has:-none of cuDNN, NCCL and MPI} (build${dir#"$tmp/plan"}/cuda-bf16$variant)"
  else
    fail "${vars:-the default build}: expected ${has:-none} and none of $lacks in: ${link:-no link command}"
  fi
done
checks=$((checks + 1))
if out=$(make --no-print-directory -n USE_CUDNN=no train_gpt2cu 2>&1); then
  fail "USE_CUDNN=no was accepted"
else
  grep -qF "USE_CUDNN must be 0" <<<"$out" && echo "ok    USE_CUDNN=no refused, naming the values" ||
    fail "USE_CUDNN=no: $out"
fi

# ---- this machine ----
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
real="no CUDA toolkit here"
if [ -x "$nvcc" ]; then
  # What the default CUDA_ARCHS puts in every object, as nvcc's dry run lays out its fat binary:
  # machine code for sm_80 and sm_90a and compute_80's PTX, from two compiler passes (the PTX is the
  # sm_80 pass's, so it costs no compile time).
  checks=$((checks + 1))
  archs=$(make -s --no-print-directory --eval 'print-cuda-archs: ; @echo $(CUDA_ARCHS)' print-cuda-archs)
  # shellcheck disable=SC2086
  plan=$("$nvcc" --dryrun -c -x cu /dev/null -o "$tmp/probe.o" $archs 2>&1)
  images=$(grep -o 'kind=[a-z]*,sm=[0-9a-z]*' <<<"$plan" | sort -u | paste -sd ' ')
  passes=$(grep -c 'cicc"' <<<"$plan")
  if [ "$images" = "kind=elf,sm=80 kind=elf,sm=90a kind=ptx,sm=80" ] && [ "$passes" = 2 ]; then
    echo "ok    the default CUDA_ARCHS: sm_80 and sm_90a machine code and compute_80 PTX, in 2 compiler passes"
  else
    fail "the default CUDA_ARCHS ($archs) gives images '$images' in $passes passes"
  fi
  checks=$((checks + 1))
  if out=$(NVCC="$nvcc" bash scripts/check_gpu_build.sh 2>&1) && [ "$(wc -l <<<"$out")" = 1 ]; then
    real=$out
    echo "ok    this machine: $out"
  else
    fail "this machine's toolkit: $out"
  fi
fi

if [ "$failures" -ne 0 ]; then
  echo "gpu build check: $failures of $checks checks failed"
  exit 1
fi
echo "gpu build check: $checks checks passed (stand-ins for each missing piece, the make variables, the Makefile); $real"
