#!/usr/bin/env bash
# make test-emu: the CUDA kernels on the emulated GPU (docs/cuda-emulator.md), under ASan + UBSan,
# under TSan, and under the emulator's own shared-memory race check (racecheck). For each: the
# emulator's own tests (emulator/tests/test_*.cu), the faults a GPU would report, each in its
# own process (emulator/tests/emu_faults.cu: the exit status and the words of the report are
# checked), and every hand-written kernel family's dev/cuda checks at small shapes (--small) in BF16
# and FP32 (TSan: BF16 only, and without global_norm, which racecheck carries). One summary line at
# the end. On the ASan BF16 build also the benchmarks' command line (tests/lib/dev_cuda_command_line.sh):
# shapes from the flags, timed with L2 flushed, block sizes swept, bad values refused.
# Skips (exit 77) when there are no CUDA toolkit headers to compile against.
set -u
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source-path=SCRIPTDIR source=../lib/emu_headers.sh
source tests/lib/emu_headers.sh
# shellcheck source-path=SCRIPTDIR source=../lib/dev_cuda_command_line.sh
source tests/lib/dev_cuda_command_line.sh
# shellcheck source-path=SCRIPTDIR source=../lib/emu_kernel_checks.sh
source tests/lib/emu_kernel_checks.sh
jobs=${EMU_JOBS:-2}
logs=build/test-logs/emu
mkdir -p "$logs"
failed=0
kernel_checks=0
fault_cases=0
unit_cases=0
fail() { echo "FAIL  $*"; failed=$((failed + 1)); }

build() {  # build SANITIZER PRECISION TARGET
  local out
  if ! out=$(make --no-print-directory -j"$jobs" CUDA_HOME="$cuda_home" EMU_SANITIZER="$1" PRECISION="$2" "$3" 2>&1); then
    fail "build of $3 ($1, $2)"
    tail -n 30 <<<"$out" | sed 's/^/      /'
    return 1
  fi
}

# expect SANITIZER CASE STATUS PATTERN...: runs one fault case; its exit status must be STATUS
# ("nonzero" for a sanitizer's abort) and its output must contain every PATTERN (grep -E).
expect() {
  local san=$1 case=$2 status=$3; shift 3
  local log="$logs/$san-fault-$case.log" rc=0
  "build/emu-$san/tests/emu_faults" "$case" >"$log" 2>&1 || rc=$?
  fault_cases=$((fault_cases + 1))
  if { [ "$status" = nonzero ] && [ "$rc" -eq 0 ]; } || { [ "$status" != nonzero ] && [ "$rc" -ne "$status" ]; }; then
    fail "$san fault $case: exit $rc, expected $status (log: $log)"
    tail -n 8 "$log" | sed 's/^/      /'
    return
  fi
  local pattern
  for pattern in "$@"; do
    grep -Eq -- "$pattern" "$log" || { fail "$san fault $case: no '$pattern' in the output (log: $log)"; return; }
  done
  echo "ok    $san fault $case"
}

# Errors the CUDA runtime returns and device faults, named with the kernel (or call) and, inside a
# kernel, the block and thread; the same under every sanitizer.
runtime_faults() {
  local san=$1
  expect "$san" too_many_threads 1 'launch of .*noop_kernel.*block \(1025,1,1\)' 'at most 1024 threads' \
    'invalid configuration argument'
  expect "$san" block_z_over_64 1 'block \(1,1,65\)' 'invalid configuration argument'
  expect "$san" grid_y_over_65535 1 'grid \(1,65536,1\)' 'invalid configuration argument'
  expect "$san" shared_over_default 1 '49168 bytes of dynamic shared memory' 'without cudaFuncSetAttribute' \
    'invalid argument'
  expect "$san" shared_over_opt_in 1 'cudaFuncSetAttribute: 232464 bytes' 'invalid argument'
  expect "$san" misaligned 1 'misaligned address: 16-byte load at 0x[0-9a-f]*8 in kernel .*misaligned_load_kernel' \
    'block \([01],0,0\), thread \(3,0,0\)' 'then cudaMalloc: misaligned address'
  expect "$san" divergent_barrier 1 'wait at different __syncthreads' 'divergent_barrier_kernel'
  expect "$san" shuffle_exited_lane 1 '__shfl_xor_sync with mask 0xffffffff names lane 31, which has exited'
  expect "$san" shuffle_outside_mask 1 'lane [0-9]+ reads lane 20, which is outside the mask'
  expect "$san" shuffle_barrier_deadlock 1 'never completes: lanes 1, .*31 wait at __syncthreads' \
    'thread \(32,0,0\)'
  expect "$san" shared_synced 0 'reached the end'
}

# compute-sanitizer's memcheck: ASan, which names the kernel through the emulator.
memcheck_faults() {
  expect address out_of_bounds nonzero 'heap-buffer-overflow' 'came from kernel .*out_of_bounds_kernel, block \(3,0,0\)'
  expect address use_after_free nonzero 'heap-use-after-free' 'came from kernel .*out_of_bounds_kernel'
  expect address other_allocation nonzero 'use-after-poison' 'came from kernel .*other_allocation_kernel'
  expect address shared_out_of_bounds nonzero 'use-after-poison' 'came from kernel .*shared_out_of_bounds_kernel'
  expect address dynamic_shared_out_of_bounds nonzero 'use-after-poison' 'dynamic_shared_out_of_bounds_kernel'
  expect address host_reads_device nonzero 'use-after-poison' 'emu_faults.cu'
  expect address host_reads_device_after_work nonzero 'use-after-poison' 'emu_faults.cu'
}

