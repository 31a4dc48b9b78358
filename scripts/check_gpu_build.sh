#!/usr/bin/env bash
# What the GPU build needs, checked before anything of it is compiled (make train_gpt2cu, test_gpt2cu
# and gpu-dist run this first): nvcc of CUDA 12.x or 13, cuBLAS and cuBLASLt, cuDNN 9 (not with
# USE_CUDNN=0), NCCL (not with NO_MULTI_GPU=1), MPI (not with NO_MULTI_GPU=1 or NO_USE_MPI=1) and fmt.
# It looks where the build will: in nvcc's toolkit, the compiler's own paths and what the Makefile's
# variables name, which make passes in the environment: NVCC, CXX, CUDA_LIB_INCLUDES, CUBLAS_LIBS,
# CUDNN_LIBS, NCCL_LIBS (-lNAME, -LDIR, -Xlinker PATH or a library's path), FMT_INCLUDE, MPI_INCLUDE and
# MPI_LIBDIR, USE_CUDNN, NO_MULTI_GPU, NO_USE_MPI.
# All there: one line naming what the build uses, exit 0. Otherwise, on stderr, one line for each
# missing piece: where it was looked for, how to get it (Debian/Ubuntu packages; NVIDIA's pip wheels,
# whose make variables scripts/cuda_wheels.sh prints) and the make variable that leaves it out; exit 1.
set -u
# shellcheck source=scripts/cuda_wheels.sh
source "$(dirname "${BASH_SOURCE[0]}")/cuda_wheels.sh"  # cuda_toolkit_root

nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
cxx=${CXX:-g++}
want_cudnn=1
[ "${USE_CUDNN:-1}" = 0 ] && want_cudnn=0
want_nccl=1
[ "${NO_MULTI_GPU:-0}" = 1 ] && want_nccl=0
want_mpi=$want_nccl
[ "${NO_USE_MPI:-0}" = 1 ] && want_mpi=0
missing=()
wheel_hint="then add what 'bash scripts/cuda_wheels.sh' prints to make's command line"

# ---- nvcc and its toolkit ----
version=""
toolkit=""
if ! command -v "$nvcc" >/dev/null 2>&1; then
  missing+=("nvcc: $nvcc not found. Install the CUDA toolkit 12.x or 13 (Debian/Ubuntu, from NVIDIA's CUDA apt repository: cuda-toolkit-13-0 or cuda-toolkit-12-9), or name it: make NVCC=/path/to/nvcc")
else
  version=$("$nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p' | head -n 1)
  toolkit=$(cuda_toolkit_root "$nvcc" 2>/dev/null) || toolkit=""
  if [ -z "$version" ]; then
    missing+=("nvcc: '$nvcc --version' names no CUDA release; the GPU build needs CUDA 12.x or 13")
  elif [ "${version%%.*}" -lt 12 ]; then
    missing+=("nvcc: $nvcc is CUDA $version; the GPU build needs CUDA 12.x or 13 (Debian/Ubuntu, from NVIDIA's CUDA apt repository: cuda-toolkit-13-0 or cuda-toolkit-12-9), named with make NVCC=/path/to/nvcc")
  fi
fi
# The packages and wheels of this CUDA's major version (12 or 13), else of both.
case ${version%%.*} in
  12 | 13)
    major=${version%%.*}
    apt_cudnn="cudnn9-cuda-$major"
    apt_nccl="libnccl2 libnccl-dev (their +cuda$major build)"
    apt_cublas="libcublas-dev-${version/./-}"
    pip_cudnn="nvidia-cudnn-cu$major"
    pip_nccl="nvidia-nccl-cu$major"
    pip_cublas=$([ "$major" = 13 ] && echo nvidia-cublas || echo nvidia-cublas-cu12)
    ;;
  *)
    apt_cudnn="cudnn9-cuda-13 or cudnn9-cuda-12"
    apt_nccl="libnccl2 libnccl-dev (the build for your CUDA: +cuda13 or +cuda12)"
    apt_cublas="libcublas-dev-13-0 or libcublas-dev-12-9"
    pip_cudnn="nvidia-cudnn-cu13 or nvidia-cudnn-cu12"
    pip_nccl="nvidia-nccl-cu13 or nvidia-nccl-cu12"
    pip_cublas="nvidia-cublas (CUDA 13) or nvidia-cublas-cu12"
    ;;
