"""Writes DIR/model.bin, a small GPT-2 in the fp32 model-file layout (docs/contract.md, "Model
files"), and token shards DIR/NAME of TOKENS tokens each, all drawn from one numpy generator
seeded with --seed: the model first, then the shards in the order given, so the same arguments
always give the same bytes.

The default shape is the awkward kind the parity checks want: 3 heads of 32, a vocabulary of 1000
padded to 1024. The shards hold a learnable stream over that vocabulary."""
import argparse
import sys

import numpy as np

from token_shards import write_shard

MODEL_MAGIC = 20240326


def write_model(path, rng, L, H, C, maxT, V, Vp):
    def normal(*shape, std=0.02):
        return rng.normal(0.0, std, shape)

    # GPT-2's initialisation (N(0, 0.02), residual projections scaled by 1/sqrt(2L)), except that
    # layernorm weights are 1 + N(0, 0.1) and biases random rather than 1 and 0, so that they
    # matter; the padded vocabulary rows are zero.
    wte = normal(Vp, C)
    wte[V:] = 0.0
    proj_std = 0.02 / np.sqrt(2 * L)
    params = [wte, normal(maxT, C), 1 + normal(L, C, std=0.1), normal(L, C), normal(L, 3 * C, C),
              normal(L, 3 * C), normal(L, C, C, std=proj_std), normal(L, C),
              1 + normal(L, C, std=0.1), normal(L, C), normal(L, 4 * C, C), normal(L, 4 * C),
              normal(L, C, 4 * C, std=proj_std), normal(L, C), 1 + normal(C, std=0.1), normal(C)]
    header = np.zeros(256, dtype="<i4")
    header[:8] = [MODEL_MAGIC, 3, maxT, V, L, H, C, Vp]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for p in params:
            f.write(p.astype("<f4").tobytes())


def learnable_tokens(rng, n, first, V):
    # Mostly a fixed successor function, t -> (7t + 3) mod V, sometimes a random token.
    tokens = np.empty(n, dtype=np.int64)
    tokens[0] = first
    for i in range(1, n):
        tokens[i] = (tokens[i - 1] * 7 + 3) % V if rng.random() < 0.8 else rng.integers(V)
    return tokens


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", metavar="DIR")
    parser.add_argument("shards", nargs="+", metavar="NAME:TOKENS")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--first-token", type=int, required=True, help="every shard's first token")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=3)
    parser.add_argument("--channels", type=int, default=96)
    parser.add_argument("--max-seq-len", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=1000)
    parser.add_argument("--padded-vocab", type=int, default=1024)
    a = parser.parse_args()
    shards = []
    for spec in a.shards:
        name, _, count = spec.rpartition(":")
        if not name or not count.isdigit() or int(count) < 1:
            sys.exit(f"error: shard '{spec}': expected NAME:TOKENS with TOKENS >= 1")
        shards.append((name, int(count)))
    rng = np.random.default_rng(a.seed)
    write_model(f"{a.dir}/model.bin", rng, a.layers, a.heads, a.channels, a.max_seq_len, a.vocab, a.padded_vocab)
    for name, count in shards:
        write_shard(f"{a.dir}/{name}", learnable_tokens(rng, count, a.first_token, a.vocab))


if __name__ == "__main__":
    main()
