# shellcheck shell=bash
# For checks that start processes and may stop them (SIGSTOP): every PID added to pids is continued
# and killed when the check ends, whatever happens, so a failing check leaves nothing behind; and
# running PID tells whether a process still runs.
pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill -CONT "$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
  done
}
trap cleanup EXIT

# A process is gone once it no longer runs: it has exited, or is a zombie nobody reaped yet.
running() { [ -e "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
