#!/usr/bin/env bash
# Ranks started without MPI (docs/multi-gpu.md, "Ranks without MPI"): processes started by this
# script, without mpirun, that meet over -pi tcp or -pi fs.
#  1. every collective of SocketCommunicator (tests/dist/test_collectives.cpp) on 4 processes, over
#     tcp and over fs: closed-form sums, the same bits on every rank, sums in rank order bit for
#     bit, 12 MB buffers, and rank 0's 128-byte id to all (what NCCL's unique id takes);
#  2. the CPU trainer, tiny model of tests/lib/tiny_model_and_shards.py: two processes
#     -pi tcp -pn 2 -pr 0/1 with -z 0 and -z 1, and -pi fs -z 1 (once with rank and size from
#     Slurm's variables, as srun without MPI sets them), against `mpirun -np 2`: main.log
#     byte-identical. Why that bar: with two ranks every sum is one float addition, x0 + x1, in MPI
#     as over the sockets, and addition commutes, so nothing may differ. Four -pi tcp processes with
#     -z 1 against `mpirun -np 4`: within 1e-5 relative, docs/contract.md's bar between runs whose
#     sums are grouped differently (rank 0 adds in rank order, MPI in its own);
#  3. what goes wrong ends every process with an error that says what, within seconds: a rank whose
#     peers never come (LLMC_RENDEZVOUS_TIMEOUT), two processes with the same -pr, another -pn,
#     a stranger's bytes at rank 0's port, ranks that run different collectives, a rank killed
#     mid-run, and a rank stopped mid-run (the watchdog, --step-timeout, ends rank 0; the stopped rank ends once
#     it runs again, as it cannot be ended from another machine without a launcher).
# The flag refusals are unit tests (tests/unit/test_rank_options.cpp); here a few through the trainer.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/mpirun.sh
source "$(dirname "$0")/../lib/mpirun.sh"
make --no-print-directory -s build/mpi_tests/test_collectives
export LLMC_RENDEZVOUS_TIMEOUT=30

free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# shellcheck source-path=SCRIPTDIR source=../lib/tracked_processes.sh
source "$(dirname "$0")/../lib/tracked_processes.sh"

# wait_all PID...: waits (at most 120 s) for each; returns 1 when any exited non-zero or had to be
# killed.
wait_all() {
  wait_within 120 "$@"
}
# wait_within SECONDS PID...: as wait_all, but kills whatever still runs after SECONDS.
wait_within() {
  local limit=$1 start=$SECONDS pid rc=0 alive
  shift
  while :; do
    alive=0
    for pid in "$@"; do running "$pid" && alive=1; done
    [ "$alive" = 0 ] && break
    if [ $((SECONDS - start)) -ge "$limit" ]; then
      echo "still running after ${limit}s: $*"
      for pid in "$@"; do kill -CONT "$pid" 2>/dev/null || true; kill -KILL "$pid" 2>/dev/null || true; done
      rc=1
      break
    fi
    sleep 0.1
  done
  for pid in "$@"; do wait "$pid" || rc=1; done
  return $rc
}

# --- 1. the collectives on 4 processes --------------------------------------------------------
for method in tcp fs; do
  dir=$tmp/collectives_$method
  mkdir -p "$dir"
  port=$(free_port)
  started=()
  for rank in 3 2 1 0; do  # rank 0 last: the others wait for it
    args=(4 "$method" "$dir" "$rank")
    [ "$method" = tcp ] && args+=("127.0.0.1:$port")
    build/mpi_tests/test_collectives "${args[@]}" >"$dir/rank$rank.out" 2>&1 &
    started+=($!)
  done
  pids+=("${started[@]}")
  wait_all "${started[@]}" || { cat "$dir"/rank*.out; fail "collectives over -pi $method"; }
  grep -h "collectives: .* passed on 4 ranks (-pi $method)" "$dir/rank0.out" || fail "no summary from rank 0 (-pi $method)"
done

