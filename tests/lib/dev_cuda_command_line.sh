# shellcheck shell=bash
# The dev/cuda command line a kernel engineer uses (dev/cuda/command_line.cuh), on benchmarks built
# for the emulated GPU; sourced by tests/emu/check_emu.sh, whose `fail` it calls.
#   dev_cuda_command_line BINDIR LOGDIR
# Each benchmark timed at a small shape of its own from the shape flags (checked there first), with
# L2 flushed before each repetition and GB/s beside each time; layernorm swept over its block sizes
# and gelu at one given block size; adamw with two versions named; bad values refused (exit 1) with
# an error naming the flag.

# timed_shape NAME ARGS...: runs `NAME all ARGS --reps 1`; every version --help lists (those in
# $TIMED where only some are timed) must have a timing line "<name>[ block=N] ... <ms> ms <GB/s>
# GB/s", after the line saying L2 is flushed.
timed_shape() {
  local name=$1 log="$logdir/cli-$1.log" rc=0 v versions missing=""
  shift
  "$bindir/$name" all "$@" --reps 1 >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ] || grep -q '^FAIL' "$log"; then
    fail "dev/cuda $name $*: exit $rc (log: $log)"
    grep -m 5 -E '^FAIL|error' "$log" | sed 's/^/      /'
    return
  fi
  grep -Eq '^timings: median of 1 runs, L2 \([0-9]+ MiB\) flushed before each' "$log" ||
    missing+=" (no L2 flush line)"
  # The versions this build has, from --help (attention's cuDNN ones are not in the emulated build).
  versions=${TIMED:-$("$bindir/$name" --help | sed -n '/^versions:/,$p' | awk 'NR > 1 { print $1 }')}
  for v in $versions; do
    grep -Eq "(^| )$v( |$).* [0-9.]+ ms +[0-9.]+ GB/s" "$log" || missing+=" $v"
  done
  if [ -n "$missing" ]; then fail "dev/cuda $name $*: no timing for$missing (log: $log)"
  else echo "ok    dev/cuda $name $*: every version checked and timed"; fi
}

# refused WHAT PATTERN NAME ARGS...: the benchmark must exit 1 with PATTERN (grep -E) on stderr.
refused() {
  local what=$1 pattern=$2 name=$3 rc=0 err
  shift 3
  err=$("$bindir/$name" "$@" 2>&1 >/dev/null) || rc=$?
  if [ "$rc" -eq 1 ] && grep -Eq -- "$pattern" <<<"$err"; then echo "ok    dev/cuda $name refuses $what"
  else fail "dev/cuda $name $*: exit $rc, stderr '$err' (expected 1 and '$pattern')"; fi
}

dev_cuda_command_line() {
  local bindir=$1 logdir=$2 log
  timed_shape layernorm -N 70 -C 96 --sweep
  log="$logdir/cli-layernorm.log"
  # The sweep: fwd1 at each of its block sizes; bwd2's fixed grid has none.
  if [ "$(grep -Ec ' fwd1 block=(32|64|128|256|512) +[0-9.]+ ms' "$log")" -ne 5 ] || grep -q ' bwd2 block=' "$log"; then
    fail "dev/cuda layernorm --sweep: fwd1 not at 32..512 threads, or bwd2 given a block size (log: $log)"
  fi
  timed_shape gelu -N 4096 --block 64
  grep -q ' fwd3 block=64 ' "$logdir/cli-gelu.log" || fail "dev/cuda gelu --block 64: no fwd3 line at 64 threads"
  timed_shape classifier -N 12 -V 1003 -Vp 1024
  timed_shape encoder -B 2 -T 64 -C 96 -V 500 -Vp 504
  timed_shape adamw -N 4104
  timed_shape attention -B 1 -T 64 -NH 2 -HS 32
  timed_shape attention_kernels -B 1 -T 40 -NH 2 -HS 32
  timed_shape matmul -BT 64 -C 96
  timed_shape copy_spans -C 96
  TIMED="cast cast_transposed" timed_shape fp8 -N 4096
  # Several versions named: each of them checked and timed, no other.
  log="$logdir/cli-adamw-two.log"
  if "$bindir/adamw" v4 v5 -N 4104 --reps 1 >"$log" 2>&1 && grep -Eq ' v4 +[0-9.]+ ms' "$log" &&
    grep -Eq ' v5 +[0-9.]+ ms' "$log" && ! grep -Eq ' v1 ' "$log"
  then echo "ok    dev/cuda adamw v4 v5: both versions, and only they, checked and timed"
  else fail "dev/cuda adamw v4 v5: failed, or not v4 and v5 alone (log: $log)"; fi
  # Not global_norm: its fixed grid of 1024 blocks of 512 threads takes ASan 90 s a run; its
  # `--check --small` run covers its kernels, and its command line is the same code as the others'.

  refused "a zero" "-N wants a whole number from 1 to [0-9]+, got '0'" layernorm -N 0
  refused "a word" "-C wants a whole number from 1 to [0-9]+, got 'wide'" layernorm -C wide
  refused "a partial vector" "-C 100 is not a multiple of 8" layernorm -C 100
  refused "a missing value" "-N needs a value" layernorm fwd1 -N
  refused "a partial warp" "--block 100 is not a multiple of 32" layernorm --block 100
  refused "--sweep with --block" "--sweep and --block" gelu --sweep --block 64
  refused "shape flags with --small" "--small runs only the built-in small shapes" layernorm --small -N 64
  refused "an unknown version" "unknown version 'fwd9' \(have: all, fwd1, fwd2" layernorm fwd9
  refused "an unknown version beside known ones" "unknown version 'v9'" adamw v4 v9 v5
  refused "another family's flag" "unknown flag '-V'" layernorm -V 3
  refused "a padded vocabulary under the vocabulary" "-Vp 64 is smaller than -V 100" classifier -V 100 -Vp 64
  refused "too many threads for the shared memory" "layernorm: 32 warps of C=1600 need 102400 bytes" \
    layernorm fwd2 -N 64 -C 1600 --block 1024 --reps 1
}
