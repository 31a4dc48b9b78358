#!/usr/bin/env bash
# The CUDA trainer on the emulated GPU (docs/cuda-emulator.md; the ASan + UBSan FP32 build that
# tests/emu/check_emu_ranks.sh uses) with two ranks started without mpirun, -pi tcp -pn 2 -pr 0/1:
#  - with the collectives staged through host memory over the ranks' TCP connections
#    (LLMC_COMMUNICATOR=mpi, named after MPI, the host communicator of mpirun's ranks), -z 1 (its
#    reduce-scatter and all-gather, the sums of -z 0 besides): main.log byte-identical to
#    `mpirun -np 2` with the same setting (with two ranks each sum is one addition on both paths,
#    docs/multi-gpu.md);
#  - over NCCL (the default for ranks with a GPU each): the emulated NCCL moves its data over
#    MPI_COMM_WORLD, which ranks without mpirun do not have; the run must stop with the reason,
#    not hang. (On a real GPU NCCL needs only the unique id, which -pi tcp|fs carries: not run.)
# Skips (77) without the CUDA headers.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/mpirun.sh
source "$(dirname "$0")/../lib/mpirun.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/emu_fp32_trainer.sh
source tests/lib/emu_fp32_trainer.sh
export ASAN_OPTIONS=detect_leaks=0 LLMC_RENDEZVOUS_TIMEOUT=60

/usr/bin/python3 tests/lib/tiny_model_and_shards.py "$tmp" --seed 11 --first-token 5 --layers 2 --heads 3 \
  --channels 96 --max-seq-len 40 val_000000.bin:400 train_000001.bin:$((16 * 80 + 1 + 5)) >/dev/null
flags=(-e "$tmp/model.bin" -i "$tmp/train_*.bin" -j "$tmp/val_*.bin" -b 2 -t 40 -d 160 -l 1e-3 -c 0.1 -v 2 -m 2
  -s 0 -sh 0 -x 2)
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# two_processes OUT ARGS...: rank 1 in the background, rank 0 here; returns 1 if either failed.
two_processes() {
  local out=$1 port rank1 rc=0
  shift
  port=$(free_port)
  "$emu" "${flags[@]}" -o "$out" -pi tcp -pn 2 -pr 1 -ps "127.0.0.1:$port" "$@" >"$out.rank1" 2>&1 &
  rank1=$!
  timeout 300 "$emu" "${flags[@]}" -o "$out" -pi tcp -pn 2 -pr 0 -ps "127.0.0.1:$port" "$@" >"$out.rank0" 2>&1 || rc=1
  # Rank 1 ends within seconds of rank 0 (done, or failed and its connection gone).
  timeout 60 tail --pid="$rank1" -f /dev/null || { kill -KILL "$rank1"; rc=1; }
  wait "$rank1" || rc=1
  return $rc
}

LLMC_COMMUNICATOR=mpi timeout 300 "${MPIRUN[@]}" -np 2 "$emu" "${flags[@]}" -z 1 -o "$tmp/mpirun" \
  >"$tmp/mpirun.out" 2>&1 || { tail -n 20 "$tmp/mpirun.out"; fail "mpirun -np 2, -z 1"; }
LLMC_COMMUNICATOR=mpi two_processes "$tmp/tcp" -z 1 || { tail -n 20 "$tmp"/tcp.rank*; fail "-pi tcp, 2 processes, -z 1"; }
grep -q "2 ranks over sockets (-pi tcp), staged through host memory" "$tmp/tcp.rank0" ||
  fail "-pi tcp: the collectives were not staged through host memory"
cmp "$tmp/mpirun/main.log" "$tmp/tcp/main.log" ||
  fail "-pi tcp, 2 processes, -z 1: main.log differs from mpirun -np 2 (LLMC_COMMUNICATOR=mpi)"

if two_processes "$tmp/nccl"; then fail "the emulated NCCL ran without mpirun"; fi
grep -q "need MPI (one process per emulated GPU, under mpirun)" "$tmp/nccl.rank0" ||
  { tail -n 20 "$tmp/nccl".rank*; fail "over NCCL without mpirun: no clear reason"; }

exit_if_failed
echo "emulated GPU, 2 ranks without mpirun (-pi tcp): host-staged -z 1 byte-identical to mpirun -np 2; NCCL refused with the reason"
