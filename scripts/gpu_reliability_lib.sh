# shellcheck shell=bash
# The GPU session's reliability step (scripts/gpu_session.sh, step "reliability"): the faults a
# training run meets on a GPU, a row each, in at most GPU_SESSION_RELIABILITY_SECONDS (default 120)
# of the session's budget. Sourced after scripts/gpu_steps_lib.sh and scripts/wait_for.sh;
# reliability_rows needs `bin`, `dist`, `logs`, `corpus` and `attention_env` set. In this order:
#   1. SIGTERM at a random step of a d12 run (B=16, T=1024, 60 steps, checkpoints every 20; the
#      fallback attention and the heuristic's GEMM algorithms, whose results are the same in every
#      run): exit 0 with a checkpoint at the step it stopped before, which -y 1 resumes; main.log and
#      the final model bit-identical to an uninterrupted run's;
#   2. kill -9 while that run writes its step-40 checkpoint (LLMC_TEST_PAUSE_BEFORE_RENAME_MS holds
#      each finished .tmp before its rename): -y 1 takes the step-20 checkpoint, removes the torn
#      files, and ends bit-identical to the uninterrupted run;
#   3. a NaN in the device's gradients (scripts/nonfinite_step.sh, a small model): skipped with -sg,
#      the weights unchanged over it; without -sl/-sg a stop naming the step, its checkpoint kept;
#   4. memory another process holds (hold_gpu_memory takes all but 6 GiB of the free memory): a d12
#      run at B=16 stops before allocating and names the largest -b that fits, which then runs;
#   5. two ranks sharing the GPU (MPI, host staging), one SIGSTOPped after step 5: the watchdog
#      (--step-timeout 10) ends the job with its status 3 and no process left behind;
#   6. compute-sanitizer's racecheck, synccheck and initcheck on test_gpt2cu (both precisions, small
#      shapes) and on the dev/cuda checks (every family, small shapes, one run a tool): 0 reports.

# reliability_limited SECONDS LOG COMMAND...: `limited`, within what is left of the step's time too;
# 125 when that is spent.
reliability_limited() {
  local want=$1 left=$((reliability_end - SECONDS))
  shift
  if [ "$left" -lt 5 ]; then
    echo "$reliability_spent" >"$1"
    limit_used=0
    return 125
  fi
  limited $((want < left ? want : left)) "$@"
}
# reliability_time NAME SECONDS: status 0 when SECONDS of the step's time are left, else a FAIL row
# NAME saying that the step's time was spent. `left` is set to the seconds left.
reliability_time() {
  left=$((reliability_end - SECONDS))
  [ "$left" -ge "$2" ] && return 0
  row FAIL "$1" "$reliability_spent"
  return 1
}
# A row's figure for a non-zero status of reliability_limited.
reliability_status() {
  if [ "$1" = 125 ] && grep -qxF "$reliability_spent" "$2"; then echo "$reliability_spent"
  else status_text "$@"; fi
}

