#!/usr/bin/env bash
# GPT-2 124M (d12) on FineWeb 10B, llm.c's recipe: 2^19 = 524,288 tokens per step (B=64 x T=1024 x
# 8 GPUs, no accumulation; fewer GPUs accumulate), 18,865 steps = 10B tokens, lr 6e-4 with 700
# warmup steps decaying to 0, weight decay 0.1, ZeRO-1. See docs/multi-gpu.md.
#
#   bash scripts/run_gpt2_124M.sh [extra trainer flags, which override the ones below]
#
# As llm.c's script does, it re-runs the same command, with -y 1, until OUT_DIR/DONE_<-x> exists:
# -y 1 starts from step 0 when there is no checkpoint yet and otherwise continues from the newest
# one, so a crashed node or a killed job just restarts (docs/training.md, "Restarting until done").
# A run that ends with status 0 before that marker was stopped on purpose (SIGINT/SIGTERM, with a
# checkpoint) and is not restarted.
#
# Where the flags differ from llm.c f1e2ace's scripts/run_gpt2_124M.sh, and why:
#   -r auto   llm.c passes -r 0; auto takes the least recompute whose memory plan fits the GPU:
#             0 on an 80 GB card, more where -r 0 would not fit.
#   -x 18865  llm.c gives no -x (one epoch, 18,865 steps of its shards) and waits for DONE_00018865;
#             the explicit count makes the marker the loop waits for the run's last step whatever
#             the shards hold.
#   -h        llm.c passes -h 1 and skips the eval when the file is missing; HELLASWAG below.
#   -ge       neither script passes it: llm.c f1e2ace then fuses no GELU (our -ge 0), ours runs
#             LLMC_GELU's default, mixed (the backward GELU fused into its GEMM).
#   -b        MICRO_BATCH, 64 as in llm.c. Both shuffle the train data, each with its own draws.
#
# Environment:
#   NUM_GPUS   ranks = GPUs (default 8)           OUT_DIR    -o, logs and checkpoints (log124M)
#   TRAINER    the binary (./train_gpt2cu)        DATA_DIR   the shards (data/fineweb10B)
#   MICRO_BATCH -b per GPU (64; lower it on GPUs with less memory, the step stays 524,288 tokens)
#   HELLASWAG  1 = -h 1 (needs data/hellaswag/hellaswag_val.bin), 0 = off, default: 1 if that file exists
#   LAUNCHER   mpirun (default), srun (inside a Slurm allocation), none (one process)
#   HOSTFILE   for mpirun across nodes (scripts/run_multinode.sh sets it)
#   MPI_EXTRA_ARGS  more mpirun arguments, word-split;  DRY_RUN=1 prints the command instead
#   MAX_RESTARTS  how often a failed run is restarted before the script gives up (20)
#   FAST_FAIL_SECONDS  a run that fails within this many seconds of its start failed fast (60); after
#              3 fast failures in a row the script stops: that is an error to fix, not a crash
set -euo pipefail
cd "$(dirname "$0")/.."

NUM_GPUS=${NUM_GPUS:-8}
OUT_DIR=${OUT_DIR:-log124M}
TRAINER=${TRAINER:-./train_gpt2cu}
DATA_DIR=${DATA_DIR:-data/fineweb10B}
MICRO_BATCH=${MICRO_BATCH:-64}
LAUNCHER=${LAUNCHER:-mpirun}
MAX_RESTARTS=${MAX_RESTARTS:-20}
FAST_FAIL_SECONDS=${FAST_FAIL_SECONDS:-60}
HELLASWAG_FILE=data/hellaswag/hellaswag_val.bin
err() { echo "error: $*" >&2; exit 1; }
say() { echo "run_gpt2_124M.sh: $*" >&2; }

[[ $NUM_GPUS =~ ^[1-9][0-9]*$ ]] || err "NUM_GPUS: '$NUM_GPUS' is not a positive integer"
[[ $MICRO_BATCH =~ ^[1-9][0-9]*$ ]] || err "MICRO_BATCH: '$MICRO_BATCH' is not a positive integer"
[[ $MAX_RESTARTS =~ ^[0-9]+$ ]] || err "MAX_RESTARTS: '$MAX_RESTARTS' is not a non-negative integer"
[[ $FAST_FAIL_SECONDS =~ ^[0-9]+$ ]] || err "FAST_FAIL_SECONDS: '$FAST_FAIL_SECONDS' is not a non-negative integer"
[ -x "$TRAINER" ] || err "$TRAINER not found or not executable: build it with 'make train_gpt2cu' (or set TRAINER)"
compgen -G "$DATA_DIR/fineweb_train_*.bin" >/dev/null ||
  err "no training shards $DATA_DIR/fineweb_train_*.bin: make them with dev/data/fineweb.py (README, 'Train GPT-2 124M on FineWeb'), or set DATA_DIR"
compgen -G "$DATA_DIR/fineweb_val_*.bin" >/dev/null ||
  err "no validation shard $DATA_DIR/fineweb_val_*.bin: dev/data/fineweb.py writes it with the training shards"
if [ -z "${HELLASWAG:-}" ]; then
  HELLASWAG=0
  if [ -f "$HELLASWAG_FILE" ]; then HELLASWAG=1
  else echo "note: $HELLASWAG_FILE not found, HellaSwag eval off (scripts/hellaswag_to_evalfile.py builds it)" >&2; fi
