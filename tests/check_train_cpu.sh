#!/usr/bin/env bash
# The CPU trainer end to end, on a tiny model and tiny generated shards under build/tmp:
#  (a) bad inputs: each fails with exit 1 (no crash) and names the flag or file on stderr;
#  (b) a real run: the train loss falls, main.log has the documented format and steps;
#  (c) a run resumed from a checkpoint writes a main.log identical to the uninterrupted run's,
#      with shuffling off and on (bit-identical losses: the lines are compared as text).
set -euo pipefail
cd "$(dirname "$0")/.."
make -s train_gpt2 >/dev/null
# One thread: these models are too small to gain from two, and on a busy machine OpenMP's waiting
# threads make steps 10x slower. (The CPU backend's results do not depend on the thread count.)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

tmp=build/tmp/check_train_cpu
rm -rf "$tmp"
mkdir -p "$tmp"

# Shards of a learnable token stream: tokens 0..63 that mostly follow t -> (7t+3) mod 64.
python3 - "$tmp" <<'EOF'
import array, random, sys
d = sys.argv[1]
random.seed(1)
def write(path, tokens):
    header = array.array('i', [0] * 256)
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, 'wb') as f:
        f.write(header.tobytes())
        f.write(array.array('H', tokens).tobytes())
def stream(n):
    t = [50256]
    while len(t) < n:
        t.append((t[-1] % 64 * 7 + 3) % 64 if random.random() < 0.9 else random.randrange(64))
    return t
for i in range(3):
    write(f'{d}/train_{i}.bin', stream(700))
write(f'{d}/val_0.bin', stream(400))
write(f'{d}/tiny_0.bin', stream(10))
EOF

model=L1H2C16T32
common=(-i "$tmp/train_*.bin" -j "$tmp/val_0.bin" -e "$model" -b 2 -t 16)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# --- (b) a real run ---------------------------------------------------------------------------
./train_gpt2 "${common[@]}" -d 64 -x 12 -l 1e-2 -u 2 -q 0.1 -v 6 -m 4 -s 12 -g 4 -o "$tmp/run" >"$tmp/run.out"
log="$tmp/run/main.log"
bad_lines=$(grep -Evc '^s:[0-9]+ (trl:[0-9]+\.[0-9]{6} lr:[0-9]\.[0-9]{6}e[-+][0-9]{2} norm:[0-9]+\.[0-9]{6}|tel:[0-9]+\.[0-9]{6})$' "$log" || true)
[ "$bad_lines" = 0 ] || fail "main.log has $bad_lines malformed lines"
[ "$(grep -c trl: "$log")" = 12 ] || fail "main.log should have 12 trl lines"
[ "$(grep -o '^s:[0-9]* tel' "$log" | tr '\n' ' ')" = "s:0 tel s:6 tel s:12 tel " ] || fail "tel lines at steps 0, 6, 12 expected"
[ "$(sed -n 2p "$log" | cut -d' ' -f1)" = "s:0" ] || fail "trl of step 0 should follow its tel"
first=$(grep trl: "$log" | head -1 | sed 's/.*trl:\([0-9.]*\).*/\1/')
last=$(grep trl: "$log" | tail -1 | sed 's/.*trl:\([0-9.]*\).*/\1/')
python3 -c "import sys; sys.exit(0 if $last < $first - 1.0 else 1)" || fail "train loss did not fall: $first -> $last"
grep -q '^s:0 trl:[0-9.]* lr:5.000000e-03 ' "$log" || fail "warmup lr of step 0 should be 5e-3"
grep -q '^s:11 trl:[0-9.]* lr:1.000000e-03 ' "$log" || fail "last step's lr should be lr*q = 1e-3"
grep -q -- '--- sample at step 12 ---' "$tmp/run.out" || fail "no sample printed at the last step"
grep -q 'accumulation=2 -> 64 tokens per step' "$tmp/run.out" || fail "start-up summary missing"
echo "tiny run: train loss $first -> $last"

# --- (a) bad inputs -----------------------------------------------------------------------------
ok_model="$tmp/run/model.bin"
./train_gpt2 "${common[@]}" -x 1 -v 0 -s 0 -n 1 -o "$tmp/ckpt1" >/dev/null
cp "$tmp/ckpt1/model_00000001.bin" "$ok_model"
python3 -c "
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
b[0] ^= 0xFF
open(sys.argv[2], 'wb').write(b)
open(sys.argv[3], 'wb').write(open(sys.argv[1], 'rb').read()[:-40])" "$ok_model" "$tmp/bad_header.bin" "$tmp/short.bin"
touch "$tmp/a_file"
mkdir -p "$tmp/empty_out"