# end_process PID: kills the background process PID (a child of this shell) with -9 and reaps it.
end_process() {
  kill -9 "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}
# wait_exit MOST LEAST PID: waits for the background process PID (a child of this shell) to end, for
# what is left of the step's time but at most MOST seconds and at least LEAST, and sets `exit_rc` to
# its status; after that it is killed (-9) and exit_rc is 124.
wait_exit() {
  local seconds=$((reliability_end - SECONDS))
  seconds=$((seconds > $1 ? $1 : seconds < $2 ? $2 : seconds))
  if wait_for "$seconds" gone "$3"; then
    wait "$3"
    exit_rc=$?
  else
    end_process "$3"
    exit_rc=124
  fi
}

# The d12 runs of faults 1 and 2, each in $logs/reliability_NAME.
reliability_d12=(-e d12 -b 16 -t 1024 -x 60 -l 6e-4 -u 5 -v 0 -s 0 -sh 0 -n 20)
reliability_d12_env=(LLMC_ATTENTION=fallback LLMC_GEMM_SEARCH=heuristic)
# d12_fault_run NAME [VAR=VALUE...]: starts the run in the background; `fault_pid` is its process.
d12_fault_run() {
  local name=$1
  shift
  rm -rf "$logs/reliability_$name"
  env "${reliability_d12_env[@]}" "$@" "$bin/train_gpt2cu-bf16" -i "$corpus/corpus_train_*.bin" \
    "${reliability_d12[@]}" -o "$logs/reliability_$name" >"$logs/reliability_$name.log" 2>&1 &
  fault_pid=$!
}
# d12_resumed_as_reference NAME ROW STEP: resumes run NAME with -y 1; status 0 when it continued
# from checkpoint STEP and its main.log (less the MFU timings) and step-60 model are those of the
# uninterrupted run, else a FAIL row ROW saying how not.
d12_resumed_as_reference() {
  local name=$1 row_name=$2 step=$3 dir=$logs/reliability_$1 ref=$logs/reliability_reference rc
  reliability_limited 60 "$dir-resumed.log" env "${reliability_d12_env[@]}" "$bin/train_gpt2cu-bf16" \
    -i "$corpus/corpus_train_*.bin" "${reliability_d12[@]}" -y 1 -o "$dir"
  rc=$?
  if [ "$rc" -ne 0 ]; then row FAIL "$row_name" "the resume: $(reliability_status "$rc" "$dir-resumed.log")"; return 1; fi
  if ! grep -q "^resume: continuing from checkpoint step $step " "$dir-resumed.log"; then
    row FAIL "$row_name" "-y 1 did not continue from step $step: $(grep -m 1 '^resume:' "$dir-resumed.log")"
    return 1
  fi
  cmp -s <(without_mfu "$ref/main.log") <(without_mfu "$dir/main.log") &&
    cmp -s "$ref/model_00000060.bin" "$dir/model_00000060.bin" && return 0
  row FAIL "$row_name" "resumed from step $step, unlike the uninterrupted run: losses max rel $(max_rel_diff \
    "$ref/main.log" "$dir/main.log"), step-60 model $(cmp -s "$ref/model_00000060.bin" "$dir/model_00000060.bin" &&
    echo same || echo differs)"
  return 1
}

# 1. SIGTERM at a random step.
reliability_sigterm() {
  local name="SIGTERM at a random step, d12" target rc stop left
  reliability_time "$name" 20 || return
  target=$((5 + RANDOM % 30))
  d12_fault_run sigterm
  if ! wait_for "$left" has_line "$logs/reliability_sigterm/main.log" "^s:$target "; then
    end_process "$fault_pid"
    row FAIL "$name" "step $target never came: $(tail -n 1 "$logs/reliability_sigterm.log")"
    return
  fi
  kill -TERM "$fault_pid"
  wait_exit 60 10 "$fault_pid"
  rc=$exit_rc
  stop=$(sed -n 's/^stopped by SIGTERM before step \([0-9]*\): resume with -y 1 .*/\1/p' "$logs/reliability_sigterm.log")
  if [ "$rc" -ne 0 ]; then row FAIL "$name" "exit $rc after SIGTERM at step $target, not 0 ($logs/reliability_sigterm.log)"
  elif [ -z "$stop" ]; then row FAIL "$name" "no 'stopped by SIGTERM before step N' line: it ended before the signal came?"
  elif [ ! -e "$logs/reliability_sigterm/DONE_$(printf '%08d' "$stop")" ]; then
    row FAIL "$name" "stopped before step $stop without a checkpoint there"
  elif d12_resumed_as_reference sigterm "$name" "$stop"; then
    row PASS "$name" "signal after step $target: exit 0, checkpoint at step $stop; -y 1 ends bit-identical to the uninterrupted run"
  fi
}

# 2. kill -9 while the step-40 checkpoint is written.
reliability_kill_in_checkpoint() {
  local name="kill -9 during a checkpoint write, d12" torn left
  reliability_time "$name" 20 || return
  d12_fault_run killed LLMC_TEST_PAUSE_BEFORE_RENAME_MS=2000
  if ! wait_for "$left" has_file "$logs/reliability_killed/*_00000040*.tmp"; then
    end_process "$fault_pid"
    row FAIL "$name" "no .tmp of the step-40 checkpoint appeared: $(tail -n 1 "$logs/reliability_killed.log")"
    return
  fi
  end_process "$fault_pid"
  torn=$(cd "$logs/reliability_killed" && ls | grep -E '_00000040' | tr '\n' ' ')
  if [ -e "$logs/reliability_killed/DONE_00000040" ]; then
    row FAIL "$name" "the step-40 checkpoint was complete when the kill came"
  elif d12_resumed_as_reference killed "$name" 20; then
    row PASS "$name" "killed with ${torn:-nothing}of step 40 on disk: -y 1 took step 20's, ends bit-identical to the uninterrupted run"
  fi
}

