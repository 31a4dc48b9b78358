#!/usr/bin/env bash
# Per-rank streaming of the training data (tests/dist/test_streaming.cpp): with 1, 2 and 4 ranks
# (mpirun) and shuffling off and on, over one whole epoch of three unequal shards, each rank's
# DataLoader reads exactly one window of B*T+1 tokens per step (payload bytes == steps*(B*T+1)*2,
# besides the 1024-byte headers at start-up), at llm.c's positions when shuffling is off, with
# the right tokens, and the ranks together read every window of the epoch exactly once. Then peak
# memory (VmHWM) for the same number of steps over that ~18 MB dataset and over a 10x larger one
# (~180 MB): a loader that streams stays within 2 MB; one that loaded the data would not.
set -euo pipefail
cd "$(dirname "$0")/../.."
fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source-path=SCRIPTDIR source=../lib/mpirun.sh
source "$(dirname "$0")/../lib/mpirun.sh"
make --no-print-directory -s build/mpi_tests/test_streaming
BIN=$PWD/build/mpi_tests/test_streaming
tmp=$PWD/build/tmp/check_streaming.$$
mkdir -p "$tmp/x1" "$tmp/x10"
trap 'rm -rf "$tmp"' EXIT

# 9,234,568 tokens in three shards whose sizes are not multiples of any W*B*T
"$BIN" generate "$tmp/x1" 0 3000001 1234567 5000000

for np in 1 2 4; do
  for shuffle in 0 1; do
    launch=("${MPIRUN[@]}" -np "$np")
    [ "$np" -eq 1 ] && launch=()  # one rank: the plain process (no launcher) path
    out=$("${launch[@]}" "$BIN" read "$tmp/x1/*.bin" 4 64 epoch "$shuffle" 2>&1) || { echo "$out"; fail "np=$np shuffle=$shuffle"; }
    echo "$out" | grep '^streaming:'
  done
done

"$BIN" generate "$tmp/x10" 0 9234568 9234568 9234568 9234568 9234568 9234568 9234568 9234568 9234568 9234568
echo "datasets: $(du -sm "$tmp/x1" | cut -f1) MB and $(du -sm "$tmp/x10" | cut -f1) MB"
peak() {
  local out
  out=$("$BIN" read "$1/*.bin" 4 64 80000 1 2>&1) || { echo "$out" >&2; fail "reading $1"; }
  echo "$out" >&2
  echo "$out" | sed -n 's/.*VmHWM \([0-9]*\) kB.*/\1/p'
}
hwm1=$(peak "$tmp/x1")
hwm10=$(peak "$tmp/x10")
rm -rf "$tmp/x10"
{ [ -n "$hwm1" ] && [ -n "$hwm10" ]; } || fail "no VmHWM in the output"
[ $((hwm10 - hwm1)) -le 2048 ] || fail "peak RSS grew from $hwm1 kB to $hwm10 kB with 10x the data"
echo "bytes read per rank == steps*(B*T+1)*2 and every window once for 1/2/4 ranks; peak RSS ${hwm1} kB (1x data) vs ${hwm10} kB (10x)"