# --- 2. the trainer without mpirun against mpirun -----------------------------------------------
/usr/bin/python3 tests/lib/tiny_model_and_shards.py "$tmp" --seed 11 --first-token 17 \
  val_000000.bin:200 train_000001.bin:$((16 * 32 + 1 + 5)) train_000002.bin:$((8 * 32 + 1 + 3)) >/dev/null
flags=(-e "$tmp/model.bin" -i "$tmp/train_*.bin" -j "$tmp/val_*.bin" -b 2 -t 16 -d 256 -l 3e-3 -u 2 -q 0.1 -c 0.1
       -m 3 -v 3 -s 0 -sh 0 -x 6)

# start_ranks N METHOD OUT ARGS...: starts N trainer processes with -pi METHOD -pn N -pr 0..N-1 and
# output dir OUT (rank r's messages in OUT.rank<r>), rank 0 last; their PIDs in `started`, rank
# order.
start_ranks() {
  local n=$1 method=$2 out=$3 rank
  shift 3
  local meet=(-ps "127.0.0.1:$(free_port)")
  if [ "$method" = fs ]; then
    mkdir -p "$out.meet"
    meet=(-pf "$out.meet")
  fi
  started=()
  for rank in $(seq $((n - 1)) -1 0); do
    ./train_gpt2 "${flags[@]}" -o "$out" -pi "$method" -pn "$n" -pr "$rank" "${meet[@]}" "$@" \
      >"$out.rank$rank" 2>&1 &
    started=($! "${started[@]}")
  done
  pids+=("${started[@]}")
}
run_ranks() {  # run_ranks N METHOD OUT ARGS...: start_ranks and wait for all of them
  start_ranks "$@"
  wait_all "${started[@]}" || { cat "$3".rank*; fail "$3: -pi $2 with $1 processes"; }
}
run_mpirun() {  # run_mpirun N OUT ARGS...
  local n=$1 out=$2
  shift 2
  timeout 120 "${MPIRUN[@]}" -np "$n" ./train_gpt2 "${flags[@]}" -o "$out" "$@" >"$out.stdout" 2>&1 ||
    { cat "$out.stdout"; fail "$out: mpirun -np $n"; }
}

for z in 0 1; do
  run_mpirun 2 "$tmp/mpi2_z$z" -z "$z"
  run_ranks 2 tcp "$tmp/tcp2_z$z" -z "$z"
  cmp "$tmp/mpi2_z$z/main.log" "$tmp/tcp2_z$z/main.log" || fail "-pi tcp, 2 processes, -z $z: main.log differs from mpirun -np 2"
done
run_ranks 2 fs "$tmp/fs2_z1" -z 1
cmp "$tmp/mpi2_z1/main.log" "$tmp/fs2_z1/main.log" || fail "-pi fs, 2 processes, -z 1: main.log differs from mpirun -np 2"
[ ! -e "$tmp/fs2_z1.meet/llmc_rendezvous.txt" ] || fail "-pi fs left its address file behind"
# As srun starts tasks without MPI: rank and size from SLURM_PROCID and SLURM_NTASKS, no -pn or -pr.
mkdir -p "$tmp/slurm.meet"
started=()
for rank in 1 0; do
  SLURM_PROCID=$rank SLURM_NTASKS=2 SLURM_LOCALID=$rank ./train_gpt2 "${flags[@]}" -z 1 -o "$tmp/slurm" -pi fs \
    -pf "$tmp/slurm.meet" >"$tmp/slurm.rank$rank" 2>&1 &
  started+=($!)
done
pids+=("${started[@]}")
wait_all "${started[@]}" || { cat "$tmp"/slurm.rank*; fail "-pi fs with Slurm's variables"; }
cmp "$tmp/mpi2_z1/main.log" "$tmp/slurm/main.log" || fail "-pi fs with Slurm's variables: main.log differs from mpirun -np 2"
echo "-pi tcp (-z 0, -z 1), -pi fs (-z 1) and -pi fs with Slurm's variables, 2 processes without mpirun: main.log" \
  "byte-identical to mpirun -np 2"

