# shellcheck shell=bash
# Waiting for something another process does: a file to appear, a line to be written, a process to
# end. Sourced by scripts/gpu_session.sh (its reliability step) and tests/lib/crash_scenarios.sh.

# wait_for SECONDS TEST...: waits until the command TEST succeeds, polled every 20 ms; status 1 when
# SECONDS pass first.
wait_for() {
  local tries=$(($1 * 50)) i
  shift
  for ((i = 0; i < tries; i++)); do
    "$@" 2>/dev/null && return 0
    sleep 0.02
  done
  return 1
}
has_line() { grep -Eq "$2" "$1"; }   # has_line FILE PATTERN
has_file() { compgen -G "$1" >/dev/null; }   # has_file GLOB
gone() { ! kill -0 "$1"; }   # gone PID