# compute-sanitizer's racecheck, by TSan over the fibers: shared memory, within a warp, between blocks.
tsan_faults() {
  expect thread shared_race nonzero 'ThreadSanitizer: data race' 'shared_race_kernel'
  expect thread warp_race nonzero 'ThreadSanitizer: data race' 'warp_race_kernel'
  expect thread blocks_race nonzero 'ThreadSanitizer: data race' 'blocks_race_kernel'
}

# The emulator's own race check: shared memory only, as compute-sanitizer's racecheck.
racecheck_faults() {
  expect racecheck shared_race 1 'shared memory race \((read after write|write after read)\)' \
    'kernel .*shared_race_kernel, block \(0,0,0\)'
  expect racecheck warp_race 1 'shared memory race' 'warp_race_kernel'
  expect racecheck shared_synced 0 'reached the end'
}

for san in address thread racecheck; do
  build "$san" BF16 emu-tests || continue
  # Every emulator/tests/test_*.cu (emu_faults.cu, the faults' program, is driven below).
  for src in emulator/tests/test_*.cu; do
    test=$(basename "$src" .cu)
    log="$logs/$san-$test.log"
    if "build/emu-$san/tests/$test" >"$log" 2>&1; then
      cases=$(grep -Eo '[0-9]+ passed' "$log" | head -n 1 | cut -d' ' -f1)
      unit_cases=$((unit_cases + ${cases:-0}))
      echo "ok    $san $test: $(grep -E '^\[doctest\] test cases' "$log")"
    else
      fail "$san $test (log: $log)"
      tail -n 20 "$log" | sed 's/^/      /'
    fi
  done

  # A malformed LLMC_EMU_COMPUTE_CAPABILITY or LLMC_EMU_MEMORY_TAKEN stops the program (exit 2),
  # naming the variable: SETTING|TEST CASE|MESSAGE.
  for malformed in "LLMC_EMU_COMPUTE_CAPABILITY=9|the device*|LLMC_EMU_COMPUTE_CAPABILITY is '9'; it must be major.minor" \
    "LLMC_EMU_MEMORY_TAKEN=2GiB|cudaMalloc: 256*|LLMC_EMU_MEMORY_TAKEN is '2GiB'; it must be a whole number of MiB"; do
    IFS='|' read -r setting test_case message <<<"$malformed"
    log="$logs/$san-${setting%%=*}.log"
    rc=0
    env "$setting" "build/emu-$san/tests/test_emulator" --test-case="$test_case" >"$log" 2>&1 || rc=$?
    if [ "$rc" -eq 2 ] && grep -qF "$message" "$log"
    then echo "ok    $san $setting refused"
    else fail "$san $setting: exit $rc (log: $log)"; fi
  done

  case $san in
    address) runtime_faults "$san"; memcheck_faults ;;
    thread) runtime_faults "$san"; tsan_faults ;;
    racecheck) racecheck_faults ;;
  esac
  # The seed orders blocks and warps: the same order for one seed, another for another.
  order() { LLMC_EMU_WORKERS=1 LLMC_EMU_SEED=$1 "build/emu-$san/tests/emu_faults" print_order 2>&1 | head -n 1; }
  a=$(order 1); b=$(order 1); c=$(order 2)
  if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" != "$c" ]; then echo "ok    $san seed orders blocks and warps"
  else fail "$san seed: '$a' / '$b' / '$c'"; fi

  # The seed orders the streams' work (LLMC_EMU_STREAMS=seeded) and keeps each stream's own order.
  stream_order() { LLMC_EMU_STREAMS=seeded LLMC_EMU_SEED=$1 "build/emu-$san/tests/emu_faults" print_stream_order 2>&1 | head -n 1; }
  in_stream_order() { tr ' ' '\n' <<<"$1" | awk 'NF { s = int($1 / 100); if ((s in last) && $1 <= last[s]) bad = 1; last[s] = $1 }
                                                  END { exit bad }'; }
  a=$(stream_order 1); b=$(stream_order 1); c=$(stream_order 2)
  if [ "$(wc -w <<<"$a")" -eq 24 ] && [ "$a" = "$b" ] && [ "$a" != "$c" ] && in_stream_order "$a" && in_stream_order "$c"
  then echo "ok    $san seed orders the streams' work, each stream in its own order"
  else fail "$san stream order: '$a' / '$b' / '$c'"; fi
  # The stream orders, each on the emulator's stream test and the graph replay test.
  for streams in latest seeded issue; do
    for test in test_emulator test_graphs; do
      if LLMC_EMU_STREAMS=$streams "build/emu-$san/tests/$test" --test-case='stream order*' \
        >"$logs/$san-streams-$streams-$test.log" 2>&1; then echo "ok    $san LLMC_EMU_STREAMS=$streams $test"
      else fail "$san LLMC_EMU_STREAMS=$streams $test (log: $logs/$san-streams-$streams-$test.log)"; fi
    done
  done

  # Each sanitizer runs the kernels in another order of blocks and warps: a kernel that works only
  # in one order fails in another.
  # TSan checks BF16 only: the FP32 kernels are the same code with another element type, so the
  # same barriers, and ASan and racecheck run both precisions (this keeps make test under 10 min).
  case $san in address) seed=0 ;; thread) seed=1 ;; racecheck) seed=2 ;; esac
  precisions="BF16 FP32"
  [ "$san" = thread ] && precisions=BF16
  for precision in $precisions; do
    emu_kernel_checks "$san" "$precision" "$seed" "$logs" || continue
    [ "$san$precision" = addressBF16 ] && dev_cuda_command_line "build/emu-$san/bf16" "$logs"
  done
done

if [ "$failed" -ne 0 ]; then
  echo "emulated GPU: $failed failures"
  exit 1
fi
echo "emulated GPU (ASan+UBSan, TSan, racecheck): $kernel_checks kernel checks in bf16+fp32, $unit_cases emulator tests, $fault_cases fault cases"