# 3. a NaN in the device's gradients (scripts/nonfinite_step.sh; each of its runs at most 60 s).
reliability_nonfinite() {
  local name="NaN gradient on the GPU, -sg 3, none" tmp=$logs/reliability_nonfinite
  local failures=() left
  reliability_time "$name" 20 || return
  fail() { failures+=("$*"); }
  mkdir -p "$tmp"
  nonfinite_step_checks gpu 3 nan timeout -k 5 $((left / 3)) env "${attention_env[@]}" "$bin/train_gpt2cu-bf16" \
    -i "$corpus/corpus_train_*.bin" -e L2H4C64T64 -b 4 -t 64 -x 6 -l 1e-3 -v 0 -s 0 -sh 0 -n 1 >"$tmp.log" 2>&1
  unset -f fail
  if [ ${#failures[@]} -gt 0 ]; then row FAIL "$name" "${failures[0]} (logs: $tmp)"
  else row PASS "$name" "skipped with -sg 3, weights unchanged over it; without: stopped naming the step, resumable"; fi
  rm -f "$tmp"/nonfinite-*/*.bin
}

# 4. memory another process holds.
reliability_memory_taken() {
  local name="memory held by another process, d12" free hold holder rc fits log=$logs/reliability_memory left
  reliability_time "$name" 15 || return
  free=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits | head -n 1 | tr -dc '0-9')
  if [ -z "$free" ] || [ "$free" -le 8192 ]; then row FAIL "$name" "nvidia-smi gave ${free:-no} MiB free"; return; fi
  hold=$((free - 6144))
  "$bin/hold_gpu_memory" "$hold" >"$log-holder.log" 2>&1 &
  holder=$!
  if ! wait_for 30 has_line "$log-holder.log" '^holding '; then
    end_process "$holder"
    row FAIL "$name" "hold_gpu_memory $hold: $(tail -n 1 "$log-holder.log")"
    return
  fi
  reliability_limited 60 "$log.log" env "${attention_env[@]}" "$bin/train_gpt2cu-bf16" \
    -i "$corpus/corpus_train_*.bin" -e d12 -b 16 -t 1024 -r 1 -x 2 -v 0 -s 0 -sh 0
  rc=$?
  fits=$(sed -n 's/^  largest -b that fits: \([0-9]*\) .*/\1/p' "$log.log")
  if [ "$rc" -eq 0 ]; then row FAIL "$name" "-b 16 ran beside $hold MiB held: nothing was tested (-b too small?)"
  elif ! grep -q '^error: not enough GPU memory for B=16' "$log.log" || grep -qi 'out of memory' "$log.log"; then
    row FAIL "$name" "-b 16: $(reliability_status "$rc" "$log.log")"
  elif [ -z "$fits" ] || [ "$fits" -lt 1 ]; then row FAIL "$name" "the error names no -b that fits ($log.log)"
  else
    reliability_limited 60 "$log-fits.log" env "${attention_env[@]}" "$bin/train_gpt2cu-bf16" \
      -i "$corpus/corpus_train_*.bin" -e d12 -b "$fits" -t 1024 -r 1 -x 2 -v 0 -s 0 -sh 0
    rc=$?
    if [ "$rc" -eq 0 ]; then
      row PASS "$name" "$hold MiB held: -b 16 stopped before allocating ($(grep -o 'needs [0-9.]* [GM]iB per rank, [0-9.]* [GM]iB available' "$log.log")), its -b $fits ran"
    else row FAIL "$name" "-b $fits, which the plan said fits: $(reliability_status "$rc" "$log-fits.log")"; fi
  fi
  kill "$holder" 2>/dev/null
  wait "$holder" 2>/dev/null
}

# rank_process MARK RANK: the process whose command line holds MARK and whose environment says it is
# MPI rank RANK (Open MPI's OMPI_COMM_WORLD_RANK), or nothing.
rank_process() {
  local pid
  for pid in $(pgrep -f -- "$1"); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$pid"; return; }
  done
  return 0
}

# 5. two ranks on the GPU, one stopped.
reliability_stopped_rank() {
  local name="2 ranks on 1 GPU, one SIGSTOPped" mark=$logs/reliability_watchdog rc stopped survivors left
  reliability_time "$name" 20 || return
  mpi_launcher
  if [ ${#launcher[@]} -eq 0 ]; then
    row SKIP "$name" "$no_mpirun"
    return
  fi
  rm -rf "$mark"
  LLMC_GEMM_SEARCH=heuristic "${launcher[@]}" --allow-run-as-root --oversubscribe -np 2 "$bin/train_gpt2cu-fp32" \
    -i "$corpus/corpus_train_*.bin" -e L2H4C256T64 -b 4 -t 64 -x 1000000 -l 1e-4 -v 0 -s 0 -sh 0 --step-timeout 10 \
    -o "$mark" </dev/null >"$mark.log" 2>&1 &
  fault_pid=$!
  if ! wait_for "$left" has_line "$mark.log" '^step +5/'; then
    row FAIL "$name" "the 2 ranks did not reach step 5: $(tail -n 1 "$mark.log")"
  else
    stopped=$(rank_process "$mark" 1)
    if [ -z "$stopped" ]; then row FAIL "$name" "no process of rank 1 found"
    else
      kill -STOP "$stopped"
      wait_exit 40 20 "$fault_pid"
      rc=$exit_rc
      survivors=$(pgrep -f -- "$mark" | tr '\n' ' ')
      if [ -n "$survivors" ]; then row FAIL "$name" "processes left behind when the job ended (status $rc): $survivors"
      elif [ "$rc" -ne 3 ]; then row FAIL "$name" "the job ended with status $rc, not the watchdog's 3 ($mark.log)"
      elif ! grep -q 'no progress for .* (--step-timeout 10 s)' "$mark.log"; then
        row FAIL "$name" "no watchdog message naming --step-timeout ($mark.log)"
      else
        row PASS "$name" "the watchdog ended the job (status 3, no process left): $(grep -m 1 -o 'phase "[a-z]*", step [0-9]*' "$mark.log")"
      fi
    fi
  fi
  # Whatever is left (a watchdog that never fired): continued and ended, so that nothing holds the GPU.
  for stopped in $(pgrep -f -- "$mark"); do kill -CONT "$stopped"; kill -9 "$stopped"; done 2>/dev/null
  end_process "$fault_pid"
  return 0
}

# 6. compute-sanitizer's other tools.
reliability_sanitizers() {
  local tool
  limit_command=reliability_limited status_command=reliability_status
  for tool in racecheck synccheck initcheck; do
    sanitizer_rows "$tool" 60
    # shellcheck disable=SC2046
    sanitizer_run "$tool" "$tool dev/cuda --check --small" "$logs/$tool-dev-cuda.log" 90 \
      "$bin/run_all.sh" --check --small $(devcuda_benches)
  done
  limit_command="" status_command=""
}

# reliability_rows: the step, in the order of the header; its d12 runs' checkpoints removed after.
reliability_rows() {
  reliability_seconds=${GPU_SESSION_RELIABILITY_SECONDS:-120}
  # The step's own time, within the session's budget.
  reliability_end=$((SECONDS + reliability_seconds < budget ? SECONDS + reliability_seconds : budget))
  reliability_spent="not run: no time left (the reliability step's ${reliability_seconds}s, the session's ${budget}s)"
  local rc
  if [ -z "$corpus" ]; then
    row FAIL "reliability (faults)" "$corpus_missing"
  else
    reliability_limited 90 "$logs/reliability_reference.log" env "${reliability_d12_env[@]}" "$bin/train_gpt2cu-bf16" \
      -i "$corpus/corpus_train_*.bin" "${reliability_d12[@]}" -o "$logs/reliability_reference"
    rc=$?
    if [ "$rc" -ne 0 ]; then
      row FAIL "uninterrupted d12 run (faults 1, 2)" "$(reliability_status "$rc" "$logs/reliability_reference.log")"
    else
      reliability_sigterm
      reliability_kill_in_checkpoint
    fi
    rm -f "$logs"/reliability_*/*.bin
    reliability_nonfinite
    reliability_memory_taken
    reliability_stopped_rank
  fi
  reliability_sanitizers
}
