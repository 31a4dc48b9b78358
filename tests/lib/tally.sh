# shellcheck shell=bash
# Counting assertions for the checks that go on after a failure (check_vs_llmc.sh,
# check_gpu_session.sh, check_gpu_dist.sh): `ok MESSAGE` and `fail MESSAGE` print one line each;
# `tally_end NAME SUMMARY` exits 1 with "NAME: F of N checks failed", else prints SUMMARY (with
# $checks in it, as the caller words it); `expect_lines TEXT WANT...` asserts that each WANT stands
# in TEXT (as a fixed string), an ok or fail line each.
failures=0
checks=0
ok() { echo "ok    $*"; checks=$((checks + 1)); }
fail() { echo "FAIL  $*"; failures=$((failures + 1)); }
tally_end() {
  if [ "$failures" -ne 0 ]; then
    echo "$1: $failures of $((checks + failures)) checks failed"
    exit 1
  fi
  echo "$2"
}
expect_lines() {
  local text=$1 want
  shift
  for want in "$@"; do
    if grep -qF -- "$want" <<<"$text"; then ok "table: ${want:0:90}"; else fail "table lacks: $want"; fi
  done
}
