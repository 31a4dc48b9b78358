"""Token shards for the checks (docs/data.md, "Shard format"): a 256-int32 header
[20240520, 1, number of tokens], then the tokens as little-endian uint16."""
import array
import random

SHARD_MAGIC = 20240520
END_OF_TEXT = 50256


def write_shard(path, tokens, n=None, magic=SHARD_MAGIC, extra=b""):
    """n and magic default to the true values; a check of bad inputs overrides them, and appends
    `extra` bytes, to make a shard that must be rejected."""
    header = array.array("i", [0] * 256)
    header[0], header[1], header[2] = magic, 1, len(tokens) if n is None else n
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(array.array("H", tokens).tobytes() + extra)


def write_split(d, n_train, train_tokens, val_tokens, stream):
    """A check's data set in the directory d: n_train shards train_<i>.bin of stream(train_tokens)
    and val_0.bin of stream(val_tokens), drawn in that order."""
    for i in range(n_train):
        write_shard(f"{d}/train_{i}.bin", stream(train_tokens))
    write_shard(f"{d}/val_0.bin", stream(val_tokens))


def learnable_stream(n, mult, add, p_follow):
    """END_OF_TEXT, then tokens 0..63 that follow t -> (mult*t + add) mod 64 with probability
    p_follow and are uniformly random otherwise: a tiny model can learn it within a few steps.
    Draws from the `random` module's generator, which the caller seeds."""
    t = [END_OF_TEXT]
    while len(t) < n:
        t.append((t[-1] % 64 * mult + add) % 64 if random.random() < p_follow else random.randrange(64))
    return t
