#!/usr/bin/env bash
# The host code under AddressSanitizer and UndefinedBehaviorSanitizer (`make sanitize`, objects and
# binaries in build/sanitize/): the doctest unit tests, then the CPU trainer on a tiny model along
# the paths a real run takes: training with checkpoints (and deleting old ones), validation,
# HellaSwag, sampling with the tokenizer's decoder, a resume from the newest checkpoint, and two
# ranks under mpirun sending their gradients in buckets during the backward pass. Any
# report (out-of-bounds access, use after free, leak, undefined behaviour) fails the check: the
# binaries stop at the first one (-fno-sanitize-recover=all).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"

start=$SECONDS
make -s -j2 sanitize  # two jobs: the CI machine's two cores, shared with run_all's background CUDA build
build_seconds=$((SECONDS - start))

# LeakSanitizer's check at exit is ASan's default here; set anyway, so that an ASAN_OPTIONS from the
# environment cannot turn it off. Without a launcher MPI is never initialised, and libmpi leaves no
# leak reports: no suppression file. (detect_stack_use_after_return=1 would make the unit tests
# take half as long again.)
export ASAN_OPTIONS=detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1

# sanitized NAME COMMAND...: runs COMMAND with its output in $tmp/NAME.out; fails on a non-zero
# exit or on any sanitizer report, and shows the report, else the first failed doctest assertion,
# else the output's end.
sanitized() {
  local name=$1; shift
  local out=$tmp/$name.out rc=0
  "$@" >"$out" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ] || grep -Eq 'Sanitizer|runtime error:' "$out"; then
    fail "$name: exit $rc under the sanitizers (output: $out)"
    grep -E -m 1 -A 20 'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$out" || grep -m 1 -A 3 ': ERROR: ' "$out" ||
      tail -n 20 "$out"
  fi
}

start=$SECONDS
sanitized unit_tests build/sanitize/unit_tests --no-intro --no-version
cases=$(sed -n 's/^\[doctest\] test cases: *\([0-9]*\).*/\1/p' "$tmp/unit_tests.out")

# Shards of tokens 0..63 and a HellaSwag eval file of 12 examples, 4 rows each: with -b 3 rows
# per batch, examples straddle batches, and every third one ends on a batch's last row, whose flush
# retires it (by the 12th, a whole block of the eval's deque is freed there, for ASan to watch).
tests_python <<'PY'
import random, sys
from token_shards import learnable_stream, write_split
from hellaswag_to_evalfile import write_evalfile
d = sys.argv[1]
random.seed(2)
write_split(d, 2, 400, 200, lambda n: learnable_stream(n, 7, 3, 0.9))
tokens = lambda n: [random.randrange(64) for _ in range(n)]
write_evalfile(f"{d}/hellaswag.bin",
               [(tokens(1 + i % 3), [tokens(1 + (i + k) % 4) for k in range(4)], i % 4) for i in range(12)])
PY

flags=(-i "$tmp/train_*.bin" -j "$tmp/val_0.bin" -e L1H2C16T32 -b 3 -t 16 -l 1e-2 -v 4 -m 2 -s 4 -g 8
       -n 2 -nk 2 -h 1 --hellaswag-file "$tmp/hellaswag.bin" -o "$tmp/run")
sanitized train build/sanitize/train_gpt2 "${flags[@]}" -x 4
exit_if_failed  # the rest resumes this run
sanitized resume build/sanitize/train_gpt2 "${flags[@]}" -x 6 -y 1
grep -q 'resume: continuing from checkpoint step 4' "$tmp/resume.out" || fail "the second run did not resume from step 4"
[ "$(grep -c trl: "$tmp/run/main.log")" = 6 ] || fail "main.log should have 6 trl lines after the resume"
[ "$(grep -o '^s:[0-9]* eval' "$tmp/run/main.log" | tr '\n' ' ')" = "s:0 eval s:4 eval s:6 eval " ] ||
  fail "HellaSwag eval lines expected at steps 0, 4 and 6"
grep -q -- '--- sample at step 4 ---' "$tmp/train.out" || fail "no sample printed at step 4"
[ ! -e "$tmp/run/model_00000002.bin" ] || fail "-nk 2 kept checkpoint 2"
[ -e "$tmp/run/model_00000006.bin" ] || fail "no checkpoint at step 6"
# Two ranks under mpirun, -z 0 and -z 1, sending their gradient buckets during the backward pass
# (llmc/dist/host_bucket_sync.h). Open MPI keeps allocations until exit that LeakSanitizer would
# report as leaks, so leak checking is off for these runs only; every other check stays on.
# shellcheck source-path=SCRIPTDIR source=../lib/mpirun.sh
source "$(dirname "$0")/../lib/mpirun.sh"
for z in 0 1; do
  ASAN_OPTIONS=detect_leaks=0 sanitized "mpi_z$z" timeout 120 "${MPIRUN[@]}" -np 2 \
    build/sanitize/train_gpt2 -i "$tmp/train_*.bin" -j "$tmp/val_0.bin" -e L2H2C16T32 -b 3 -t 16 -x 2 -v 0 -s 0 \
    -z "$z" --overlap 1
  grep -q "gradient sums: 3 buckets, sent while the backward pass runs" "$tmp/mpi_z$z.out" ||
    fail "mpi_z$z: the 2-rank run did not send its gradients in buckets"
done
run_seconds=$((SECONDS - start))

exit_if_failed
echo "ASan+UBSan clean: $cases unit test cases, train + resume with val, HellaSwag, sampling, 2 MPI ranks; build ${build_seconds}s, runs ${run_seconds}s"
