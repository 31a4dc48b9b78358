// `./tokenize shard [options] INPUT...`: tokenizes documents from .txt/.jsonl/.json (or Brown
// corpus) files into llm.c token shards PREFIX_val_000000.bin, PREFIX_train_000001.bin, ...
// Options and behaviour: `./tokenize shard --help` and docs/data.md.
#pragma once

namespace llmc {

// argv[0] is "shard". Prints errors as `error: ...` on stderr; returns the process exit code.
int shard_main(int argc, char** argv);

}  // namespace llmc
