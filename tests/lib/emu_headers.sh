# shellcheck shell=bash
# The emulated GPU compiles against the CUDA toolkit's headers. The checks of tests/emu source this
# from the repository root: it sets cuda_home (CUDA_HOME or /usr/local/cuda), or ends the check as
# skipped (exit 77) when the headers are not there.
cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$cuda_home/include/cuda_runtime.h" ]; then
  echo "SKIP: no CUDA toolkit headers in $cuda_home/include (the emulated GPU compiles against them)"
  exit 77
fi
