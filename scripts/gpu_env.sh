# shellcheck shell=bash
# Sourced by the GPU scripts (test_gpu.sh, bench_gpu.sh, dev/bench/vs_llmc.sh) from the repository
# root. A GPU machine may have cuDNN, NCCL, cuBLAS and NVRTC only inside Python wheels
# (nvidia-cudnn-cu13, nvidia-nccl-cu13, ...) rather than in the system library path; when the
# dynamic loader cannot find one of them, put the wheels' lib folders (and the CUDA toolkit's) on
# LD_LIBRARY_PATH so that the trainer binaries start. libcudnn.so.9 loads its engine libraries and
# NVRTC (for its runtime-compiled attention kernels) with dlopen, so those must be findable too.
#
# The bundle carries Open MPI (build/gpu-dist/openmpi, scripts/bundle_openmpi.sh). The binaries'
# RUNPATH $ORIGIN finds bin/libmpi.so.40, but RUNPATH does not apply to libmpi's own dependencies,
# so without a system Open MPI the bundle's library folder goes on LD_LIBRARY_PATH as well (its
# mpirun, build/gpu-dist/bin/mpirun, sets that up itself for the ranks it starts).
gpu_env_missing=()
gpu_env_cache=$(ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null)
for lib in libcudnn.so.9 libnccl.so.2 libcublasLt.so.13 libcublas.so.13 libnvrtc.so.13; do
  grep -q "$lib" <<<"$gpu_env_cache" || gpu_env_missing+=("$lib")
done
gpu_env_dirs=()
# shellcheck source=scripts/cuda_wheels.sh
source scripts/cuda_wheels.sh
if [ ${#gpu_env_missing[@]} -gt 0 ]; then
  for site in $(cuda_wheel_sites); do
    for d in "$site"/nvidia/*/lib; do [ -d "$d" ] && gpu_env_dirs+=("$d"); done
  done
  gpu_env_toolkit=$(cuda_toolkit_root || echo /usr/local/cuda)
  for d in "$gpu_env_toolkit/lib64" "$gpu_env_toolkit/lib"; do [ -d "$d" ] && gpu_env_dirs+=("$d"); done
fi
if ! grep -q libopen-rte.so.40 <<<"$gpu_env_cache" && [ -f build/gpu-dist/openmpi/lib/libopen-rte.so.40 ]; then
  gpu_env_missing+=("libopen-rte.so.40 (for the bundled libmpi)")
  gpu_env_dirs+=("$PWD/build/gpu-dist/openmpi/lib")
fi
if [ ${#gpu_env_dirs[@]} -gt 0 ]; then
  LD_LIBRARY_PATH=$(IFS=:; echo "${gpu_env_dirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export LD_LIBRARY_PATH
  echo "gpu_env: ${gpu_env_missing[*]} not in the loader's cache; LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
elif [ ${#gpu_env_missing[@]} -gt 0 ]; then
  echo "gpu_env: ${gpu_env_missing[*]} not in the loader's cache, and no wheel or CUDA lib folder found"
fi
