# shellcheck shell=bash
# Shared set-up of the tests/<area>/check_*.sh that drive the CPU trainer, sourced after strict mode:
#   set -euo pipefail
#   source "$(dirname "$0")/../lib/common.sh"
# It moves to the repository root, builds ./train_gpt2, and gives the check an empty scratch dir
# $tmp = build/tmp/<check name>. One OpenMP thread unless OMP_NUM_THREADS says otherwise: these
# models are too small to gain from two, and on a busy machine OpenMP's waiting threads make steps
# 10x slower. (The CPU backend's results do not depend on the thread count.)
# The check writes its inputs with `tests_python <<'PY' ... PY`, in which the modules of tests/lib
# and scripts are importable. It reports problems with `fail MESSAGE`, which counts them and goes
# on, and ends with `exit_if_failed` before its summary line.

cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
make -s train_gpt2 >/dev/null
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

tmp=build/tmp/$(basename "$0" .sh)
rm -rf "$tmp"
mkdir -p "$tmp"

# python3 running the program on stdin, with tests/lib and scripts on the module path and the
# scratch dir as sys.argv[1].
tests_python() { PYTHONPATH="tests/lib:scripts${PYTHONPATH:+:$PYTHONPATH}" python3 - "$tmp"; }

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

exit_if_failed() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures failures"
    exit 1
  fi
}