fi
[ "$HELLASWAG" = 0 ] || [ -f "$HELLASWAG_FILE" ] ||
  err "HELLASWAG=1 but $HELLASWAG_FILE is missing: build it with scripts/hellaswag_to_evalfile.py"

trainer=("$TRAINER" -i "$DATA_DIR/fineweb_train_*.bin" -j "$DATA_DIR/fineweb_val_*.bin" -o "$OUT_DIR"
         -e d12 -b "$MICRO_BATCH" -t 1024 -d 524288 -l 0.0006 -u 700 -q 0.0 -c 0.1 -x 18865
         -v 250 -s 20000 -g 144 -n 5000 -y 1 -z 1 -r auto -h "$HELLASWAG" "$@")

# The value the trainer takes for a flag: its last one (extra flags come last and win). The
# binary is trainer[0]; the flags follow in pairs.
flag_value() {
  local value="" i
  for ((i = 1; i + 1 < ${#trainer[@]}; i += 2)); do
    [ "${trainer[i]}" != "$1" ] || value=${trainer[i + 1]}
  done
  echo "$value"
}
steps=$(flag_value -x)
out_dir=$(flag_value -o)
[[ $steps =~ ^[1-9][0-9]*$ ]] ||
  err "-x $steps: the restart loop waits for DONE_<steps> of the last step: give a step count, -x N"
[[ $(flag_value -n) =~ ^[1-9][0-9]*$ ]] || err "-n $(flag_value -n): the restart loop resumes from checkpoints: give -n N > 0"
[ "$(flag_value -y)" = 1 ] || err "-y $(flag_value -y): the restart loop resumes with -y 1"
[ -n "$out_dir" ] || err "-o: the restart loop needs the output dir of the checkpoints"
done_file=$(printf '%s/DONE_%08d' "$out_dir" "$steps")

case "$LAUNCHER" in
  none)
    [ "$NUM_GPUS" -eq 1 ] || err "LAUNCHER=none runs one process, but NUM_GPUS=$NUM_GPUS"
    launch=() ;;
  mpirun)
    command -v mpirun >/dev/null || err "mpirun not found: install OpenMPI (make setup) or use LAUNCHER=srun under Slurm"
    launch=(mpirun -np "$NUM_GPUS" --bind-to none)
    [ "$(id -u)" -ne 0 ] || launch+=(--allow-run-as-root)
    if [ -n "${HOSTFILE:-}" ]; then
      [ -f "$HOSTFILE" ] || err "HOSTFILE: $HOSTFILE not found"
      launch+=(--hostfile "$HOSTFILE")
      # mpirun starts the remote ranks with a bare environment: forward what NCCL and the trainer read.
      for var in PATH LD_LIBRARY_PATH OMP_NUM_THREADS $(compgen -e | grep -E '^(NCCL|CUDA)_' || true); do
        [ -z "${!var:-}" ] || launch+=(-x "$var")
      done
    fi
    # shellcheck disable=SC2206  # word splitting is the point
    [ -z "${MPI_EXTRA_ARGS:-}" ] || launch+=($MPI_EXTRA_ARGS) ;;
  srun)
    [ -n "${SLURM_JOB_ID:-}" ] || err "LAUNCHER=srun outside a Slurm allocation (use sbatch scripts/slurm_gpt2_124M.sbatch)"
    launch=(srun --mpi=pmix --ntasks="$NUM_GPUS" --kill-on-bad-exit=1) ;;
  *) err "LAUNCHER: '$LAUNCHER' is not mpirun, srun or none" ;;
esac

if [ "${DRY_RUN:-0}" = 1 ]; then
  printf '%q ' "${launch[@]}" "${trainer[@]}"
  echo
  exit 0
fi
mkdir -p "$out_dir"
restarts=0 fast_failures=0
while [ ! -e "$done_file" ]; do
  started=$SECONDS
  rc=0
  "${launch[@]}" "${trainer[@]}" || rc=$?
  [ ! -e "$done_file" ] || break
  if [ "$rc" -eq 0 ]; then
    say "the trainer ended (status 0) before $done_file existed: it was stopped by SIGINT or SIGTERM, after a checkpoint; run this script again to continue"
    exit 0
  fi
  if [ $((SECONDS - started)) -lt "$FAST_FAIL_SECONDS" ]; then fast_failures=$((fast_failures + 1)); else fast_failures=0; fi
  [ "$fast_failures" -lt 3 ] ||
    err "the trainer failed $fast_failures times in a row, each within FAST_FAIL_SECONDS=$FAST_FAIL_SECONDS s of its start (last status $rc): an error to fix (its message is above), not a crash to restart from"
  [ "$restarts" -lt "$MAX_RESTARTS" ] ||
    err "the trainer failed (status $rc) after $restarts restart(s), MAX_RESTARTS=$MAX_RESTARTS: giving up; run this script again to continue from the newest checkpoint in $out_dir"
  restarts=$((restarts + 1))
  say "the trainer failed (status $rc) before $done_file existed: restart $restarts of at most $MAX_RESTARTS, with -y 1"
  sleep 1
done
say "$done_file exists: the run is complete"
