#!/usr/bin/env bash
# shellcheck disable=SC2016  # the patterns and the examples below are literal text
# The project speaks to users about their own machines: README.md, docs/, scripts/, dev/ and the
# Makefile must not describe how the project itself is developed, i.e. GPUs lent for a while, their
# "device time" and "device calls", "the device machine", a tool's run(command=..., carry=...), an
# $OUT output folder that only exists there, or a developer's "session" ("this session", "no
# session has"; `make gpu-session` and "the GPU session" are the user's command). Every line that
# says so is printed with its file and line number. The patterns are first tried on examples, so
# that a pattern that no longer matches anything cannot pass the check silently.
set -euo pipefail
cd "$(dirname "$0")/../.."

# Words, any case; then the output-folder variable, as written (a shell's $out is not it).
words='\blent\b|\bdevice (time|calls?|machines?)\b|\brun\(command|\bcarry=|\b(this|a|no|each|every|one|later|earlier|next) sessions?\b'
out_variable='\$OUT\b|\$\{OUT[:}]|(^|[^A-Za-z0-9_])OUT='
found() { grep -qiP -- "$words" <<<"$1" || grep -qP -- "$out_variable" <<<"$1"; }

failures=0
for bad in "On a lent GPU" "15 minutes of device time" "one device call:" "the device machine's output folder" \
  'run(command="make gpu-session")' 'carry=["build/gpu-dist"]' 'tee $OUT/console.txt' 'cp x "${OUT:-}"' \
  'env OUT= bash x.sh' "until a session ran it" "which no session has had yet"; do
  found "$bad" || { echo "FAIL: the patterns miss '$bad'"; failures=$((failures + 1)); }
done
for fine in "make gpu-session" "the GPU session's sweep" "GPU_SESSION_OUT=out/gpu-session" 'echo "$out"' \
  'OUT_DIR=${OUT_DIR:-log124M}' "an excellent device" "the device's memory" "cudaMemcpy to the device"; do
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
echo "${#files[@]} files (README.md, the Makefile, docs/, scripts/, dev/) free of lent GPUs, device time and calls, \$OUT, run(...) and sessions"
