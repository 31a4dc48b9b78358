#!/usr/bin/env bash
# The build without MPI (make NO_USE_MPI=1, the Makefile's MPI section), in its own folder build/no-mpi:
#  - no mpi.h in any of its objects' dependencies, no libmpi among the trainer's libraries;
#  - one process trains: main.log byte-identical to the MPI build's;
#  - two processes over -pi tcp: main.log byte-identical to the MPI build's two -pi tcp processes
#    (which tests/dist/check_nompi.sh compares with mpirun -np 2);
#  - under mpirun it stops, saying that it was built without MPI and to use -pi tcp or -pi fs;
#  - `make NO_USE_MPI=1 train_gpt2` refuses to put a binary without MPI in the top-level name.
# The first run compiles the host library into build/no-mpi (about a minute and a half on two
# cores); later runs rebuild only what changed.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/mpirun.sh
source "$(dirname "$0")/../lib/mpirun.sh"
make --no-print-directory -s NO_USE_MPI=1 -j2 build/no-mpi/train_gpt2
bin=build/no-mpi/train_gpt2

! ldd "$bin" | grep -q libmpi || fail "$bin links libmpi"
with_mpi_h=$(grep -l '/mpi\.h' build/no-mpi/train_gpt2.d build/no-mpi/llmc/*/*.d || true)
[ -z "$with_mpi_h" ] || fail "objects of the build without MPI include mpi.h: $with_mpi_h"
grep -q '/mpi\.h' build/llmc/dist/mpi_launch.d || fail "the MPI build's dependency files do not show mpi.h: the check above proves nothing"
out=$(make --no-print-directory NO_USE_MPI=1 train_gpt2 2>&1) && fail "make NO_USE_MPI=1 train_gpt2 built the top-level binary"
grep -qF "NO_USE_MPI=1 builds into build/no-mpi/" <<<"$out" || { echo "$out"; fail "no clear refusal of NO_USE_MPI=1 train_gpt2"; }

/usr/bin/python3 tests/lib/tiny_model_and_shards.py "$tmp" --seed 7 --first-token 17 \
  val_000000.bin:200 train_000001.bin:$((16 * 32 + 1 + 5)) >/dev/null
flags=(-e "$tmp/model.bin" -i "$tmp/train_*.bin" -j "$tmp/val_*.bin" -b 2 -t 16 -d 128 -l 3e-3 -m 3 -v 2 -s 0 -sh 0 -x 4)
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

./train_gpt2 "${flags[@]}" -o "$tmp/mpi_build_1" >"$tmp/mpi_build_1.out" 2>&1 || { cat "$tmp/mpi_build_1.out"; fail "MPI build, 1 process"; }
"$bin" "${flags[@]}" -o "$tmp/no_mpi_1" >"$tmp/no_mpi_1.out" 2>&1 || { cat "$tmp/no_mpi_1.out"; fail "build without MPI, 1 process"; }
cmp "$tmp/mpi_build_1/main.log" "$tmp/no_mpi_1/main.log" || fail "1 process: main.log differs between the builds"

for build in ./train_gpt2 "$bin"; do
  name=$( [ "$build" = "$bin" ] && echo no_mpi_2 || echo mpi_build_2 )
  port=$(free_port)
  "$build" "${flags[@]}" -o "$tmp/$name" -pi tcp -pn 2 -pr 1 -ps "127.0.0.1:$port" >"$tmp/$name.rank1" 2>&1 &
  rank1=$!
  LLMC_RENDEZVOUS_TIMEOUT=30 timeout 120 "$build" "${flags[@]}" -o "$tmp/$name" -pi tcp -pn 2 -pr 0 -ps "127.0.0.1:$port" \
    >"$tmp/$name.rank0" 2>&1 || { cat "$tmp/$name.rank0"; fail "$build, 2 processes over -pi tcp: rank 0"; }
  wait "$rank1" || { cat "$tmp/$name.rank1"; fail "$build, 2 processes over -pi tcp: rank 1"; }
done
cmp "$tmp/mpi_build_2/main.log" "$tmp/no_mpi_2/main.log" || fail "2 processes over -pi tcp: main.log differs between the builds"

if out=$(timeout 60 "${MPIRUN[@]}" -np 2 "$bin" "${flags[@]}" 2>&1); then fail "the build without MPI ran under mpirun"; fi
grep -qF "but this binary was built without MPI (make NO_USE_MPI=1): start every rank with -pi tcp" <<<"$out" ||
  { echo "$out"; fail "under mpirun, the build without MPI did not say what to do"; }

exit_if_failed
echo "NO_USE_MPI=1: no mpi.h, no libmpi; 1 process and 2 over -pi tcp equal to the MPI build's; mpirun refused with -pi tcp|fs named"