run_mpirun 4 "$tmp/mpi4_z1" -z 1
run_ranks 4 tcp "$tmp/tcp4_z1" -z 1
/usr/bin/python3 - "$tmp/tcp4_z1/main.log" "$tmp/mpi4_z1/main.log" <<'PY' || fail "-pi tcp, 4 processes: losses differ from mpirun -np 4"
import sys
sys.path.insert(0, "tests/lib")
from main_log import parse, summary, worst_rel_errors
a, b = parse(sys.argv[1]), parse(sys.argv[2])
if set(a) != set(b): sys.exit(f"events differ: {sorted(set(a) ^ set(b))}")
tolerance = {key: 1e-5 if key in ("trl", "tel") else 1e-4 for _, key in b}
print("-pi tcp, 4 processes, -z 1 vs mpirun -np 4: " + summary(worst_rel_errors(a, b, tolerance, "tcp4")))
PY

# --- 3. failures end every process with a message -------------------------------------------------
expect_error() {  # expect_error "message part" command...: fails unless the command fails saying it
  local want=$1 out
  shift
  if out=$(timeout 60 "$@" 2>&1); then fail "expected an error from: $*"; return; fi
  grep -qF -- "$want" <<<"$out" || { echo "$out"; fail "error of '$*' does not say '$want'"; }
}
expect_error "error: -pn 2: with -pi mpi (the default) the processes come from a launcher" ./train_gpt2 -pn 2
expect_error "error: -pr 2: not a rank of -pn 2" ./train_gpt2 -pi tcp -pn 2 -pr 2 -ps 127.0.0.1
expect_error "error: -pi: unknown method 'ssh' (mpi, tcp or fs)" ./train_gpt2 -pi ssh
expect_error "error: -pf $tmp/none: no such folder" ./train_gpt2 -pi fs -pn 2 -pr 0 -pf "$tmp/none"

port=$(free_port)
start=$SECONDS
LLMC_RENDEZVOUS_TIMEOUT=2 expect_error "error: -pi tcp (-ps 127.0.0.1:$port): rank 0 did not answer within 2 s" \
  ./train_gpt2 -pi tcp -pn 2 -pr 1 -ps "127.0.0.1:$port"
LLMC_RENDEZVOUS_TIMEOUT=2 expect_error "rank(s) 1, 2 of -pn 3 did not connect within 2 s" \
  ./train_gpt2 -pi tcp -pn 3 -pr 0 -ps "127.0.0.1:$port"
mkdir -p "$tmp/alone"
LLMC_RENDEZVOUS_TIMEOUT=2 expect_error "rank 0 did not become reachable within 2 s (no file yet)" \
  ./train_gpt2 -pi fs -pn 2 -pr 1 -pf "$tmp/alone"
[ $((SECONDS - start)) -le 20 ] || fail "three 2-second rendezvous timeouts took $((SECONDS - start)) s"

# Two processes with -pr 1: rank 0 refuses the second, and all three end.
port=$(free_port)
started=()
for rank in 1 1 0; do
  ./train_gpt2 "${flags[@]}" -pi tcp -pn 3 -pr "$rank" -ps "127.0.0.1:$port" >"$tmp/twice.${#started[@]}" 2>&1 &
  started+=($!)
done
pids+=("${started[@]}")
wait_within 20 "${started[@]}" && fail "two processes with -pr 1 were not refused"
grep -q "^error: -pi tcp (-ps 127.0.0.1:$port): rank 1 connected twice (two processes with -pr 1?)" "$tmp/twice.2" ||
  { cat "$tmp"/twice.*; fail "rank 0 did not name the rank that came twice"; }

# Another -pn on rank 1 than on rank 0.
port=$(free_port)
./train_gpt2 "${flags[@]}" -pi tcp -pn 3 -pr 1 -ps "127.0.0.1:$port" >"$tmp/pn.1" 2>&1 &
started=($!)
./train_gpt2 "${flags[@]}" -pi tcp -pn 2 -pr 0 -ps "127.0.0.1:$port" >"$tmp/pn.0" 2>&1 &
started+=($!)
pids+=("${started[@]}")
wait_within 20 "${started[@]}" && fail "ranks with different -pn were not refused"
grep -q "says rank 1 of -pn 3, but rank 0 has -pn 2: start every rank with the same -pn" "$tmp/pn.0" ||
  { cat "$tmp"/pn.*; fail "rank 0 did not name the two -pn"; }

