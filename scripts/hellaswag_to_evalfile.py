#!/usr/bin/env python3
"""Builds llm.c's HellaSwag eval file (read by llmc/data/hellaswag.h) from HellaSwag's JSONL.

Each JSONL line has "ctx" (the context), "endings" (4 strings) and "label" (index of the right
ending). The context is tokenized as it is and every ending with a space in front (" " + ending),
the way GPT-2 saw words follow each other in its training text.

Tokenizers:
  ours      (default) our ./tokenize: all strings go into one JSON array file and a single
            `./tokenize encode --json-array FILE` run prints one line of ids per string
  tiktoken  tiktoken's "gpt2" encoding, if that package is installed; gives the same ids

Example, from the repository root after `make tokenize` (hellaswag_val.jsonl is data/hellaswag_val.jsonl
of the HellaSwag authors' repository, https://github.com/rowanz/hellaswag), writing the file that
the trainers' -h 1 reads by default (--hellaswag-file):
  curl -LO https://raw.githubusercontent.com/rowanz/hellaswag/master/data/hellaswag_val.jsonl
  python3 scripts/hellaswag_to_evalfile.py hellaswag_val.jsonl data/hellaswag/hellaswag_val.bin
The output's folder is created when missing.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

MAGIC = 20240522
VERSION = 1
DELIMITER = 65535
NUM_COMPLETIONS = 4


def read_examples(path, limit=None):
    """The (context, endings, label) triples of the JSONL file, checked."""
    examples = []
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        raise SystemExit(f"error: {path}: cannot open: {e.strerror} (hellaswag_val.jsonl: data/ of "
                         "https://github.com/rowanz/hellaswag)")
    with f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                context, endings, label = record["ctx"], record["endings"], record["label"]
            except (ValueError, KeyError, TypeError) as e:
                raise SystemExit(f"error: {path}: line {line_no}: not a HellaSwag record ({e})")
            if not isinstance(context, str) or not isinstance(endings, list) or len(endings) != NUM_COMPLETIONS \
                    or not all(isinstance(e, str) for e in endings):
                raise SystemExit(f"error: {path}: line {line_no}: needs a string ctx and {NUM_COMPLETIONS} string endings")
            if not isinstance(label, int) or not 0 <= label < NUM_COMPLETIONS:
                raise SystemExit(f"error: {path}: line {line_no}: label {label!r} is not 0..{NUM_COMPLETIONS - 1}")
            examples.append((context, endings, label))
            if limit is not None and len(examples) >= limit:
                break
    return examples


def encode_with_ours(strings, tokenize):
    """Token ids of every string, from one `./tokenize encode --json-array` run."""
    with tempfile.TemporaryDirectory() as tmp:
        array_path = os.path.join(tmp, "strings.json")
        with open(array_path, "w", encoding="utf-8") as f:
            json.dump(strings, f, ensure_ascii=False)
        try:
            result = subprocess.run([tokenize, "encode", "--json-array", array_path],
                                    capture_output=True, text=True)
        except OSError as e:
            raise SystemExit(f"error: --tokenize {tokenize}: cannot run it ({e.strerror}); "
                             "`make setup tokenize` builds ./tokenize")
    if result.returncode != 0:
        raise SystemExit(f"error: {tokenize} encode failed: {result.stderr.strip()}")
    lines = result.stdout.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != len(strings):
        raise SystemExit(f"error: {tokenize} encode printed {len(lines)} lines for {len(strings)} strings")
    return [[int(t) for t in line.split()] for line in lines]


def encode_with_tiktoken(strings):
    import tiktoken
    enc = tiktoken.get_encoding("gpt2")
    return [enc.encode_ordinary(s) for s in strings]


def example_record(index, label, context, endings):
    """One example's uint16 record: delimiter, byte length, index, label, completion count,
    context length + tokens, then each completion's length + tokens."""
    words = [DELIMITER, 0, index, label, len(endings), len(context)] + list(context)
    for ending in endings:
        words += [len(ending)] + list(ending)
    words[1] = 2 * len(words)
    if words[1] >= 1 << 16:
        raise SystemExit(f"error: example {index} needs {words[1]} bytes, more than a uint16 record length holds")
    if any(not 0 <= w < DELIMITER for w in words[5:]):
        raise SystemExit(f"error: example {index} has a token id outside 0..65534")
    return words


def write_evalfile(path, examples_tokens):
    """examples_tokens: (context tokens, [4 ending token lists], label) per example."""
    if not 0 < len(examples_tokens) < 1 << 16:
        raise SystemExit(f"error: {len(examples_tokens)} examples; the format holds 1..65535")
    records = [example_record(i, label, context, endings)
               for i, (context, endings, label) in enumerate(examples_tokens)]
    longest = max(2 * len(r) for r in records)
    header = [MAGIC, VERSION, len(records), longest] + [0] * 252
    folder = os.path.dirname(path)
    if folder and not os.path.isdir(folder):
        if os.path.exists(folder):
            raise SystemExit(f"error: {path}: {folder} is not a folder")
        try:
            os.makedirs(folder)
        except OSError as e:
            raise SystemExit(f"error: {path}: cannot create its folder {folder}: {e.strerror}")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<256i", *header))
        for r in records:
            f.write(struct.pack(f"<{len(r)}H", *r))
    os.replace(tmp, path)
    return len(records), longest


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", help="HellaSwag JSONL (e.g. hellaswag_val.jsonl)")
    parser.add_argument("output", help="eval file to write (e.g. data/hellaswag/hellaswag_val.bin, the trainers' "
                        "default --hellaswag-file); its folder is created when missing")
    parser.add_argument("--tokenizer", choices=["ours", "tiktoken"], default="ours")
    parser.add_argument("--tokenize", default="./tokenize", help="path of our tokenizer tool (default ./tokenize)")
    parser.add_argument("--limit", type=int, help="only the first N examples")
    args = parser.parse_args()

    examples = read_examples(args.input, args.limit)
    strings = []
    for context, endings, _ in examples:
        strings.append(context)
        strings.extend(" " + e for e in endings)
    tokens = encode_with_ours(strings, args.tokenize) if args.tokenizer == "ours" else encode_with_tiktoken(strings)

    per_example = 1 + NUM_COMPLETIONS
    examples_tokens = []
    for i, (_, _, label) in enumerate(examples):
        t = tokens[i * per_example:(i + 1) * per_example]
        if not t[0] or not all(t[1:]):
            raise SystemExit(f"error: {args.input}: example {i} has an empty context or ending")
        examples_tokens.append((t[0], t[1:], label))
    n, longest = write_evalfile(args.output, examples_tokens)
    print(f"wrote {n} examples to {args.output} (longest record {longest} bytes)")


if __name__ == "__main__":
    sys.exit(main())
