#!/usr/bin/env bash
# Interop with Hugging Face GPT-2 and llm.c's data files, checked by code that shares nothing with
# ours (numpy, Python's struct/json):
#  - ./hf_convert export of a random model (written by numpy): model.safetensors parsed with numpy
#    has exactly HF's tensor names, shapes and dtypes, each equal to the model file's parameters
#    with the Conv1D transposes and the vocabulary padding dropped; config.json has HF's fields;
#  - export -> import reproduces the model file byte for byte (fp32, and bf16 -> bf16 -> bf16);
#  - ./hf_convert logits (our CPU forward) matches a numpy GPT-2 forward written in HF's
#    conventions (y = x W + b) on the exported tensors;
#  - error paths of the tool;
#  - scripts/hellaswag_to_evalfile.py writes the documented eval layout with our tokenizer's ids,
#    creating the output's folder (clear errors where it cannot, for a missing ./tokenize or JSONL);
#  - dev/data/fineweb.py's pipe into ./tokenize shard gives the same shards as tokenizing the
#    same JSONL file directly.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
TOKENIZE=${TOKENIZE:-./tokenize}
export PYTHONDONTWRITEBYTECODE=1  # keep __pycache__ out of the source tree
tmp=$(mktemp -d /tmp/check_interop.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat >"$tmp/interop.py" <<'PYEOF'
import json, struct, sys
import numpy as np

L, H, C, T, V, VP = 2, 2, 16, 8, 50257, 50304
NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
         "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
SHAPES = [(VP, C), (T, C), (L, C), (L, C), (L, 3 * C, C), (L, 3 * C), (L, C, C), (L, C),
          (L, C), (L, C), (L, 4 * C, C), (L, 4 * C), (L, C, 4 * C), (L, C), (C,), (C,)]

def header(version):
    h = np.zeros(256, dtype="<i4")
    h[:8] = [20240326, version, T, V, L, H, C, VP]
    return h.tobytes()

def make_models(fp32_path, bf16_path):
    rng = np.random.default_rng(1234)
    params = [rng.normal(0, 0.2, s).astype(np.float32) for s in SHAPES]
    params[0][V:] = 0  # padded vocabulary rows
    for i in (2, 8, 14):
        params[i] += 1  # layernorm gains around 1
    flat = np.concatenate([p.ravel() for p in params])
    open(fp32_path, "wb").write(header(3) + flat.astype("<f4").tobytes())
    bf16 = (flat.view(np.uint32) >> 16).astype("<u2")  # truncation: any bf16 values do
    open(bf16_path, "wb").write(header(5) + bf16.tobytes())

def read_model(path):
    raw = open(path, "rb").read()
    h = np.frombuffer(raw[:1024], dtype="<i4")
    assert list(h[:8]) == [20240326, h[1], T, V, L, H, C, VP], h[:8]
    if h[1] == 3:
        flat = np.frombuffer(raw[1024:], dtype="<f4")
    else:
        flat = (np.frombuffer(raw[1024:], dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    out, pos = {}, 0
    for name, shape in zip(NAMES, SHAPES):
        n = int(np.prod(shape))
        out[name] = flat[pos:pos + n].reshape(shape)
        pos += n
    assert pos == flat.size
    return out

def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = hdr.pop("__metadata__", {})
    tensors, spans = {}, []
    for name, e in hdr.items():
        b, end = e["data_offsets"]
        spans.append((b, end))
        dt = {"F32": "<f4", "BF16": "<u2"}[e["dtype"]]
        a = np.frombuffer(data[b:end], dtype=dt)
        if e["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        assert a.size == int(np.prod(e["shape"])), name
        tensors[name] = (e["dtype"], a.reshape(e["shape"]))
    spans.sort()
    assert spans[0][0] == 0 and spans[-1][1] == len(data), "tensors do not cover the data buffer"
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), "tensors overlap or leave holes"
    return meta, tensors

def expected_hf(m):
    e = {"transformer.wte.weight": m["wte"][:V], "transformer.wpe.weight": m["wpe"],
         "transformer.ln_f.weight": m["lnfw"], "transformer.ln_f.bias": m["lnfb"]}
    for l in range(L):
        p = f"transformer.h.{l}."
        e[p + "ln_1.weight"], e[p + "ln_1.bias"] = m["ln1w"][l], m["ln1b"][l]
        e[p + "attn.c_attn.weight"], e[p + "attn.c_attn.bias"] = m["qkvw"][l].T, m["qkvb"][l]
        e[p + "attn.c_proj.weight"], e[p + "attn.c_proj.bias"] = m["attprojw"][l].T, m["attprojb"][l]
        e[p + "ln_2.weight"], e[p + "ln_2.bias"] = m["ln2w"][l], m["ln2b"][l]
        e[p + "mlp.c_fc.weight"], e[p + "mlp.c_fc.bias"] = m["fcw"][l].T, m["fcb"][l]
        e[p + "mlp.c_proj.weight"], e[p + "mlp.c_proj.bias"] = m["fcprojw"][l].T, m["fcprojb"][l]
    return e

def check_export(model_path, out_dir, dtype, torch_dtype):
    meta, tensors = read_safetensors(f"{out_dir}/model.safetensors")
    assert meta.get("format") == "pt", meta
    expected = expected_hf(read_model(model_path))
    assert set(tensors) == set(expected), sorted(set(tensors) ^ set(expected))
    for name, want in expected.items():
        got_dtype, got = tensors[name]
        assert got_dtype == dtype, (name, got_dtype)
        assert got.shape == want.shape, (name, got.shape, want.shape)
        assert np.array_equal(got, want), name
    cfg = json.load(open(f"{out_dir}/config.json"))
    want_cfg = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": V, "n_positions": T,
                "n_embd": C, "n_layer": L, "n_head": H, "n_inner": None, "activation_function": "gelu_new",
                "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
                "bos_token_id": 50256, "eos_token_id": 50256, "tie_word_embeddings": True,
                "torch_dtype": torch_dtype}
    for k, v in want_cfg.items():
        assert k in cfg and cfg[k] == v, (k, cfg.get(k), v)
    print(len(tensors))

def forward(out_dir, logits_path, *tokens):
    """GPT-2 in HF's conventions, float64, on the exported tensors."""
    _, t = read_safetensors(f"{out_dir}/model.safetensors")
    w = {k.removeprefix("transformer."): v.astype(np.float64) for k, (_, v) in t.items()}
    tokens = [int(x) for x in tokens]
    n = len(tokens)
    def ln(x, g, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * g + b
    x = w["wte.weight"][tokens] + w["wpe.weight"][:n]
    hs = C // H
    causal = np.triu(np.ones((n, n), dtype=bool), 1)
    for l in range(L):
        p = f"h.{l}."
        qkv = ln(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"]) @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (qkv[:, i * C:(i + 1) * C].reshape(n, H, hs).transpose(1, 0, 2) for i in range(3))
        att = q @ k.transpose(0, 2, 1) / np.sqrt(hs)
        att[:, causal] = -np.inf
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        y = (att @ v).transpose(1, 0, 2).reshape(n, C)
        x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = ln(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"]) @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]
        h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    ref = ln(x, w["ln_f.weight"], w["ln_f.bias"]) @ w["wte.weight"].T
    ours = np.fromfile(logits_path, dtype="<f4")
    assert ours.size == n * V, (ours.size, n * V)
    ours = ours.reshape(n, V).astype(np.float64)
    rel = np.linalg.norm(ours - ref) / np.linalg.norm(ref)
    assert rel < 1e-5, f"logits rel. L2 error {rel:.3e}"
    assert (ours.argmax(-1) == ref.argmax(-1)).all()
    print(f"{rel:.2e}")

def check_evalfile(eval_path, jsonl_path, ids_dir):
    """The eval file in the documented layout, its tokens equal to ./tokenize encode's of
    ctx and " " + ending (ids_dir/<example>_<k>.ids, k = 0 for the context)."""
    records = [json.loads(l) for l in open(jsonl_path) if l.strip()]
    raw = open(eval_path, "rb").read()
    h = struct.unpack("<256i", raw[:1024])
    assert h[:3] == (20240522, 1, len(records)), h[:4]
    words = struct.unpack(f"<{(len(raw) - 1024) // 2}H", raw[1024:])
    pos, longest = 0, 0
    for i, r in enumerate(records):
        start = pos
        assert words[pos] == 65535 and words[pos + 2] == i and words[pos + 3] == r["label"] and words[pos + 4] == 4
        n_bytes = words[pos + 1]
        pos += 5
        for k in range(5):
            want = [int(x) for x in open(f"{ids_dir}/{i}_{k}.ids").read().split()]
            n = words[pos]
            assert list(words[pos + 1:pos + 1 + n]) == want, (i, k)
            pos += 1 + n
        assert n_bytes == 2 * (pos - start), (i, n_bytes)
        longest = max(longest, n_bytes)
    assert pos == len(words) and h[3] == longest
    print(len(records))

def write_hellaswag(jsonl_path, ids_dir):
    """A small HellaSwag-style JSONL, and each string to encode as its own file."""
    examples = [
        {"ind": 4, "ctx": "A man is sitting on a roof. he", "label": 3,
         "endings": ["is using wrap to wrap a pair of skis.", "is ripping level tiles off.",
                     "is holding a rubik's cube.", "starts pulling up roofing on a roof."]},
        {"ind": 9, "ctx": "Caf\u00e9 owners \u201cpour\u201d coffee:", "label": 0,
         "endings": ["slowly, into cups.", "quickly \U0001F600", "with <|endoftext|> marks", "then\nleave"]},
        {"ind": 12, "ctx": "x", "label": 1, "endings": ["a", "b", "c", "d"]},
    ]
    with open(jsonl_path, "w", encoding="utf-8") as f:
        for e in examples:
            f.write(json.dumps(e) + "\n")
    for i, e in enumerate(examples):
        for k, s in enumerate([e["ctx"]] + [" " + x for x in e["endings"]]):
            open(f"{ids_dir}/{i}_{k}.txt", "w", encoding="utf-8").write(s)

def pipe_fineweb(tokenize, out_prefix, jsonl_path):
    import importlib.util
    spec = importlib.util.spec_from_file_location("fineweb", "dev/data/fineweb.py")
    fineweb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fineweb)
    docs = [f"Document {i}: caf\u00e9 \U0001F600 \"quoted\"\n" + "word " * (i % 13) for i in range(400)]
    with open(jsonl_path, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")
    print(fineweb.shard_documents(iter(docs), out_prefix, tokenize=tokenize, shard_size=700, threads=2))

globals()[sys.argv[1]](*sys.argv[2:])
PYEOF
ip() { $PY "$tmp/interop.py" "$@"; }

# --- export: names, shapes, transposes, dtypes, config ----------------------------------------
ip make_models "$tmp/model32.bin" "$tmp/model16.bin"
./hf_convert export "$tmp/model32.bin" "$tmp/hf32" >/dev/null
ntensors=$(ip check_export "$tmp/model32.bin" "$tmp/hf32" F32 float32)
./hf_convert export "$tmp/model16.bin" "$tmp/hf16" --dtype bfloat16 >/dev/null
ip check_export "$tmp/model16.bin" "$tmp/hf16" BF16 bfloat16 >/dev/null

# --- import round trips -----------------------------------------------------------------------
./hf_convert import "$tmp/hf32" "$tmp/back32.bin" >/dev/null
cmp "$tmp/model32.bin" "$tmp/back32.bin" || fail "fp32 export -> import is not byte-exact"
./hf_convert import "$tmp/hf16" "$tmp/back16.bin" --bf16 >/dev/null
cmp "$tmp/model16.bin" "$tmp/back16.bin" || fail "bf16 export -> import --bf16 is not byte-exact"
# The bf16 export imported as fp32 holds the same values: its fp32 export equals the bf16 one's.
./hf_convert import "$tmp/hf16" "$tmp/back16as32.bin" >/dev/null
./hf_convert export "$tmp/back16as32.bin" "$tmp/hf16as32" >/dev/null
ip check_export "$tmp/model16.bin" "$tmp/hf16as32" F32 float32 >/dev/null

# --- logits: our CPU forward vs a numpy forward in HF's conventions ---------------------------
tokens="50256 464 3290 318 257 1332 13 198"
./hf_convert logits "$tmp/model32.bin" "$tmp/logits.f32" $tokens >/dev/null
rel=$(ip forward "$tmp/hf32" "$tmp/logits.f32" $tokens)

# --- error paths ------------------------------------------------------------------------------
expect_error() {  # expect_error PATTERN COMMAND...: the command fails with an error matching PATTERN
  local pattern=$1; shift
  if "$@" >"$tmp/out" 2>"$tmp/err"; then fail "accepted: $*"; fi
  grep -q "^error: .*$pattern" "$tmp/err" || fail "$*: expected an error matching '$pattern', got: $(cat "$tmp/err")"
}
expect_error "not a directory" ./hf_convert import "$tmp/nowhere" "$tmp/x.bin"
expect_error "unknown command" ./hf_convert frobnicate
expect_error "--dtype 'float16'" ./hf_convert export "$tmp/model32.bin" "$tmp/x" --dtype float16
expect_error "unknown option --fp8" ./hf_convert import "$tmp/hf32" "$tmp/x.bin" --fp8
expect_error "token '50257'" ./hf_convert logits "$tmp/model32.bin" "$tmp/x.f32" 1 50257
expect_error "exceed the model's max_seq_len 8" ./hf_convert logits "$tmp/model32.bin" "$tmp/x.f32" 1 2 3 4 5 6 7 8 9
mkdir -p "$tmp/bad"
sed 's/"gelu_new"/"relu"/' "$tmp/hf32/config.json" >"$tmp/bad/config.json"
cp "$tmp/hf32/model.safetensors" "$tmp/bad/"
expect_error "bad/config.json: unsupported \"activation_function\"" ./hf_convert import "$tmp/bad" "$tmp/x.bin"
cp "$tmp/hf32/config.json" "$tmp/bad/config.json"
$PY - "$tmp/bad/model.safetensors" <<'PYEOF'
import struct, sys
h = b'{"transformer.wte.weight": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}}'
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + bytes(8))
PYEOF
expect_error "model.safetensors: tensor 'transformer.wte.weight': unsupported dtype 'I64'" ./hf_convert import "$tmp/bad" "$tmp/x.bin"
head -c 100 "$tmp/hf32/model.safetensors" >"$tmp/bad/model.safetensors"
expect_error "model.safetensors: header length .* exceeds" ./hf_convert import "$tmp/bad" "$tmp/x.bin"
rm "$tmp/bad/model.safetensors"
expect_error "model.safetensors: missing" ./hf_convert import "$tmp/bad" "$tmp/x.bin"
[ ! -e "$tmp/x.bin" ] || fail "a failed import left a model file"

# --- HellaSwag eval file from JSONL -----------------------------------------------------------
mkdir -p "$tmp/hs"
ip write_hellaswag "$tmp/hs/val.jsonl" "$tmp/hs"
for f in "$tmp"/hs/*.txt; do "$TOKENIZE" encode "$f" >"${f%.txt}.ids"; done
# Into a folder that does not exist yet, as data/hellaswag/ on a fresh clone.
$PY scripts/hellaswag_to_evalfile.py --tokenize "$TOKENIZE" "$tmp/hs/val.jsonl" "$tmp/hs/new/hellaswag/val.bin" >/dev/null
nexamples=$(ip check_evalfile "$tmp/hs/new/hellaswag/val.bin" "$tmp/hs/val.jsonl" "$tmp/hs")
if $PY scripts/hellaswag_to_evalfile.py --tokenize "$TOKENIZE" "$tmp/hs/val.jsonl" "$tmp/hs/val.jsonl/val.bin" 2>"$tmp/err"; then
  fail "an output folder under a file was accepted"
fi
grep -qxF "error: $tmp/hs/val.jsonl/val.bin: $tmp/hs/val.jsonl is not a folder" "$tmp/err" ||
  fail "an output folder that cannot be created: $(cat "$tmp/err")"
if $PY scripts/hellaswag_to_evalfile.py --tokenize "$tmp/no-tokenize" "$tmp/hs/val.jsonl" "$tmp/hs/x.bin" 2>"$tmp/err"; then
  fail "a missing ./tokenize was accepted"
fi
grep -qxF "error: --tokenize $tmp/no-tokenize: cannot run it (No such file or directory); \`make setup tokenize\` builds ./tokenize" \
  "$tmp/err" || fail "a missing ./tokenize: $(cat "$tmp/err")"
if $PY scripts/hellaswag_to_evalfile.py "$tmp/hs/none.jsonl" "$tmp/hs/x.bin" 2>"$tmp/err"; then fail "a missing JSONL was accepted"; fi
grep -qF "error: $tmp/hs/none.jsonl: cannot open: No such file or directory (hellaswag_val.jsonl: data/ of" "$tmp/err" ||
  fail "a missing JSONL: $(cat "$tmp/err")"
printf '{"ctx": "a", "endings": ["b", "c"], "label": 0}\n' >"$tmp/hs/bad.jsonl"
if $PY scripts/hellaswag_to_evalfile.py "$tmp/hs/bad.jsonl" "$tmp/hs/bad.bin" 2>"$tmp/err"; then fail "2 endings accepted"; fi
grep -q "bad.jsonl: line 1" "$tmp/err" || fail "unexpected error: $(cat "$tmp/err")"

# --- FineWeb piping: same shards as tokenizing the JSONL directly -----------------------------
mkdir -p "$tmp/fw/piped" "$tmp/fw/direct"
ip pipe_fineweb "$TOKENIZE" "$tmp/fw/piped/fineweb" "$tmp/fw/docs.jsonl" >"$tmp/fw.out" 2>&1 \
  || fail "dev/data/fineweb.py could not pipe documents into $TOKENIZE shard: $(grep -m 1 '^error:' "$tmp/fw.out" || true) / $(tail -n 1 "$tmp/fw.out")"
ndocs=$(tail -n 1 "$tmp/fw.out")
"$TOKENIZE" shard -o "$tmp/fw/direct/fineweb" --shard-size 700 --threads 2 "$tmp/fw/docs.jsonl" >/dev/null
[ "$(cd "$tmp/fw/piped" && ls)" = "$(cd "$tmp/fw/direct" && ls)" ] || fail "piped and direct runs wrote different shard sets"
nshards=0
for f in "$tmp"/fw/direct/*.bin; do
  cmp -s "$f" "$tmp/fw/piped/$(basename "$f")" || fail "$(basename "$f") differs between piped and direct tokenization"
  nshards=$((nshards + 1))
done
[ "$nshards" -ge 3 ] || fail "only $nshards shards"
PYTHONPYCACHEPREFIX="$tmp/pycache" $PY -m py_compile dev/data/fineweb.py dev/hf_parity.py scripts/hellaswag_to_evalfile.py scripts/plot_log.py

echo "$ntensors HF tensors exact, round trips byte-exact, logits rel err $rel, $nexamples eval examples, $ndocs docs piped into $nshards identical shards"
