#!/usr/bin/env bash
# scripts/plot_log.py on generated main.log files: a PNG is written (magic, size, one or two panels
# from the IHDR width), the reference lines are drawn (red pixels present only when asked for),
# and bad input (missing file, malformed value, label count) fails with an error.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
tmp=$(mktemp -d /tmp/check_plot.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$tmp/runA" "$tmp/runB"
$PY - "$tmp" <<'PYEOF'
import math, sys
d = sys.argv[1]
with open(f"{d}/runA/main.log", "w") as f:
    for s in range(200):
        f.write(f"s:{s} trl:{10 * math.exp(-s / 50) + 3:.6f} lr:{6e-4:.6e} norm:{1 + 1 / (s + 1):.6f}\n")
        if s % 25 == 0:
            f.write(f"s:{s} tel:{10 * math.exp(-s / 50) + 3.1:.6f}\n")
            f.write(f"s:{s} eval:{0.25 + s / 4000:.6f}\n")
with open(f"{d}/runB/main.log", "w") as f:
    f.write("some other line the parser must skip\n")
    for s in range(0, 150, 5):
        f.write(f"s:{s} trl:{9 * math.exp(-s / 40) + 3.3:.6f} lr:{3e-4:.6e} norm:1.000000\n")
    f.write("s:149 tel:3.500000\n")
PYEOF

# The PNG's width and height from its IHDR chunk, after checking the 8-byte signature.
png_size() {
  $PY - "$1" <<'PYEOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
    sys.exit(f"{sys.argv[1]}: not a PNG")
w, h = struct.unpack(">II", data[16:24])
print(w, h, len(data))
PYEOF
}
# Pixels that are the reference lines' pure red (matplotlib's "red" = (1, 0, 0)).
red_pixels() {
  $PY -c 'import sys, matplotlib.image as im
a = im.imread(sys.argv[1])
print(int(((a[..., 0] > 0.9) & (a[..., 1] < 0.1) & (a[..., 2] < 0.1)).sum()))' "$1"
}

$PY scripts/plot_log.py "$tmp/runA/main.log" "$tmp/runB/main.log" --labels "run A,run B" \
  --ref-loss 3.28 --ref-loss-label "OpenAI GPT-2 124M" --ref-eval 0.294463 --ref-eval-label "OpenAI GPT-2 124M" \
  --title "check" -o "$tmp/both.png" >"$tmp/both.out"
grep -q "run A: 200 train, 8 val, 8 eval points, run B: 30 train, 1 val, 0 eval points" "$tmp/both.out" \
  || fail "unexpected summary: $(cat "$tmp/both.out")"
read -r w h bytes < <(png_size "$tmp/both.png")
[ "$w" -eq 1400 ] && [ "$h" -eq 500 ] || fail "two-panel plot is ${w}x${h}, expected 1400x500"
[ "$bytes" -gt 20000 ] || fail "two-panel plot has only $bytes bytes"
red=$(red_pixels "$tmp/both.png")
[ "$red" -gt 500 ] || fail "reference lines missing: $red red pixels"

# No eval lines and no references: one panel, nothing red.
$PY scripts/plot_log.py "$tmp/runB/main.log" -o "$tmp/one.png" >/dev/null
read -r w1 h1 bytes1 < <(png_size "$tmp/one.png")
[ "$w1" -eq 800 ] && [ "$h1" -eq 500 ] || fail "one-panel plot is ${w1}x${h1}, expected 800x500"
[ "$(red_pixels "$tmp/one.png")" -eq 0 ] || fail "red pixels without reference lines"

# Errors.
if $PY scripts/plot_log.py "$tmp/missing.log" -o "$tmp/x.png" 2>"$tmp/err"; then fail "missing log accepted"; fi
grep -q "missing.log" "$tmp/err" || fail "missing-file error does not name the file: $(cat "$tmp/err")"
printf 's:1 trl:abc lr:1e-4 norm:1.0\n' >"$tmp/bad.log"
if $PY scripts/plot_log.py "$tmp/bad.log" -o "$tmp/x.png" 2>"$tmp/err"; then fail "malformed value accepted"; fi
grep -q "bad.log: line 1: trl value 'abc'" "$tmp/err" || fail "unexpected error: $(cat "$tmp/err")"
printf 'nothing here\n' >"$tmp/empty.log"
if $PY scripts/plot_log.py "$tmp/empty.log" -o "$tmp/x.png" 2>"$tmp/err"; then fail "log without events accepted"; fi
if $PY scripts/plot_log.py "$tmp/runA/main.log" --labels "a,b" -o "$tmp/x.png" 2>"$tmp/err"; then fail "label count mismatch accepted"; fi
[ ! -e "$tmp/x.png" ] || fail "a failed run wrote a PNG"

echo "plots ${w}x${h} (${bytes} bytes, $red reference-line pixels) and ${w1}x${h1} written"