expect_error() {  # expect_error <what stderr must contain> <args...>
  local want=$1; shift
  local rc=0
  bad_inputs=$((bad_inputs + 1))
  ./train_gpt2 "$@" >"$tmp/err.out" 2>"$tmp/err.txt" || rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -ge 128 ]; then
    fail "exit code $rc for: $*"
  elif ! grep -qF -- "$want" "$tmp/err.txt"; then
    fail "stderr of [$*] does not name '$want': $(cat "$tmp/err.txt")"
  fi
}
bad_inputs=0
nomatch="$tmp/nothing_*.bin"
expect_error "-i: missing value" -i
expect_error "$tmp/nodir/x_*.bin" -i "$tmp/nodir/x_*.bin" -e "$model" -t 16
expect_error "$nomatch" "${common[@]}" -j "$nomatch"
expect_error "$tmp/tiny_0.bin" "${common[@]}" -i "$tmp/tiny_0.bin"
expect_error "-t: sequence length 64" "${common[@]}" -t 64
expect_error "-d:" "${common[@]}" -d 100
expect_error "$tmp/bad_header.bin" "${common[@]}" -e "$tmp/bad_header.bin"
expect_error "$tmp/short.bin" "${common[@]}" -e "$tmp/short.bin"
expect_error "$tmp/no_such_model.bin" "${common[@]}" -e "$tmp/no_such_model.bin"
expect_error "-o:" "${common[@]}" -o "$tmp/a_file/out"
expect_error "'-w'" "${common[@]}" -w 3
expect_error "-b: 'abc'" "${common[@]}" -b abc
expect_error "-b:" "${common[@]}" -b 0
expect_error "-l:" "${common[@]}" -l -1
expect_error "-h: HellaSwag eval is not available yet" "${common[@]}" -h 1
expect_error "-n:" "${common[@]}" -n 5
expect_error "$tmp/empty_out" "${common[@]}" -y 1 -o "$tmp/empty_out"
expect_error "-b: is 4 but checkpoint step 1" "${common[@]}" -b 4 -x 2 -y 1 -o "$tmp/ckpt1"
# The good model file loads and trains.
./train_gpt2 "${common[@]}" -e "$ok_model" -x 1 -v 0 -s 0 >/dev/null || fail "a checkpoint model file does not load"
echo "bad inputs: $bad_inputs tried, $failures failures so far"

# --- (c) resume == uninterrupted ---------------------------------------------------------------
for shuffle in 0 1; do
  flags=("${common[@]}" -d 64 -x 8 -l 1e-2 -u 2 -q 0.1 -v 3 -m 2 -s 0 -n 2 -sh "$shuffle")
  full="$tmp/full_sh$shuffle"
  ./train_gpt2 "${flags[@]}" -o "$full" >/dev/null
  # An interrupted run's dir as it would be after step 6 was being written: complete checkpoints
  # 2 and 4, a checkpoint 6 whose model file is truncated (skipped), the log of the steps so far.
  part="$tmp/part_sh$shuffle"
  mkdir -p "$part"
  for s in 00000002 00000004 00000006; do
    cp "$full/model_$s.bin" "$full/state_${s}_00000.bin" "$full/DONE_$s" "$part/"
  done
  truncate -s 1000 "$part/model_00000006.bin"
  grep -E '^s:[0-6] ' "$full/main.log" >"$part/main.log"
  ./train_gpt2 "${flags[@]}" -y 1 -o "$part" >"$tmp/resume_sh$shuffle.out"
  grep -q 'resume: skipping checkpoint step 6' "$tmp/resume_sh$shuffle.out" || fail "the broken checkpoint 6 was not skipped"
  grep -q 'resume: continuing from checkpoint step 4' "$tmp/resume_sh$shuffle.out" || fail "did not resume from step 4"
  if ! cmp -s "$full/main.log" "$part/main.log"; then
    fail "-sh $shuffle: resumed main.log differs from the uninterrupted run's"
    diff "$full/main.log" "$part/main.log" || true
  fi
  cmp -s "$full/model_00000008.bin" "$part/model_00000008.bin" || fail "-sh $shuffle: final models differ"
done
lines=$(grep -c trl: "$tmp/full_sh1/main.log")
# Shuffling changes the data order, hence the losses.
cmp -s <(grep trl: "$tmp/full_sh0/main.log") <(grep trl: "$tmp/full_sh1/main.log") && fail "-sh 0 and -sh 1 gave the same losses"

if [ "$failures" -ne 0 ]; then
  echo "$failures failures"
  exit 1
fi
echo "loss $first -> $last; $bad_inputs bad inputs rejected; resume bit-identical over $lines steps (-sh 0 and 1)"
