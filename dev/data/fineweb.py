#!/usr/bin/env python3
"""Tokenizes FineWeb (or FineWeb-Edu) into llm.c's fineweb10B token shards.

Needs network access and the `datasets` package, which Debian 12's Python installs only into a
virtual environment: python3 -m venv ~/venv-fineweb && ~/venv-fineweb/bin/pip install datasets,
then run this script with ~/venv-fineweb/bin/python (docs/interop.md). The documents are
streamed from the Hugging Face hub (no full download first) and piped, as JSONL, into one
`./tokenize shard` run through a named pipe, so the shards are exactly what our tokenizer tool
writes for any JSONL input: 100M tokens each, the first one the validation shard, every
document preceded by the end-of-text token:

  data/fineweb10B/fineweb_val_000000.bin, data/fineweb10B/fineweb_train_000001.bin, ...
  (--version edu: data/edu_fineweb10B/edu_fineweb_val_000000.bin, ...)

which is llm.c's layout, so its training commands take them unchanged:
  ./train_gpt2cu -i "data/fineweb10B/fineweb_train_*.bin" -j "data/fineweb10B/fineweb_val_*.bin" ...

Run from the repository root after `make setup tokenize`:
  ~/venv-fineweb/bin/python dev/data/fineweb.py --version fineweb
  ~/venv-fineweb/bin/python dev/data/fineweb.py --version edu --sample 100BT
"""
import argparse
import errno
import json
import os
import subprocess
import sys
import tempfile
import time

DATASETS = {"fineweb": "HuggingFaceFW/fineweb", "edu": "HuggingFaceFW/fineweb-edu"}
PREFIXES = {"fineweb": "fineweb", "edu": "edu_fineweb"}


def stream_documents(version, sample):
    """The text of every document of the hub dataset, streamed."""
    from datasets import load_dataset
    rows = load_dataset(DATASETS[version], name=f"sample-{sample}", split="train", streaming=True)
    for row in rows:
        yield row["text"]


def open_pipe_for_writing(fifo, process):
    """Opens the named pipe once the tokenizer has opened it for reading. A plain blocking open
    would wait forever if the tokenizer exited first (e.g. on a bad option), so poll instead."""
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
            if process.poll() is not None:
                raise RuntimeError(f"tokenize shard exited with status {process.returncode} before reading its input")
            time.sleep(0.05)
            continue
        os.set_blocking(fd, True)
        return os.fdopen(fd, "w", encoding="utf-8")


def shard_documents(documents, output_prefix, tokenize="./tokenize", shard_size=None, threads=None, limit=None):
    """Writes the documents (an iterable of str) as token shards PREFIX_{val,train}_NNNNNN.bin by
    piping them as JSONL lines {"text": ...} into `tokenize shard`. Returns the number of
    documents sent; raises RuntimeError if the tokenizer fails."""
    with tempfile.TemporaryDirectory() as tmp:
        fifo = os.path.join(tmp, "documents.jsonl")  # the .jsonl name tells tokenize the format
        os.mkfifo(fifo)
        command = [tokenize, "shard", "-o", output_prefix]
        if shard_size is not None:
            command += ["--shard-size", str(shard_size)]
        if threads is not None:
            command += ["--threads", str(threads)]
        process = subprocess.Popen(command + [fifo])
        sent = 0
        try:
            with open_pipe_for_writing(fifo, process) as pipe:
                for text in documents:
                    if limit is not None and sent >= limit:
                        break
                    pipe.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
                    sent += 1
        except BrokenPipeError:
            pass  # the tokenizer stopped reading; its exit status says why
        except BaseException:
            process.kill()
            process.wait()
            raise
        status = process.wait()
        if status != 0:
            raise RuntimeError(f"tokenize shard failed with status {status} after {sent} documents")
        return sent


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", choices=sorted(DATASETS), default="fineweb",
                        help="fineweb (HuggingFaceFW/fineweb) or edu (HuggingFaceFW/fineweb-edu)")
    parser.add_argument("--sample", choices=["10BT", "100BT"], default="10BT", help="the hub's sample subset")
    parser.add_argument("--output-dir", help="default data/fineweb10B or data/edu_fineweb10B (100B for --sample 100BT)")
    parser.add_argument("--shard-size", type=int, default=10**8, help="tokens per shard (default 100M, as llm.c)")
    parser.add_argument("--threads", type=int, help="tokenizer threads (default: all cores)")
    parser.add_argument("--tokenize", default="./tokenize", help="path of our tokenizer tool")
    parser.add_argument("--limit", type=int, help="stop after N documents (for a trial run)")
    args = parser.parse_args()

    # What a fresh machine lacks, said before anything starts.
    try:
        import datasets  # noqa: F401 (used by stream_documents)
    except ImportError:
        print("error: no `datasets` package in this Python; Debian's takes it in a virtual environment: "
              "python3 -m venv ~/venv-fineweb && ~/venv-fineweb/bin/pip install datasets, then run "
              "~/venv-fineweb/bin/python dev/data/fineweb.py (docs/interop.md)", file=sys.stderr)
        return 1
    if not os.access(args.tokenize, os.X_OK):
        print(f"error: --tokenize {args.tokenize}: no such program; `make setup tokenize` builds ./tokenize",
              file=sys.stderr)
        return 1

    prefix_name = PREFIXES[args.version]
    output_dir = args.output_dir or os.path.join("data", f"{prefix_name}{args.sample[:-1]}")
    os.makedirs(output_dir, exist_ok=True)
    try:
        sent = shard_documents(stream_documents(args.version, args.sample), os.path.join(output_dir, prefix_name),
                               tokenize=args.tokenize, shard_size=args.shard_size, threads=args.threads,
                               limit=args.limit)
    except (RuntimeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"fineweb: {sent} documents tokenized into {output_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
