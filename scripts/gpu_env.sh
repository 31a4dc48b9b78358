# Sourced by the GPU scripts (test_gpu.sh, bench_gpu.sh). The device machine may ship cuDNN, NCCL
# and cuBLAS only inside Python wheels (nvidia-cudnn-cu13, nvidia-nccl-cu13, ...) rather than in the
# system library path; when the dynamic loader cannot find one of them, put the wheels' lib folders
# (and the CUDA toolkit's) on LD_LIBRARY_PATH so that the trainer binaries start.
gpu_env_missing=()
for lib in libcudnn.so.9 libnccl.so.2 libcublasLt.so.13 libcublas.so.13; do
  ldconfig -p 2>/dev/null | grep -q "$lib" || gpu_env_missing+=("$lib")
done
if [ ${#gpu_env_missing[@]} -gt 0 ]; then
  gpu_env_dirs=()
  for site in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    for d in "$site"/nvidia/*/lib; do [ -d "$d" ] && gpu_env_dirs+=("$d"); done
  done
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [ -d "$d" ] && gpu_env_dirs+=("$d"); done
  if [ ${#gpu_env_dirs[@]} -gt 0 ]; then
    LD_LIBRARY_PATH=$(IFS=:; echo "${gpu_env_dirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export LD_LIBRARY_PATH
    echo "gpu_env: ${gpu_env_missing[*]} not in the loader's cache; LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  fi
fi
