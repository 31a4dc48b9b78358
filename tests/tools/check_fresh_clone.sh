#!/usr/bin/env bash
# What a user meets on a fresh clone before `make setup` has installed GPT-2's vocabulary
# (data/encoder.json, data/vocab.bpe): every program that loads it says which file is missing and
# that `make setup` installs it. The programs run in an empty folder, where the default paths
# (relative to the working directory) find nothing:
#  - ./tokenize encode, decode and shard name data/encoder.json, and data/vocab.bpe when only the
#    encoder is given (--encoder), each with `make setup`;
#  - the CPU trainer's sample (-s) still prints its token ids, saying that `make setup` installs
#    the vocabulary to decode them;
#  - dev/data/fineweb.py without the `datasets` package shows the virtual environment that gets it,
#    and without ./tokenize says `make setup tokenize`, before it starts anything.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
make -s tokenize >/dev/null
root=$PWD
clone=$root/$tmp/clone
mkdir -p "$clone"
setup_hint="(GPT-2's vocabulary: \`make setup\` installs data/encoder.json and data/vocab.bpe)"

expect_missing() {  # expect_missing WHAT FILE COMMAND...: exit 1 and "error: FILE: cannot open: ... <hint>"
  local what=$1 file=$2 rc=0
  shift 2
  (cd "$clone" && "$@") <<<"hello" >"$clone/out" 2>"$clone/err" || rc=$?
  local want="error: $file: cannot open: No such file or directory $setup_hint"
  if [ "$rc" -ne 1 ]; then fail "$what: exit $rc, expected 1"
  elif ! grep -qxF -- "$want" "$clone/err"; then fail "$what: stderr '$(cat "$clone/err")', expected '$want'"; fi
}
echo "hello world" >"$clone/doc.txt"
expect_missing "tokenize encode" data/encoder.json "$root/tokenize" encode
expect_missing "tokenize decode" data/encoder.json "$root/tokenize" decode
expect_missing "tokenize shard" data/encoder.json "$root/tokenize" shard -o doc doc.txt
expect_missing "tokenize encode with only --encoder" data/vocab.bpe "$root/tokenize" encode --encoder "$root/data/encoder.json"

# The trainer: a one-layer model on GPT-2-vocabulary shards, one step, one 4-token sample.
tests_python <<'PY'
import os, sys
from token_shards import write_shard
d = sys.argv[1]
stream = [(i * 7919) % 50257 for i in range(4096)]
write_shard(os.path.join(d, "clone_train_000001.bin"), stream)
write_shard(os.path.join(d, "clone_val_000000.bin"), stream[:1024])
PY
rc=0
(cd "$clone" && "$root/train_gpt2" -i "$root/$tmp/clone_train_*.bin" -j "$root/$tmp/clone_val_*.bin" \
  -e L1H2C32T16 -b 2 -t 16 -x 1 -v 0 -s 1 -g 4) >"$clone/train.out" 2>&1 || rc=$?
want="(cannot decode: vocabulary files missing; \`make setup\` puts the vocabulary at data/encoder.json and data/vocab.bpe; token ids:)"
if [ "$rc" -ne 0 ]; then fail "train_gpt2 without the vocabulary: exit $rc: $(tail -n 3 "$clone/train.out")"
elif ! grep -qxF -- "$want" "$clone/train.out"; then fail "train_gpt2's sample lacks '$want': $(grep -A 2 'sample at' "$clone/train.out")"; fi

# dev/data/fineweb.py without the `datasets` package (the system Python, where it is missing) or
# without ./tokenize: a clear error, and nothing started.
if /usr/bin/python3 -c 'import datasets' 2>/dev/null; then
  echo "note: /usr/bin/python3 has the datasets package: its missing-package error is not checked here"
else
  rc=0
  /usr/bin/python3 dev/data/fineweb.py --output-dir "$clone/fineweb" --limit 1 >"$clone/fw.out" 2>&1 || rc=$?
  if [ "$rc" -ne 1 ] || ! grep -qF "error: no \`datasets\` package in this Python;" "$clone/fw.out" ||
    ! grep -qF "python3 -m venv ~/venv-fineweb && ~/venv-fineweb/bin/pip install datasets" "$clone/fw.out" ||
    [ -e "$clone/fineweb" ]; then
    fail "fineweb.py without datasets: exit $rc: $(cat "$clone/fw.out")"
  fi
fi
mkdir -p "$tmp/fake_datasets/datasets"
: >"$tmp/fake_datasets/datasets/__init__.py"  # a stand-in: the import succeeds, nothing is streamed
rc=0
PYTHONPATH=$root/$tmp/fake_datasets /usr/bin/python3 dev/data/fineweb.py --tokenize "$clone/no-tokenize" \
  --output-dir "$clone/fineweb" >"$clone/fw.out" 2>&1 || rc=$?
if [ "$rc" -ne 1 ] || ! grep -qxF "error: --tokenize $clone/no-tokenize: no such program; \`make setup tokenize\` builds ./tokenize" \
  "$clone/fw.out"; then
  fail "fineweb.py without ./tokenize: exit $rc: $(cat "$clone/fw.out")"
fi

exit_if_failed
echo "without the vocabulary: tokenize encode/decode/shard name the missing file and \`make setup\`, the trainer's sample too; fineweb.py names the venv and ./tokenize"
