#!/usr/bin/env bash
# Token-for-token parity of ./tokenize with the JavaScript GPT-2 encoder on 20,000 random strings
# from many Unicode blocks (tests/text/fuzz_strings.js), beyond the fixed corpora and hard
# strings of check_tokenizer_parity.sh; and the byte-exact round trip of each through decode.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=build/tmp/tokenizer_fuzz
rm -rf "$work"; mkdir -p "$work"
node tests/text/fuzz_strings.js "$work" 20000 12345
./tokenize encode --json-array "$work/fuzz_docs.json" > "$work/got.txt"
if ! cmp -s "$work/got.txt" "$work/fuzz_expected.txt"; then
  line=$(cmp "$work/got.txt" "$work/fuzz_expected.txt" | sed -n 's/.*line \([0-9]*\)/\1/p')
  echo "first difference on document $line:"
  node -e 'const d=require(process.argv[1]); console.log(JSON.stringify(d[process.argv[2]-1]))' \
    "$PWD/$work/fuzz_docs.json" "$line"
  echo "ours: $(sed -n "${line}p" "$work/got.txt")"
  echo "js:   $(sed -n "${line}p" "$work/fuzz_expected.txt")"
  exit 1
fi
# Round trip: decoding each line of ids gives back the document's UTF-8 bytes.
node -e 'const d=require(process.argv[1]); process.stdout.write(d.join(""))' "$PWD/$work/fuzz_docs.json" > "$work/all.txt"
tr '\n' ' ' < "$work/got.txt" | ./tokenize decode > "$work/decoded.txt"
cmp "$work/decoded.txt" "$work/all.txt"
echo "20000/20000 random Unicode strings identical to the JavaScript encoder, $(wc -w < "$work/got.txt") tokens, round trip exact"
