#!/usr/bin/env bash
# GPT-2 124M over several nodes with mpirun: scripts/run_gpt2_124M.sh with a hostfile, one rank
# per GPU, ranks filled node by node (so a rank's local rank is its GPU). See docs/multi-gpu.md.
#
#   HOSTFILE=hosts.txt GPUS_PER_NODE=8 bash scripts/run_multinode.sh [extra trainer flags]
#
# hosts.txt, one node per line:   node1 slots=8
#                                 node2 slots=8
# Every node needs the same checkout path, the built trainer and the data (DATA_DIR) at the same
# place (a shared file system, or copies): each rank streams its own windows from every shard.
# Set NCCL_* variables here (e.g. NCCL_SOCKET_IFNAME=eth0, NCCL_IB_HCA=mlx5, NCCL_DEBUG=INFO):
# they are forwarded to every rank with mpirun -x, with PATH, LD_LIBRARY_PATH and OMP_NUM_THREADS.
# MPI's own traffic (start-up, the NCCL id) can be pinned with
#   MPI_EXTRA_ARGS="--mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0".
# Other variables (OUT_DIR, TRAINER, DATA_DIR, MICRO_BATCH, HELLASWAG, DRY_RUN) as in
# scripts/run_gpt2_124M.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
err() { echo "error: $*" >&2; exit 1; }

[ -n "${HOSTFILE:-}" ] || err "HOSTFILE is not set: a file with one 'host slots=N' line per node"
[ -f "$HOSTFILE" ] || err "HOSTFILE: $HOSTFILE not found"
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
[[ $GPUS_PER_NODE =~ ^[1-9][0-9]*$ ]] || err "GPUS_PER_NODE: '$GPUS_PER_NODE' is not a positive integer"
nodes=$(grep -cvE '^[[:space:]]*(#|$)' "$HOSTFILE" || true)
[ "$nodes" -ge 1 ] || err "HOSTFILE: $HOSTFILE lists no hosts"

export HOSTFILE LAUNCHER=mpirun NUM_GPUS=$((nodes * GPUS_PER_NODE))
export MPI_EXTRA_ARGS="--map-by ppr:$GPUS_PER_NODE:node ${MPI_EXTRA_ARGS:-}"
exec bash scripts/run_gpt2_124M.sh "$@"
