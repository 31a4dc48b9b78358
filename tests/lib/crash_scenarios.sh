# shellcheck shell=bash
# Runs stopped by real signals and resumed (docs/operations.md), for any trainer: sourced after
# tests/lib/common.sh by tests/cpu/check_crash_resume.sh (the CPU trainer) and
# tests/emu/check_emu_crash_resume.sh (the CUDA trainer on the emulated GPU). The caller sets
# `trainer` (the binary) and `final` (the last step of its runs, whose model file is compared); the
# runs checkpoint every 3 steps (-n 3 in their flags) and write to $tmp/NAME. A run must take well
# over 0.9 s from checkpoint 6 to the start of its last step, each checkpoint file held 30 ms, so that
# the SIGTERM, sent up to 0.9 s after checkpoint 6 appears, finds a step to stop.

# shellcheck source=scripts/wait_for.sh
source scripts/wait_for.sh

same_as_reference() {  # same_as_reference <name> <reference dir> <resumed dir>
  local model
  model=model_$(printf %08d "$final").bin
  if cmp -s "$2/main.log" "$3/main.log" && cmp -s "$2/$model" "$3/$model"; then
    echo "$1: resumed main.log ($(grep -c trl: "$3/main.log") steps) and final model identical"
  else
    fail "$1: resumed run differs from the uninterrupted one"
    diff "$2/main.log" "$3/main.log" | head -5 || true
  fi
}

resume() {  # resume <dir> <flags...>: -y 1 must continue and finish with exit 0
  local dir=$1; shift
  "$trainer" "$@" -y 1 -o "$dir" >"$dir.resume.out" 2>&1 || fail "$dir: resume exited with $?"
  grep -o 'resume: continuing from checkpoint step [0-9]*' "$dir.resume.out" || fail "$dir: did not resume"
}

# run_past_checkpoint_6 <name> <pause ms> <flags...>: starts the run in the background, each
# finished checkpoint file held that long before its rename, and waits for checkpoint 6; `pid` is
# its process.
run_past_checkpoint_6() {
  local name=$1 pause=$2
  shift 2
  LLMC_TEST_PAUSE_BEFORE_RENAME_MS=$pause "$trainer" "$@" -o "$tmp/$name" >"$tmp/$name.out" 2>&1 &
  pid=$!
  wait_for 30 has_file "$tmp/$name/DONE_00000006" || fail "$name: no checkpoint 6 appeared"
}

# kill_in_checkpoint <name> <reference dir> <flags...>: SIGKILL in the middle of a checkpoint write
# after step 6's (each finished .tmp held 400 ms before its rename); the resume must clear the torn
# files and end as the reference.
kill_in_checkpoint() {
  local name=$1 ref=$2 pid rc partial
  shift 2
  run_past_checkpoint_6 "$name" 400 "$@"
  wait_for 30 has_file "$tmp/$name/*_0000000[7-9]*.tmp" ||
    wait_for 30 has_file "$tmp/$name/*_000000[1-4]*.tmp" || fail "$name: no .tmp of a later checkpoint"
  kill -9 "$pid"
  rc=0; wait "$pid" || rc=$?
  [ "$rc" = 137 ] || fail "$name: the run was not killed (exit $rc)"
  partial=$(cd "$tmp/$name" && ls | grep '\.tmp$' | tr '\n' ' ')
  echo "$name: killed during a checkpoint write, left: $partial"
  [ -n "$partial" ] || fail "$name: the kill did not land inside a checkpoint write"
  resume "$tmp/$name" "$@"
  grep -q 'removed [0-9]* unfinished .tmp' "$tmp/$name.resume.out" || fail "$name: the stale .tmp was not cleaned up"
  same_as_reference "$name" "$ref" "$tmp/$name"
}

# sigterm_resume <name> <reference dir> <flags...>: SIGTERM at a random moment after checkpoint 6
# (slowed down by 30 ms a checkpoint file, so that the signal reaches a running process): the step
# finishes, a checkpoint is written where it stopped, exit 0; the resume from there ends as the
# reference.
sigterm_resume() {
  local name=$1 ref=$2 pid rc stop
  shift 2
  run_past_checkpoint_6 "$name" 30 "$@"
  sleep "0.$((RANDOM % 10))"  # 0 to 0.9 s
  kill -TERM "$pid"
  rc=0; wait "$pid" || rc=$?
  [ "$rc" = 0 ] || fail "$name: SIGTERM should exit 0, got $rc"
  stop=$(sed -n 's/^stopped by SIGTERM before step \([0-9]*\).*/\1/p' "$tmp/$name.out")
  if [ -z "$stop" ]; then
    fail "$name: no 'stopped by SIGTERM' line"
    return
  fi
  [ -e "$tmp/$name/DONE_$(printf %08d "$stop")" ] || fail "$name: no checkpoint at step $stop"
  [ "$(grep trl: "$tmp/$name/main.log" | tail -1 | cut -d' ' -f1)" = "s:$((stop - 1))" ] ||
    fail "$name: log does not end at step $((stop - 1))"
  echo "$name: SIGTERM stopped the run before step $stop with a checkpoint there, exit 0"
  resume "$tmp/$name" "$@"
  grep -q "continuing from checkpoint step $stop " "$tmp/$name.resume.out" || fail "$name: did not resume from step $stop"
  same_as_reference "$name" "$ref" "$tmp/$name"
}
