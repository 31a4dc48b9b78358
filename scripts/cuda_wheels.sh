#!/usr/bin/env bash
# The CUDA libraries a GPU machine may have only as Python wheels (nvidia-cudnn-cu13,
# nvidia-nccl-cu13, nvidia-cublas, ...): headers under site-packages/nvidia/*/include and only
# versioned libraries (libcudnn.so.9, no libcudnn.so) under site-packages/nvidia/*/lib, which
# neither the compiler nor `-lcudnn` finds.
#
# Run, it prints the make arguments (one per line) that build the CUDA targets there:
#   source scripts/cuda_wheels.sh && cuda_wheel_make_args && make "${wheel_args[@]}" cuda-binaries
# For each header and library the CUDA build uses (cuBLAS and cuBLASLt, cuDNN, NCCL) that the
# toolkit ($CUDA_HOME, else nvcc's: see cuda_toolkit_root) and the compiler's default paths do not
# have, the wheel's folder goes into CUDA_LIB_INCLUDES and the versioned library, by path, into
# CUBLAS_LIBS, CUDNN_LIBS or NCCL_LIBS (the Makefiles' defaults are -lcublasLt -lcublas, -lcudnn,
# -lnccl) as `-Xlinker PATH`: nvcc takes no input file named .so.2, the linker does. Nothing is
# printed for what the system has. Exits 1, naming what is missing and where it looked, when a
# header or library is found nowhere. USE_CUDNN=0 or NO_MULTI_GPU=1 in the environment, as given to
# make, leaves cuDNN or NCCL out of the search.
#
# Sourced (scripts/gpu_env.sh, which the GPU scripts source), it defines
#   cuda_wheel_sites      the site-packages folders searched: the Python's (python3's
#                         site.getsitepackages() and user site), or CUDA_WHEEL_SITES="DIR..." when set;
#   cuda_toolkit_root     the toolkit folder of the nvcc named (default: PATH's, else
#                         /usr/local/cuda/bin/nvcc), as nvcc itself reports it: nvcc may be a wrapper
#                         script in /usr/local/bin, whose folder's parent is not the toolkit;
#   cuda_wheel_make_args  runs this script and puts its make arguments into the array wheel_args
#                         (empty where the system has everything); returns 1, its message on
#                         stderr, when something is found nowhere.
cuda_wheel_sites() {
  if [ -n "${CUDA_WHEEL_SITES:-}" ]; then
    echo "$CUDA_WHEEL_SITES"
  else
    python3 -c 'import site; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null
  fi
}
cuda_toolkit_root() {  # cuda_toolkit_root [NVCC]: prints the folder, or returns 1 with no nvcc
  local nvcc=${1:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)} top
  # nvcc's dry run prints its variables, among them "#$ TOP=<toolkit>/bin/..".
  top=$("$nvcc" --dryrun -E -x cu /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p') || return 1
  [ -n "$top" ] && readlink -f "$top"
}
cuda_wheel_make_args() {
  local text
  wheel_args=()
  text=$(bash "${BASH_SOURCE[0]}") || return 1
  [ -z "$text" ] || mapfile -t wheel_args <<<"$text"
}

[ "${BASH_SOURCE[0]}" = "$0" ] || return 0
set -u
cuda_home=${CUDA_HOME:-$(cuda_toolkit_root || echo /usr/local/cuda)}
cxx=${CXX:-g++}
read -r -a sites <<<"$(cuda_wheel_sites)"
missing=()

system_has_header() {  # system_has_header NAME
  [ -f "$cuda_home/include/$1" ] || echo "#include <$1>" | "$cxx" -E -x c++ - >/dev/null 2>&1
}
system_has_library() {  # system_has_library NAME (unversioned, e.g. libcudnn.so)
  [ -e "$cuda_home/lib64/$1" ] || [ -e "$cuda_home/lib/$1" ] || [ "$("$cxx" -print-file-name="$1")" != "$1" ]
}

includes=()
wheel_include() {  # wheel_include HEADER: adds the wheel folder that has it, once
  local site d
  for site in "${sites[@]}"; do
    for d in "$site"/nvidia/*/include; do
      if [ -f "$d/$1" ]; then
        [[ " ${includes[*]} " == *" -I$d "* ]] || includes+=("-I$d")
        return 0
      fi
    done
  done
  missing+=("$1 (not in $cuda_home/include, the compiler's include path or <site>/nvidia/*/include)")
}
# wheel_library NAME: sets `found` to the versioned library by path, the one with only the major
# version (libcudnn.so.9) if there is one, else the shortest name; false when no wheel has it.
wheel_library() {
  local site f
  found=""
  for site in "${sites[@]}"; do
    for f in "$site"/nvidia/*/lib/"$1".so.[0-9]*; do
      [ -e "$f" ] || continue
      if [ -z "$found" ] || [ "${#f}" -lt "${#found}" ]; then found=$f; fi
    done
    [ -n "$found" ] && return 0
  done
  return 1
}

headers=(cublasLt.h cublas_v2.h)
specs=("CUBLAS_LIBS libcublasLt libcublas")
[ "${USE_CUDNN:-1}" = 0 ] || { headers+=(cudnn.h); specs+=("CUDNN_LIBS libcudnn"); }
[ "${NO_MULTI_GPU:-0}" = 1 ] || { headers+=(nccl.h); specs+=("NCCL_LIBS libnccl"); }
for header in "${headers[@]}"; do
  system_has_header "$header" || wheel_include "$header"
done
out=()
[ ${#includes[@]} -gt 0 ] && out+=("CUDA_LIB_INCLUDES=${includes[*]}")
# Each variable lists its libraries as -l<name> or by path; it is printed when a wheel supplies one.
for spec in "${specs[@]}"; do
  read -r -a words <<<"$spec"
  flags=()
  from_wheel=0
  for lib in "${words[@]:1}"; do
    if system_has_library "$lib.so"; then
      flags+=("-l${lib#lib}")
    elif wheel_library "$lib"; then
      flags+=(-Xlinker "$found")
      from_wheel=1
    else
      where="$cuda_home/lib64, $cuda_home/lib or the compiler's library path"
      missing+=("$lib.so (not in $where) or $lib.so.N (not in <site>/nvidia/*/lib)")
    fi
  done
  [ "$from_wheel" = 1 ] && out+=("${words[0]}=${flags[*]}")
done

if [ ${#missing[@]} -gt 0 ]; then
  {
    echo "cuda_wheels: cannot build the CUDA targets here; missing:"
    printf '  %s\n' "${missing[@]}"
    echo "  (site-packages searched: ${sites[*]:-none}; CUDA_WHEEL_SITES=\"DIR...\" names others)"
  } >&2
  exit 1
fi
[ ${#out[@]} -eq 0 ] || printf '%s\n' "${out[@]}"
