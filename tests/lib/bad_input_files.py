"""The bad inputs of tests/cpu/check_bad_inputs.sh, written into the folder sys.argv[1]: good train/val
shards, shards with a wrong header, magic or token, a garbage eval file and a HellaSwag file whose example
is longer than -t 16."""
import array, random, sys
from token_shards import END_OF_TEXT, write_shard, write_split
d = sys.argv[1]
random.seed(3)
def stream(n):
    return [END_OF_TEXT] + [random.randrange(64) for _ in range(n - 1)]
write_split(d, 2, 700, 400, stream)
write_shard(f'{d}/tiny_0.bin', stream(10))
write_shard(f'{d}/truncated_0.bin', stream(700), n=900)        # header says more than the file has
write_shard(f'{d}/extra_0.bin', stream(700), n=500)            # header says less than the file has
write_shard(f'{d}/magic_0.bin', stream(700), magic=12345)
t = stream(700); t[100] = 50257
write_shard(f'{d}/token_0.bin', t)                             # token id == vocab size, in step 3's window
t = stream(400); t[5] = 60000
write_shard(f'{d}/badval_0.bin', t)
open(f'{d}/garbage.bin', 'wb').write(b'not an eval file' * 100)
# A HellaSwag file whose one example needs 20 positions (more than -t 16).
words = [65535, 0, 0, 0, 1, 10] + list(range(10)) + [11] + list(range(11))
words[1] = 2 * len(words)
h = array.array('i', [0] * 256)
h[0], h[1], h[2], h[3] = 20240522, 1, 1, 2 * len(words)
open(f'{d}/long_eval.bin', 'wb').write(h.tobytes() + array.array('H', words).tobytes())