esac

# ---- headers: one pass of the compiler over the include paths the build gives it ----
include_flags=()
include_where="the compiler's include path"
if [ -n "$toolkit" ]; then
  include_flags+=("-I$toolkit/include")
  include_where="$toolkit/include or $include_where"
fi
read -r -a lib_includes <<<"${CUDA_LIB_INCLUDES:-}"
include_flags+=("${lib_includes[@]}")
[ -n "${CUDA_LIB_INCLUDES:-}" ] && include_where="CUDA_LIB_INCLUDES, $include_where"
probe_source() {
  local header
  for header in cublasLt.h cublas_v2.h cudnn.h nccl.h fmt/format.h; do
    printf '#if __has_include(<%s>)\nfound "%s"\n#endif\n' "$header" "$header"
  done
  printf '#if __has_include(<cudnn_version.h>)\n#include <cudnn_version.h>\ncudnn_version CUDNN_MAJOR CUDNN_MINOR\n#endif\n'
}
probed=$(probe_source | "$cxx" -E -P -x c++ -std=c++17 "${include_flags[@]}" - 2>/dev/null)
has_header() { grep -qxF "found \"$1\"" <<<"$probed"; }

# ---- libraries: each of a *_LIBS variable's, where the linker will look ----
library_dirs=()
[ -n "$toolkit" ] && library_dirs+=("$toolkit/lib64" "$toolkit/lib" "$toolkit"/targets/*/lib)
has_library() {  # has_library FILE DIR...: in a DIR, the toolkit's lib folders or the compiler's path
  local file=$1 dir
  shift
  for dir in "$@" "${library_dirs[@]}"; do [ -e "$dir/$file" ] && return 0; done
  [ "$("$cxx" -print-file-name="$file")" != "$file" ]
}
missing_libraries() {  # missing_libraries "FLAGS": prints each library FLAGS names that is found nowhere
  local words dirs=() i w
  read -r -a words <<<"$1"
  for ((i = 0; i < ${#words[@]}; i++)); do
    case ${words[i]} in -L) dirs+=("${words[i + 1]:-}") ;; -L*) dirs+=("${words[i]#-L}") ;; esac
  done
  for ((i = 0; i < ${#words[@]}; i++)); do
    w=${words[i]}
    case $w in
      -L) i=$((i + 1)) ;;
      -Xlinker)
        i=$((i + 1))
        w=${words[i]:-}
        [[ $w == -* ]] || [ -e "$w" ] || echo "$w"
        ;;
      -l*) has_library "lib${w#-l}.so" "${dirs[@]}" || echo "lib${w#-l}.so" ;;
      -*) ;;
      *) [ -e "$w" ] || echo "$w" ;;
    esac
  done
}
# need NAME HEADERS VARIABLE ADVICE: a missing line when a header, or a library that the make variable
# VARIABLE names (its value in the environment, else the Makefile's default), is not there.
need() {
  local name=$1 headers=$2 variable=$3 advice=$4 flags absent=() header lib absent_headers=() libraries=() paths=()
  declare -A defaults=([CUBLAS_LIBS]="-lcublasLt -lcublas" [CUDNN_LIBS]=-lcudnn [NCCL_LIBS]=-lnccl)
  flags=${!variable-${defaults[$variable]}}
  for header in $headers; do has_header "$header" || absent_headers+=("$header"); done
  while read -r lib; do
    case $lib in */*) paths+=("$lib") ;; ?*) libraries+=("$lib") ;; esac
  done < <(missing_libraries "$flags")
  [ ${#absent_headers[@]} -eq 0 ] || absent+=("$(joined ", " "${absent_headers[@]}") not in $include_where")
  [ ${#libraries[@]} -eq 0 ] ||
    absent+=("$(joined ", " "${libraries[@]}") not in ${toolkit:+$toolkit/lib64, }the compiler's library path or $variable's -L folders")
  [ ${#paths[@]} -eq 0 ] || absent+=("$variable names $(joined ", " "${paths[@]}"), which does not exist")
  [ ${#absent[@]} -eq 0 ] && return 0
  missing+=("$name: $(joined "; " "${absent[@]}"). $advice")
}
joined() {  # joined SEPARATOR WORD...: the words with SEPARATOR between them
  local separator=$1 text=$2 word
  shift 2
  for word; do text+="$separator$word"; done
  echo "$text"
}

uses=("CUDA $version ($nvcc)" "cuBLAS")
# cuBLAS comes with the toolkit: without nvcc, the line above says how to get both.
[ -n "$toolkit" ] && need "cuBLAS and cuBLASLt" "cublasLt.h cublas_v2.h" CUBLAS_LIBS \
  "They come with the CUDA toolkit (Debian/Ubuntu: $apt_cublas, from NVIDIA's CUDA apt repository); or pip install $pip_cublas, $wheel_hint"
if [ "$want_cudnn" = 1 ]; then
  need "cuDNN 9" "cudnn.h" CUDNN_LIBS \
    "Debian/Ubuntu: apt-get install $apt_cudnn (NVIDIA's CUDA apt repository); or pip install $pip_cudnn, $wheel_hint; or make USE_CUDNN=0 (our own attention kernels instead)"
  cudnn=$(sed -n 's/^cudnn_version \([0-9][0-9]*\) \([0-9][0-9]*\)$/\1.\2/p' <<<"$probed")
  if has_header cudnn.h && [ -n "$cudnn" ] && [ "${cudnn%%.*}" -lt 9 ]; then
    missing+=("cuDNN 9: the cudnn.h found is cuDNN $cudnn. Debian/Ubuntu: apt-get install $apt_cudnn; or pip install $pip_cudnn, $wheel_hint; or make USE_CUDNN=0")
  fi
  uses+=("cuDNN ${cudnn:-9}")
else
  uses+=("no cuDNN (USE_CUDNN=0)")
fi
if [ "$want_nccl" = 1 ]; then
  need "NCCL" "nccl.h" NCCL_LIBS \
    "Debian/Ubuntu: apt-get install $apt_nccl from NVIDIA's CUDA apt repository; or pip install $pip_nccl, $wheel_hint; or make NO_MULTI_GPU=1 (one GPU: no NCCL, no MPI)"
  uses+=("NCCL")
else
  uses+=("no NCCL (NO_MULTI_GPU=1)")
fi
if [ "$want_mpi" = 1 ]; then
  mpi_advice="Debian/Ubuntu: apt-get install libopenmpi-dev openmpi-bin; or make MPI_INCLUDE=DIR MPI_LIBDIR=DIR (make gpu-dist bundles both: build/gpu-dist/include/mpi, build/gpu-dist/openmpi/lib); or make NO_MULTI_GPU=1 (one GPU) or NO_USE_MPI=1 (no MPI)"
  if [ -n "${MPI_INCLUDE:-}" ]; then
    absent=()
    [ -f "$MPI_INCLUDE/mpi.h" ] || absent+=("MPI_INCLUDE=$MPI_INCLUDE has no mpi.h")
    [ -e "${MPI_LIBDIR:-}/libmpi.so" ] || absent+=("MPI_LIBDIR=${MPI_LIBDIR:-} has no libmpi.so")
    [ ${#absent[@]} -eq 0 ] || missing+=("MPI: $(joined "; " "${absent[@]}"). $mpi_advice")
  elif ! mpicc --showme:compile >/dev/null 2>&1; then
    missing+=("MPI: no mpicc (Open MPI's compiler wrapper) on PATH, and no MPI_INCLUDE. $mpi_advice")
  fi
  uses+=("MPI")
fi
if [ -n "${FMT_INCLUDE:-}" ]; then
  [ -f "$FMT_INCLUDE/fmt/format.h" ] || missing+=("fmt: FMT_INCLUDE=$FMT_INCLUDE has no fmt/format.h. Give the folder that holds fmt/ (header-only fmt), or leave FMT_INCLUDE out and apt-get install libfmt-dev")
else
  { has_header fmt/format.h && has_library libfmt.so; } ||
    missing+=("fmt: fmt/format.h or libfmt.so not in $cxx's paths. Debian/Ubuntu: apt-get install libfmt-dev; or make FMT_INCLUDE=DIR (a folder holding fmt/format.h: header-only fmt)")
fi
uses+=("fmt")

if [ ${#missing[@]} -gt 0 ]; then
  {
    echo "gpu build: not started; this machine lacks what the GPU build needs (make variables and packages: README, \"GPU machine\"):"
    printf '  %s\n' "${missing[@]}"
  } >&2
  exit 1
fi
echo "gpu build: $(joined ", " "${uses[@]}")"
