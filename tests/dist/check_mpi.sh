#!/usr/bin/env bash
# Multi-rank foundations (docs/multi-gpu.md) with CPU ranks:
#  - every collective of the communicators (tests/dist/test_collectives.cpp) as a plain process
#    and under mpirun -np 1/2/4, against closed-form sums, including a ZeRO-1 step over a padded
#    buffer and MPI calls split into pieces; ProcessGroup's layout against MPI's own view;
#  - a launcher whose variables disagree with MPI, and malformed variables, are errors;
#  - a rank that fails ends the whole job (ProcessGroup::abort) instead of hanging the others;
#  - the launch scripts: syntax, prerequisite messages, the commands they build, and their
#    trainer flags accepted by the trainer's own parser (./train_gpt2).
set -euo pipefail
cd "$(dirname "$0")/../.."
fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source-path=SCRIPTDIR source=../lib/mpirun.sh
source "$(dirname "$0")/../lib/mpirun.sh"
make --no-print-directory -s build/mpi_tests/test_collectives build/mpi_tests/test_abort
BIN=build/mpi_tests
tmp=$PWD/build/tmp/check_mpi.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

# --- collectives ------------------------------------------------------------------------------
$BIN/test_collectives 1 none "$tmp" || fail "collectives without a launcher"
for np in 1 2 4; do
  timeout 120 "${MPIRUN[@]}" -np "$np" $BIN/test_collectives "$np" openmpi "$tmp" || fail "collectives with $np ranks"
done

# --- launcher variables -----------------------------------------------------------------------
expect_error() {  # expect_error "message part" command...
  local want=$1; shift
  local out
  if out=$("$@" 2>&1); then fail "expected an error from: $*"; fi
  grep -qF -- "$want" <<<"$out" || { echo "$out"; fail "error of '$*' does not say '$want'"; }
}
expect_error "Slurm says rank 1 of 2 but MPI says rank 0 of 1" \
  env SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=1 $BIN/test_collectives 2 none "$tmp"
expect_error "OMPI_COMM_WORLD_SIZE: 'two' is not a non-negative integer" \
  env OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=two OMPI_COMM_WORLD_LOCAL_RANK=0 $BIN/test_collectives 2 none "$tmp"
echo "launcher variables: a Slurm world MPI does not see and a malformed size are rejected"

# --- a failing rank ends the job --------------------------------------------------------------
set +e
out=$(timeout 60 "${MPIRUN[@]}" -np 4 $BIN/test_abort 2>&1)
rc=$?
set -e
[ "$rc" -ne 124 ] || fail "a failing rank left the others hanging (timeout)"
[ "$rc" -ne 0 ] || fail "the job succeeded although a rank failed"
grep -q "rank 3: a deliberate failure" <<<"$out" || { echo "$out"; fail "no error message from the failing rank"; }
! grep -q "left the barrier" <<<"$out" || fail "ranks went on past the failing one"
echo "abort: a failing rank ended the 4-rank job with status $rc"

# --- launch scripts ---------------------------------------------------------------------------
for s in scripts/run_gpt2_124M.sh scripts/run_multinode.sh scripts/slurm_gpt2_124M.sbatch; do
  bash -n "$s" || fail "$s: syntax"
done
data=$tmp/data
mkdir -p "$data"
: >"$data/fineweb_train_000001.bin"
: >"$data/fineweb_val_000000.bin"
expect_error "make train_gpt2cu" env TRAINER="$tmp/none" DATA_DIR="$data" bash scripts/run_gpt2_124M.sh
expect_error "dev/data/fineweb.py" env TRAINER=./train_gpt2 DATA_DIR="$tmp/nothing" bash scripts/run_gpt2_124M.sh
expect_error "NUM_GPUS: 'x' is not a positive integer" env NUM_GPUS=x TRAINER=./train_gpt2 DATA_DIR="$data" bash scripts/run_gpt2_124M.sh
expect_error "HOSTFILE is not set" bash scripts/run_multinode.sh
expect_error "not inside a Slurm job" env -u SLURM_NTASKS bash scripts/slurm_gpt2_124M.sbatch

cmd=$(DRY_RUN=1 HELLASWAG=0 TRAINER=./train_gpt2 DATA_DIR="$data" bash scripts/run_gpt2_124M.sh)
for want in "mpirun -np 8 " " -e d12 -b 64 -t 1024 -d 524288 -l 0.0006 -u 700 -q 0.0 -c 0.1 -x 18865 -v 250 -s 20000 -g 144 -n 5000 -y 1 -z 1 -r auto -h 0"; do
  grep -qF -- "$want" <<<"$cmd" || fail "run_gpt2_124M.sh: '$want' not in: $cmd"
done
printf 'node1 slots=8\n# a comment\nnode2 slots=8\n\n' >"$tmp/hosts"
cmd=$(DRY_RUN=1 HELLASWAG=0 NCCL_DEBUG=INFO HOSTFILE="$tmp/hosts" TRAINER=./train_gpt2 DATA_DIR="$data" bash scripts/run_multinode.sh)
for want in "mpirun -np 16 " "--hostfile $tmp/hosts" "-x NCCL_DEBUG" "--map-by ppr:8:node" " -z 1 "; do
  grep -qF -- "$want" <<<"$cmd" || fail "run_multinode.sh: '$want' not in: $cmd"
done
# The trainer's parser takes every flag of the script: the run gets as far as reading the (empty)
# shard. A tiny model (-e override) keeps it from building the 124M one first; MAX_RESTARTS=0 keeps
# the restart loop (tests/cpu/check_recipe_loop.sh) from running it again.
expect_error "fineweb_train_000001.bin: file of 0 bytes is shorter than the 1024-byte shard header" \
  env LAUNCHER=none NUM_GPUS=1 HELLASWAG=0 MAX_RESTARTS=0 TRAINER=./train_gpt2 DATA_DIR="$data" OUT_DIR="$tmp/out" \
  bash scripts/run_gpt2_124M.sh -e L1H1C8T1024
echo "launch scripts: syntax, prerequisite errors, mpirun/hostfile commands and trainer flags checked"
echo "collectives exact on 1/2/4 MPI ranks and without a launcher; failing rank aborts the job; launch scripts checked"