# A stranger's bytes at rank 0's port.
port=$(free_port)
./train_gpt2 "${flags[@]}" -pi tcp -pn 2 -pr 0 -ps "127.0.0.1:$port" >"$tmp/stranger" 2>&1 &
rank0=$!
pids+=("$rank0")
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'GET / HTTP/1.0\r\nHost: rank0\r\n\r\n--------------------' >&3) 2>/dev/null && break
  sleep 0.1
done
wait_within 20 "$rank0" && fail "rank 0 accepted a stranger"
grep -q "^error: -pi tcp (-ps 127.0.0.1:$port): the connection from 127.0.0.1:[0-9]* is not a rank of this trainer" \
  "$tmp/stranger" || { cat "$tmp/stranger"; fail "no clear error for a stranger's bytes"; }

# Ranks that run different collectives: rank 1 evaluates every step, rank 0 every 3rd.
port=$(free_port)
./train_gpt2 "${flags[@]}" -v 1 -pi tcp -pn 2 -pr 1 -ps "127.0.0.1:$port" --step-timeout 20 >"$tmp/differ.1" 2>&1 &
started=($!)
./train_gpt2 "${flags[@]}" -v 3 -pi tcp -pn 2 -pr 0 -ps "127.0.0.1:$port" --step-timeout 20 >"$tmp/differ.0" 2>&1 &
started+=($!)
pids+=("${started[@]}")
wait_within 30 "${started[@]}" && fail "ranks with different collectives trained on"
grep -q "the ranks ran different collectives" "$tmp/differ.0" ||
  { cat "$tmp"/differ.*; fail "rank 0 did not say that the ranks ran different collectives"; }

# A rank killed mid-run: rank 0 ends at its next collective, naming it.
start_ranks 2 tcp "$tmp/killed" -x 1000000
for _ in $(seq 300); do grep -q "^step  *3/" "$tmp/killed.rank0" && break; sleep 0.1; done
kill -KILL "${started[1]}"
wait "${started[1]}" 2>/dev/null || true  # (2>/dev/null: bash's "Killed" line for it)
wait_within 20 "${started[0]}" && fail "rank 0 went on after rank 1 was killed"
grep -Eq "^error: rank 0: rank 1( closed its connection|: connection lost)" "$tmp/killed.rank0" ||
  { cat "$tmp/killed.rank0"; fail "rank 0 did not say that rank 1 is gone"; }

# A rank stopped mid-run: the watchdog ends rank 0 with status 3; the stopped rank ends once it
# runs again, finding rank 0 gone.
start_ranks 2 tcp "$tmp/stopped" -x 1000000 --step-timeout 2
for _ in $(seq 300); do grep -q "^step  *3/" "$tmp/stopped.rank0" && break; sleep 0.1; done
kill -STOP "${started[1]}"
start=$SECONDS
set +e
wait_within 14 "${started[0]}"
wait "${started[0]}"
rc=$?
set -e
[ "$rc" -eq 3 ] || { cat "$tmp/stopped.rank0"; fail "rank 0 exited with $rc, not the watchdog's 3, $((SECONDS - start)) s after rank 1 stopped"; }
grep -Eq '^error: rank 0: no progress for [0-9.]+ s \(--step-timeout 2 s\)' "$tmp/stopped.rank0" ||
  fail "rank 0 did not say where it waited"
kill -CONT "${started[1]}"
wait_within 20 "${started[1]}" && fail "rank 1 went on after rank 0 ended"
grep -Eq "^error: rank 1: rank 0( closed its connection|: connection lost)" "$tmp/stopped.rank1" ||
  { cat "$tmp/stopped.rank1"; fail "rank 1 did not say that rank 0 is gone"; }
echo "refused: -pr twice, another -pn, a stranger, different collectives; a killed rank and a stopped one ended every process"

exit_if_failed
echo "ranks without MPI: collectives on 4 processes over tcp and fs, trainer runs equal to mpirun's, failures end every process"
