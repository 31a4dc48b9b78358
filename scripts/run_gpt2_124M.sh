#!/usr/bin/env bash
# GPT-2 124M (d12) on FineWeb 10B, llm.c's recipe: 2^19 = 524,288 tokens per step (B=64 x T=1024 x
# 8 GPUs, no accumulation; fewer GPUs accumulate), 18,865 steps = 10B tokens, lr 6e-4 with 700
# warmup steps decaying to 0, weight decay 0.1, ZeRO-1. See docs/multi-gpu.md.
#
#   bash scripts/run_gpt2_124M.sh [extra trainer flags, which override the ones below]
#
# Environment:
#   NUM_GPUS   ranks = GPUs (default 8)           OUT_DIR    -o, logs and checkpoints (log124M)
#   TRAINER    the binary (./train_gpt2cu)        DATA_DIR   the shards (data/fineweb10B)
#   MICRO_BATCH -b per GPU (64; lower it on GPUs with less memory, the step stays 524,288 tokens)
#   HELLASWAG  1 = -h 1 (needs data/hellaswag/hellaswag_val.bin), 0 = off, default: 1 if that file exists
#   LAUNCHER   mpirun (default), srun (inside a Slurm allocation), none (one process)
#   HOSTFILE   for mpirun across nodes (scripts/run_multinode.sh sets it)
#   MPI_EXTRA_ARGS  more mpirun arguments, word-split;  DRY_RUN=1 prints the command instead
set -euo pipefail
cd "$(dirname "$0")/.."

NUM_GPUS=${NUM_GPUS:-8}
OUT_DIR=${OUT_DIR:-log124M}
TRAINER=${TRAINER:-./train_gpt2cu}
DATA_DIR=${DATA_DIR:-data/fineweb10B}
MICRO_BATCH=${MICRO_BATCH:-64}
LAUNCHER=${LAUNCHER:-mpirun}
HELLASWAG_FILE=data/hellaswag/hellaswag_val.bin
err() { echo "error: $*" >&2; exit 1; }

[[ $NUM_GPUS =~ ^[1-9][0-9]*$ ]] || err "NUM_GPUS: '$NUM_GPUS' is not a positive integer"
[[ $MICRO_BATCH =~ ^[1-9][0-9]*$ ]] || err "MICRO_BATCH: '$MICRO_BATCH' is not a positive integer"
[ -x "$TRAINER" ] || err "$TRAINER not found or not executable: build it with 'make train_gpt2cu' (or set TRAINER)"
compgen -G "$DATA_DIR/fineweb_train_*.bin" >/dev/null ||
  err "no training shards $DATA_DIR/fineweb_train_*.bin: make them with 'make tokenize && python3 dev/data/fineweb.py --version fineweb' (or set DATA_DIR)"
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
         -v 250 -s 20000 -n 5000 -z 1 -h "$HELLASWAG" "$@")

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
mkdir -p "$OUT_DIR"
exec "${launch[@]}" "${trainer[@]}"
