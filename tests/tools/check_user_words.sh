#!/usr/bin/env bash
# shellcheck disable=SC2016  # the patterns and the examples below are literal text
# The project speaks to users about their own machines: README.md, docs/, scripts/, dev/ and the
# Makefile must not describe how the project itself is developed. The words that would (the
# patterns below) are printed with their file and line number. The patterns are first tried on
# examples, so that a pattern that no longer matches anything cannot pass the check silently;
# `make gpu-session`, "the GPU session" and a shell's $out are the user's and stay allowed.
set -euo pipefail
cd "$(dirname "$0")/../.."

# Words, any case; then the output-folder variable, as written (a shell's $out is not it).
words='\blent\b|\bdevice (time|calls?|machines?)\b|\brun\(command|\bcarry=|\b(this|a|no|each|every|one|later|earlier|next) sessions?\b'
out_variable='\$OUT\b|\$\{OUT[:}]|(^|[^A-Za-z0-9_])OUT='
found() { grep -qiP -- "$words" <<<"$1" || grep -qP -- "$out_variable" <<<"$1"; }

bad_examples=("On a lent GPU" "15 minutes of device time" "one device call:" "the device machine's output folder"
  'run(command="make gpu-session")' 'carry=["build/gpu-dist"]' 'tee $OUT/console.txt' 'cp x "${OUT:-}"'
  'env OUT= bash x.sh' "until a session ran it" "which no session has had yet")
fine_examples=("make gpu-session" "the GPU session's sweep" "GPU_SESSION_OUT=out/gpu-session" 'echo "$out"'
  'OUT_DIR=${OUT_DIR:-log124M}' "an excellent device" "the device's memory" "cudaMemcpy to the device")
failures=0
for bad in "${bad_examples[@]}"; do
  found "$bad" || { echo "FAIL: the patterns miss '$bad'"; failures=$((failures + 1)); }
done
for fine in "${fine_examples[@]}"; do
  if found "$fine"; then echo "FAIL: the patterns catch '$fine'"; failures=$((failures + 1)); fi
done

files=(README.md Makefile)
while IFS= read -r f; do files+=("$f"); done < <(git ls-files docs scripts dev)
hits=$( (grep -nHiP -- "$words" "${files[@]}" || true; grep -nHP -- "$out_variable" "${files[@]}" || true) | sort -u)
if [ -n "$hits" ]; then
  echo "$hits"
  echo "FAIL: $(wc -l <<<"$hits") lines speak of how the project is developed (above); say it for a user's own machine"
  exit 1
fi
[ "$failures" -eq 0 ] || exit 1
echo "${#files[@]} files (README.md, the Makefile, docs/, scripts/, dev/) say nothing of how the project is developed" \
  "(the patterns caught all ${#bad_examples[@]} examples and none of ${#fine_examples[@]} allowed phrases)"
