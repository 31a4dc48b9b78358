# shellcheck shell=bash
# A step whose gradients hold a NaN or an Inf (docs/operations.md "Instability"), made on
# demand by the test seam LLMC_TEST_POISON_GRADIENT (llmc/test_hooks.h), for any trainer binary.
# Sourced by tests/cpu/check_nonfinite_step.sh, tests/emu/check_emu_trainer.sh (after
# tests/lib/common.sh) and scripts/gpu_reliability_lib.sh; the caller defines `fail MESSAGE` and
# the folder `$tmp`.
#
# nonfinite_step_checks NAME STEP VALUE COMMAND...: COMMAND is a trainer with its flags (model,
# shards, -x beyond STEP + 2, -n 1: a checkpoint every step); its runs write to $tmp/nonfinite-NAME-*.
# VALUE is nan or inf: the gradient set at step STEP.
#  1. with -sg 3: the run ends normally; the step line of STEP says "skipped: not finite", main.log
#     marks STEP skipped with a norm that is not finite, every later loss is finite, and the model
#     checkpointed before step STEP + 1 is byte for byte the one before STEP (no update), while the
#     step after it moves the weights again;
#  2. without -sl or -sg: the run stops with a non-zero status, its error names step STEP and says
#     nothing of it was checkpointed, and the newest checkpoint is that of step STEP (the state before
#     the poisoned step), which -y 1 resumes.
nonfinite_step_checks() {
  local name=$1 step=$2 value=$3
  shift 3
  local poison=$step
  [ "$value" = inf ] && poison="$step:inf"
  local skip=$tmp/nonfinite-$name-skip stop=$tmp/nonfinite-$name-stop rc next after
  next=$(printf '%08d' $((step + 1)))
  after=$(printf '%08d' $((step + 2)))

  # --- 1. skipped with -sg ---
  if ! LLMC_TEST_POISON_GRADIENT=$poison "$@" -sg 3 -o "$skip" >"$skip.log" 2>&1; then
    tail -n 5 "$skip.log"
    fail "$name: the run with -sg 3 and a $value gradient at step $step did not finish"
  else
    grep -Eq "^step +$step/[0-9]+ \| .*\| skipped: not finite \(-sl 0, -sg 3\)" "$skip.log" ||
      fail "$name: step $step's line does not say it was skipped as not finite"
    grep -Eq "^s:$step trl:[-0-9.]+ lr:[^ ]+ norm:-?(nan|inf) .*skipped:1" "$skip/main.log" ||
      fail "$name: main.log does not mark step $step skipped with a $value norm: $(grep "^s:$step " "$skip/main.log")"
    if awk -v s="$step" -F'[ :]' '$1 == "s" && $2 > s && $3 == "trl" && ($4 !~ /^-?[0-9.]+$/) { bad = 1 }
                                  END { exit !bad }' "$skip/main.log"; then
      fail "$name: a loss after the skipped step $step is not finite"
    fi
    if ! cmp -s "$skip/model_$(printf '%08d' "$step").bin" "$skip/model_$next.bin"; then
      fail "$name: the weights changed over the skipped step $step"
    elif cmp -s "$skip/model_$next.bin" "$skip/model_$after.bin"; then
      fail "$name: the weights did not change over step $((step + 1)) either: is anything updating?"
    else
      echo "$name: $value gradient at step $step skipped with -sg 3; weights unchanged over it, training went on"
    fi
  fi

  # --- 2. stopped without -sl or -sg ---
  rc=0
  LLMC_TEST_POISON_GRADIENT=$poison "$@" -o "$stop" >"$stop.log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then
    fail "$name: a $value gradient at step $step without -sl/-sg did not stop the run"
  elif ! grep -Eq "^error: .*step $step: train loss [^ ]+ / gradient norm -?(nan|inf) is not finite .*stopped without updating or checkpointing this state" "$stop.log"; then
    tail -n 3 "$stop.log"
    fail "$name: the error (status $rc) does not name step $step and what was kept"
  elif [ -e "$stop/DONE_$next" ] || [ -e "$stop/model_$next.bin" ] || [ ! -e "$stop/DONE_$(printf '%08d' "$step")" ]; then
    fail "$name: the newest checkpoint is not step $step's: $(cd "$stop" && ls DONE_* | tail -n 1)"
  elif ! "$@" -x $((step + 1)) -y 1 -o "$stop" >"$stop-resumed.log" 2>&1 ||
    ! grep -q "resume: continuing from checkpoint step $step " "$stop-resumed.log"; then
    tail -n 3 "$stop-resumed.log"
    fail "$name: -y 1 did not resume from step $step's checkpoint after the stop"
  else
    echo "$name: $value gradient at step $step without -sl/-sg: stopped (status $rc), newest checkpoint step $step, resumed"
  fi
}
