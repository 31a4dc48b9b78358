# shellcheck shell=bash
# Sourced by the GPU benchmarks (scripts/bench_gpu.sh, dev/bench/vs_llmc.sh) from the repository
# root, after scripts/gpu_env.sh: the trainer they time and the one way both measure GPU memory.

# bench_trainer NAME: sets `trainer` to our bf16 train_gpt2cu: the bundle's when it runs here,
# else one built on this machine (build/gpu-local, by make test-gpu), else builds ./train_gpt2cu
# (with the wheels' cuBLAS, cuDNN and NCCL where the toolkit lacks them). Returns 1, saying so
# under NAME, when it cannot be built.
bench_trainer() {
  if [ -x build/gpu-dist/bin/train_gpt2cu-bf16 ] && build/gpu-dist/bin/test_gpt2cu-bf16 --probe >/dev/null 2>&1; then
    trainer=build/gpu-dist/bin/train_gpt2cu-bf16
  elif [ -x build/gpu-local/bin/train_gpt2cu-bf16 ]; then
    trainer=build/gpu-local/bin/train_gpt2cu-bf16
  else
    cuda_wheel_make_args && make --no-print-directory PRECISION=BF16 "${wheel_args[@]}" train_gpt2cu ||
      { echo "$1: cannot build train_gpt2cu" >&2; return 1; }
    trainer=./train_gpt2cu
  fi
}

# run_with_memory SECONDS LOG COMMAND...: runs it for at most SECONDS (or what is left of the
# caller's $budget, counted on bash's SECONDS) with its output in LOG, while nvidia-smi samples the
# GPU's used memory every 100 ms; prints the peak MiB. Status 124: out of time.
run_with_memory() {
  local want=$1 log=$2
  shift 2
  local left=$((budget - SECONDS))
  local limit=$((want < left ? want : left))
  if [ "$limit" -lt 10 ]; then
    echo "not run: the ${budget}s bench budget is spent" >"$log"
    return 124
  fi
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$log.mem" 2>/dev/null &
  local sampler=$!
  timeout -k 10 "$limit" "$@" >"$log" 2>&1
  local rc=$?
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
  sort -n "$log.mem" | tail -n 1
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || echo "timed out after ${limit}s" >>"$log"
  return $rc
}
