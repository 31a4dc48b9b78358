# shellcheck shell=bash
# Open MPI's launcher for the checks that start several ranks, sourced after strict mode:
#   source "$(dirname "$0")/../lib/mpirun.sh"
# It ends the check when there is no mpirun (make setup installs openmpi-bin), and gives it
# MPIRUN, the launcher as root (CI, containers) with more ranks than the machine has cores.
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (make setup installs openmpi-bin)" >&2; exit 1; }
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)

# rank_pid RANK PID...: prints which of the PIDs (processes mpirun started) is MPI rank RANK, from
# the rank Open MPI put in its environment; prints nothing when none is.
rank_pid() {
  local rank=$1 pid
  shift
  for pid in "$@"; do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$rank" && { echo "$pid"; return; }
  done
  return 0
}

# wait_for_ranks LAUNCHER BINARY STEP LOG TRIES: waits (TRIES times 0.1 s at the most) until the
# launcher's two BINARY processes run and LOG shows step STEP; sets the array `ranks` to their PIDs
# (fewer than two when they did not start).
wait_for_ranks() {
  local launcher=$1 binary=$2 step=$3 log=$4 tries=$5
  ranks=()
  for _ in $(seq "$tries"); do
    mapfile -t ranks < <(pgrep -P "$launcher" -x "$binary" || true)
    [ "${#ranks[@]}" -eq 2 ] && grep -q "^step  *$step/" "$log" && return
    sleep 0.1
  done
}
