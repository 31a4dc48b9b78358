#!/usr/bin/env bash
# Two ranks of the CUDA trainer on the emulated GPU (docs/cuda-emulator.md), one process per
# emulated GPU, under ASan + UBSan, FP32:
#  (a) mpirun -np 2 with ZeRO-0 and ZeRO-1, --overlap 0 and 1, over the emulated NCCL and over MPI
#      with host staging (LLMC_COMMUNICATOR): every train loss, val loss, learning rate and
#      gradient norm within the FP32 bar (1e-4 relative) of one rank with the same total batch
#      (train_gpt2, which check_emu_trainer.sh holds the one-rank emulated trainer to); one run in
#      the seeded stream order (LLMC_EMU_STREAMS=seeded) and with the GEMM algorithms timed by rank 0
#      and sent to rank 1 (LLMC_GEMM_SEARCH=timed), the others in the latest order, heuristic;
#      AdamW in one launch for each rank's slices of the tensors; the --overlap 1 runs with each
#      micro-step a CUDA graph (LLMC_CUDA_GRAPHS=on: the buckets' collectives captured over NCCL; the
#      host staging after the graphs over MPI);
#  (b) one rank stopped (SIGSTOP) in the middle of training: the other ends the job through
#      --step-timeout, with the watchdog's exit status and message.
# Open MPI keeps allocations until exit that LeakSanitizer reports, so leak checking is off here.
# Skips (77) without the CUDA headers.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/mpirun.sh
source "$(dirname "$0")/../lib/mpirun.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/emu_fp32_trainer.sh
source tests/lib/emu_fp32_trainer.sh
export ASAN_OPTIONS=detect_leaks=0

# 3 layers, 3 heads of 32, T=40, vocabulary 1000. B*T = 80 tokens per window; the shards hold 16
# and 8 windows (+ spare tokens), multiples of 2, so one rank and two read the same windows.
/usr/bin/python3 tests/lib/tiny_model_and_shards.py "$tmp" --seed 11 --first-token 5 --layers 3 --heads 3 \
  --channels 96 --max-seq-len 40 val_000000.bin:400 train_000001.bin:$((16 * 80 + 1 + 5)) \
  train_000002.bin:$((8 * 80 + 1 + 3)) >/dev/null
flags=(-e "$tmp/model.bin" -i "$tmp/train_*.bin" -j "$tmp/val_*.bin" -b 2 -t 40 -d 160 -l 1e-3 -c 0.1 -v 2 -m 2
  -s 0 -sh 0)

# --- (a) two ranks against one ------------------------------------------------------------------
./train_gpt2 "${flags[@]}" -x 2 -o "$tmp/one" >"$tmp/one.out" 2>&1 || fail "train_gpt2 (log: $tmp/one.out)"
worst=()
for communicator in nccl mpi; do
  for z in 0 1; do
    for overlap in 0 1; do
      name=${communicator}_z${z}_overlap$overlap
      streams=latest search=heuristic graphs=off
      [ "$name" = nccl_z1_overlap1 ] && streams=seeded search=timed
      [ "$overlap" = 1 ] && graphs=on
      if ! LLMC_COMMUNICATOR=$communicator LLMC_EMU_STREAMS=$streams LLMC_EMU_SEED=$((z * 2 + overlap)) \
        LLMC_GEMM_SEARCH=$search LLMC_CUDA_GRAPHS=$graphs \
        timeout 300 "${MPIRUN[@]}" -np 2 "$emu" "${flags[@]}" -x 2 -z "$z" --overlap "$overlap" -o "$tmp/$name" \
        >"$tmp/$name.out" 2>&1; then
        fail "$name (log: $tmp/$name.out)"
        grep -E 'rror|FAIL' "$tmp/$name.out" | head -n 5 | sed 's/^/      /'
        continue
      fi
      want=$([ "$communicator" = nccl ] && echo "2 rank(s) over NCCL" || echo "2 ranks over MPI, staged through host memory")
      grep -qF "$want" "$tmp/$name.out" || fail "$name: the start-up line does not say '$want'"
      [ "$search" = heuristic ] ||
        grep -q '^kernel choices: rank 0 timed the cuBLASLt algorithms of [1-9][0-9]* GEMM shapes in [0-9.]* s, every rank runs them$' \
          "$tmp/$name.out" || fail "$name: rank 0's timed GEMM algorithms did not go to every rank"
      if result=$(PYTHONPATH=tests/lib python3 - "$tmp/$name/main.log" "$tmp/one/main.log" "$name" <<'PY'
import sys
from main_log import parse, summary, worst_rel_errors
ours, one, label = parse(sys.argv[1]), parse(sys.argv[2]), sys.argv[3]
tolerance = {"trl": 1e-4, "tel": 1e-4, "lr": 1e-6, "norm": 1e-4}
print(summary(worst_rel_errors(ours, one, tolerance, label)))
PY
      ); then
        echo "ok    $name ($streams stream order) against one rank: $result"
        worst+=("$result")
      else
        fail "$result"
      fi
    done
  done
done

# --- (b) a stopped rank ends the job through --step-timeout --------------------------------------
timeout=6
out=$tmp/stop.out
LLMC_COMMUNICATOR=nccl "${MPIRUN[@]}" -np 2 "$emu" "${flags[@]}" -x 100000 -v 0 --step-timeout "$timeout" \
  -o "$tmp/stop" >"$out" 2>&1 &
launcher=$!
wait_for_ranks "$launcher" train_gpt2cu 3 "$out" 600
stopped=$(rank_pid 1 "${ranks[@]}")
if [ -z "$stopped" ]; then
  kill -KILL "$launcher" "${ranks[@]}" 2>/dev/null || true
  cat "$out"
  fail "the 2-rank run did not reach step 3 with a rank 1 to stop"
else
  kill -STOP "$stopped"
  start=$SECONDS
  set +e
  timeout $((timeout + 30)) tail --pid="$launcher" -f /dev/null
  gone=$?
  set -e
  if [ "$gone" -ne 0 ]; then
    kill -CONT "$stopped" 2>/dev/null || true
    kill -KILL "$launcher" "${ranks[@]}" 2>/dev/null || true
    fail "the job outlived --step-timeout $timeout by 30 s after rank 1 stopped"
  fi
  set +e
  wait "$launcher"
  rc=$?
  set -e
  kill -KILL "$stopped" 2>/dev/null || true
  message=$(grep "^error: rank 0: no progress" "$out" || true)
  [ "$rc" -eq 3 ] || fail "mpirun exited with $rc, not the watchdog's 3 (log: $out)"
  grep -Eq "^error: rank 0: no progress for [0-9.]+ s \(--step-timeout $timeout s\)" <<<"$message" ||
    fail "rank 0 did not say it made no progress (log: $out)"
  [ "$failures" -eq 0 ] && echo "ok    rank 1 stopped: job gone $((SECONDS - start)) s later, exit 3: $message"
fi

exit_if_failed
echo "emulated trainer on 2 ranks: 8 runs (ZeRO-0/1, --overlap 0/1, NCCL/MPI) within 1e-4 of one rank; a stopped rank ends the job"
