#!/usr/bin/env bash
# Runs benchmark binaries from this script's folder: `run_all.sh [--check [--small]] NAME...`.
# With --check: each binary's PASS/FAIL lines, then one summary line; exit 1 if any check failed
# or a binary exited non-zero without saying why; with --small too, only the small shapes (what a
# slow tool such as compute-sanitizer can run through). Without: checks and timings, stopping at a
# failure.
set -u
cd "$(dirname "$0")"
if [ "${1:-}" != "--check" ]; then
  for b in "$@"; do
    echo "== $b"
    ./"$b" all || exit 1
  done
  exit 0
fi
shift
small=()
if [ "${1:-}" = "--small" ]; then small=(--small); shift; fi
pass=0
fail=0
for b in "$@"; do
  out=$(./"$b" all --check "${small[@]}" 2>&1)
  rc=$?
  echo "$out"
  pass=$((pass + $(grep -c '^PASS' <<<"$out")))
  fails_here=$(grep -c '^FAIL' <<<"$out")
  fail=$((fail + fails_here))
  if [ "$rc" -ne 0 ] && [ "$fails_here" -eq 0 ]; then
    echo "FAIL  $b exited with status $rc"
    fail=$((fail + 1))
  fi
done
echo "dev/cuda: $pass checks passed, $fail failed"
[ "$fail" -eq 0 ]
