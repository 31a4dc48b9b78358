#!/usr/bin/env bash
# `make bench-tokenize`: encoding throughput of ./tokenize, single-threaded and on all cores, side
# by side with the JavaScript encoder on the same documents (the first BENCH_FILES nlp-corpus
# builds, 20 by default, about 1.8 MB; the JavaScript encoder needs about 3 s per MB). Both start
# with empty word caches, as a fresh process would. Prints the speed-ups last.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x ./tokenize ] || { echo "error: ./tokenize is not built (make tokenize)" >&2; exit 1; }
count=${BENCH_FILES:-20}
files=()
for i in $(seq 0 $((count - 1))); do
  f=data/npm/nlp-corpus/builds/doc-$i.json
  [ -f "$f" ] || { echo "error: $f is missing (make setup)" >&2; exit 1; }
  files+=("$f")
done
cores=$(nproc)

js=$(node scripts/bench/js_encode.js "${files[@]}")
ours=$(./tokenize bench --json-array --threads 1 --threads "$cores" "${files[@]}")
echo "$js"
echo "$ours"

js_tokens=$(sed -n 's/.* tokens=\([0-9]*\) .*/\1/p' <<<"$js")
our_tokens=$(sed -n 's/^threads=1 tokens=\([0-9]*\) .*/\1/p' <<<"$ours")
[ "$js_tokens" = "$our_tokens" ] || echo "warning: token counts differ (js $js_tokens, ours $our_tokens)"
js_rate=$(sed -n 's/.*MB\/s=\([0-9.]*\).*/\1/p' <<<"$js")
one=$(sed -n 's/^threads=1 .*MB\/s=\([0-9.]*\).*/\1/p' <<<"$ours")
all=$(sed -n "s/^threads=$cores .*MB\\/s=\\([0-9.]*\\).*/\\1/p" <<<"$ours" | tail -n 1)
awk -v js="$js_rate" -v one="$one" -v all="$all" -v cores="$cores" 'BEGIN {
  printf "speed-up over JavaScript: %.1fx single-threaded, %.1fx on %d cores (scaling %.2fx)\n", one / js, all / js, cores, all / one
}'
