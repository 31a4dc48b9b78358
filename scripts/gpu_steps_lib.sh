# shellcheck shell=bash
# Sourced by the GPU scripts that print one table row per check (scripts/test_gpu.sh,
# scripts/gpu_session.sh): one time budget cut into per-step limits, so that a hang costs only its
# own step and the table still comes out. The caller sets `budget` (seconds, counted on bash's
# SECONDS) and reads `rows` and `failed` at the end.
rows=()
failed=0
row() {  # row STATUS NAME FIGURE
  rows+=("$(printf '%-4s  %-38s %s' "$1" "$2" "$3")")
  if [ "$1" = FAIL ]; then failed=$((failed + 1)); fi
  echo "$1  $2  $3"
}

# limited SECONDS LOG COMMAND...: runs COMMAND (stdout and stderr to LOG) for at most SECONDS, or
# what is left of the budget; returns its status, 124 when it ran out of time (the figure
# `timed_out` describes), 125 when no time was left to start it.
limit_used=0
limited() {
  local want=$1 log=$2
  shift 2
  local left=$((budget - SECONDS))
  limit_used=$((want < left ? want : left))
  if [ "$limit_used" -lt 5 ]; then
    echo "not run: the ${budget}s budget is spent" >"$log"
    return 125
  fi
  timeout -k 10 "$limit_used" "$@" >"$log" 2>&1
}
# A row's figure for a non-zero status of `limited`.
status_text() {  # status_text RC LOG
  case "$1" in
    124 | 137) echo "timed out after ${limit_used}s (log: $2)" ;;
    125) echo "not run: the ${budget}s budget was spent" ;;
    *) echo "exit $1: $(grep -m 1 '^error' "$2" || tail -n 1 "$2")" ;;
  esac
}

# max_rel_diff A B: the largest relative difference of the trl/tel values of two main.logs (the
# same events required, else "events differ" and status 1).
max_rel_diff() {
  awk 'FNR == 1 { file++ } { for (i = 2; i <= NF; i++) { split($i, kv, ":"); key = $1 " " kv[1];
         if (kv[1] != "trl" && kv[1] != "tel") continue;
         if (file == 1) a[key] = kv[2]; else { b[key] = kv[2]; if (!(key in a)) missing = 1 } } }
       END { for (k in a) { if (!(k in b)) missing = 1; d = a[k] - b[k]; if (d < 0) d = -d; r = d / (a[k] < 0 ? -a[k] : a[k]);
             if (r > worst) worst = r }
             if (missing) { print "events differ"; exit 1 } printf "%.1e\n", worst }' "$1" "$2"
}
# A main.log without its mfu: figures, which are timings and differ from run to run.
without_mfu() { sed 's/ mfu:[0-9.]*//' "$1"; }

# The training step lines of a trainer's console log ("step  3/20 | loss ..."; validation lines
# read "step 0 | val loss").
train_steps() { grep -E '^step +[0-9]+/[0-9]+ \| loss ' "$1"; }
# The loss of the first (first_loss) or last (last_loss) step line on stdin.
first_loss() { head -n 1 | sed -n 's/.*| loss \([0-9.]*\) .*/\1/p'; }
last_loss() { tail -n 1 | sed -n 's/.*| loss \([0-9.]*\) .*/\1/p'; }

# The GPU's compute capability as nvcc's architectures name it: 90 for 9.0.
gpu_compute_cap() { nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d '.'; }

# gpu_binaries: sets `bin` to the folder of the GPU binaries (train_gpt2cu-{bf16,fp32},
# test_gpt2cu-{bf16,fp32}, hold_gpu_memory, the dev/cuda benchmarks and run_all.sh): the bundle's, $dist/bin (made
# by `make gpu-dist`), when its binaries run on this machine, else a build from source with
# this machine's nvcc into build/gpu-local/bin (fmt header-only from the bundle when the system has
# no libfmt; cuBLAS, cuDNN and NCCL from Python wheels when the system has them only so,
# scripts/cuda_wheels.sh), for this GPU's architecture only. One "binaries" row. Needs `dist`,
# `logs` and `root`, and scripts/gpu_env.sh sourced.
gpu_binaries() {
  bin=""
  local nvcc build_args dev_flags cc arch build_ok p b src
  if [ -x "$dist/bin/test_gpt2cu-bf16" ] && limited 60 "$logs/probe.log" "$dist/bin/test_gpt2cu-bf16" --probe; then
    bin=$dist/bin
    row PASS "binaries" "prebuilt bundle $dist ($(head -n 1 "$logs/probe.log"))"
  else
    echo "binaries: the bundle is missing or does not run here ($(tail -n 1 "$logs/probe.log" 2>/dev/null)); building"
    nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    # What this machine lacks, from the bundle: make arguments for the trainer (build_args) and for
    # dev/cuda (dev_flags).
    build_args=()
    dev_flags=(NVCC="$nvcc")
    if ! echo '#include <fmt/format.h>' | g++ -E -x c++ - >/dev/null 2>&1; then
      [ -d "$dist/include/fmt" ] || row FAIL "binaries" "no libfmt here and no $dist/include to build with"
      build_args=(FMT_INCLUDE="$root/$dist/include")
      dev_flags=(NVCC="$nvcc -DFMT_HEADER_ONLY -I$root/$dist/include" CXX="g++ -DFMT_HEADER_ONLY -I$root/$dist/include"
        FMT_LIBS=)
    fi
    # Without OpenMPI's wrappers, the headers and libmpi that the bundle carries.
    command -v mpicc >/dev/null 2>&1 ||
      build_args+=(MPI_INCLUDE="$root/$dist/include/mpi" MPI_LIBDIR="$root/$dist/openmpi/lib")
    # cuBLAS, cuDNN and NCCL from Python wheels, for what the toolkit lacks.
    if ! CUDA_HOME=$(cuda_toolkit_root "$nvcc") cuda_wheel_make_args 2>"$logs/cuda_wheels.txt"; then
      row FAIL "binaries" "$(head -n 2 "$logs/cuda_wheels.txt" | tail -n 1 | sed 's/^ *//') (log: $logs/cuda_wheels.txt)"
    fi
    # Only this GPU's architecture, to keep the build short.
    cc=$(gpu_compute_cap)
    arch="-gencode arch=compute_${cc}a,code=sm_${cc}a"
    [ "$cc" = 80 ] && arch="-gencode arch=compute_80,code=sm_80"
    build_ok=1
    for p in BF16 FP32; do
      limited 300 "$logs/build-$p.log" make -j"$(nproc)" NVCC="$nvcc" CUDA_ARCHS="$arch" PRECISION=$p \
        BUILD=build/gpu-local "${build_args[@]}" "${wheel_args[@]}" cuda-binaries || build_ok=0
    done
    mkdir -p build/gpu-local/bin
    for p in bf16 fp32; do for b in train_gpt2cu test_gpt2cu; do
      cp -f "build/gpu-local/cuda-$p/$b" "build/gpu-local/bin/$b-$p" 2>/dev/null || build_ok=0
    done; done
    cp -f build/gpu-local/cuda-bf16/hold_gpu_memory build/gpu-local/bin/ 2>/dev/null || build_ok=0
    limited 300 "$logs/build-dev-cuda.log" make -j"$(nproc)" -C dev/cuda ARCHS="$arch" "${dev_flags[@]}" \
      "${wheel_args[@]}" || build_ok=0
    for src in dev/cuda/*.cu; do
      b=$(basename "$src" .cu)
      [ "$b" = compile_fp32 ] || cp -f "dev/cuda/$b" build/gpu-local/bin/ 2>/dev/null || build_ok=0
    done
    cp -f dev/cuda/run_all.sh build/gpu-local/bin/
    bin=build/gpu-local/bin
    if [ "$build_ok" = 1 ]; then row PASS "binaries" "built here for sm_$cc (logs: build-*.log)"
    else row FAIL "binaries" "build from source failed or ran out of time (logs: $logs/build-*.log)"; fi
  fi
}

# parity PRECISION NAME [VAR=VALUE...]: test_gpt2cu of that precision (parity with the CPU backend,
# docs/contract.md) from $bin, with the variables; one row, its FAIL lines echoed; its status.
parity() {
  local p=$1 name=$2
  shift 2
  local log="$logs/test_gpt2cu-$p${1:+-fallback}.log"
  limited 150 "$log" env "$@" "$bin/test_gpt2cu-$p"
  local rc=$?
  local summary
  summary=$(grep 'checks passed' "$log" | tail -n 1)
  if [ "$rc" -eq 0 ]; then row PASS "$name" "$summary"
  else
    row FAIL "$name" "${summary:-$(status_text "$rc" "$log")}"
    grep '^FAIL' "$log" | head -n 8
  fi
  return "$rc"
}

# parity_rows: test_gpt2cu FP32, then BF16; when the BF16 test stops on a cuDNN error, once more
# with LLMC_ATTENTION=fallback, and `attention_env` (empty otherwise) then holds that setting for
# every BF16 run after it.
parity_rows() {
  attention_env=()
  parity fp32 "test_gpt2cu fp32"
  if ! parity bf16 "test_gpt2cu bf16" && grep -q 'cuDNN attention' "$logs/test_gpt2cu-bf16.log"; then
    attention_env=(LLMC_ATTENTION=fallback)
    parity bf16 "test_gpt2cu bf16, fallback attention" "${attention_env[@]}"
  fi
}

# compute_sanitizer: prints the path of compute-sanitizer (PATH, then the CUDA toolkit's), or nothing.
compute_sanitizer() {
  local c
  command -v compute-sanitizer && return
  for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [ -x "$c" ] && { echo "$c"; return; }
  done
  return 0
}

# sanitizer_run TOOL NAME LOG SECONDS [VAR=VALUE...] COMMAND...: COMMAND under compute-sanitizer's
# TOOL (memcheck, racecheck, synccheck, initcheck), with the variables in its environment, for at
# most SECONDS (`limited`, or $limit_command when set: a function with the same arguments, whose
# statuses $status_command words); one row NAME: PASS with 0 reports, SKIP where there is no
# compute-sanitizer or it does not support the device.
# --report-api-errors no: the tools are here for the kernels. NCCL 2.28 probes its kernels with
# cudaFuncGetAttributes and handles the "no kernel image" (error 209) it gets for other
# architectures itself; memcheck counted 8 of those as errors on an H200. Our own CUDA, cuBLAS and
# cuDNN calls are all checked, and any error in them stops the program.
sanitizer_run() {
  local tool=$1 name=$2 log=$3 seconds=$4 sanitizer rc errors vars=()
  shift 4
  while [[ "${1:-}" == [A-Z]*=* ]]; do vars+=("$1"); shift; done
  sanitizer=$(compute_sanitizer)
  if [ -z "$sanitizer" ]; then row SKIP "$name" "compute-sanitizer not found"; return; fi
  ${limit_command:-limited} "$seconds" "$log" env "${vars[@]}" "$sanitizer" --tool "$tool" --report-api-errors no --error-exitcode 3 \
    --target-processes all "$@"
  rc=$?
  errors=$(grep -o 'ERROR SUMMARY: [0-9]* error' "$log" | tail -n 1)
  if [ "$rc" -eq 0 ]; then row PASS "$name" "${errors:-no summary}"
  elif grep -q 'Device not supported' "$log"; then row SKIP "$name" "compute-sanitizer does not support this device here"
  else row FAIL "$name" "${errors:+$errors, }$(${status_command:-status_text} "$rc" "$log")"; fi
}

# sanitizer_rows TOOL SECONDS: test_gpt2cu of both precisions under compute-sanitizer's TOOL on a
# small config (the bf16 one with ${attention_env[@]}), at most SECONDS each; a row each.
sanitizer_rows() {
  local tool=$1 seconds=$2 p vars
  for p in fp32 bf16; do
    vars=()
    [ "$p" = bf16 ] && vars=("${attention_env[@]}")
    sanitizer_run "$tool" "$tool test_gpt2cu $p (L1 C64)" "$logs/$tool-$p.log" "$seconds" "${vars[@]}" \
      "$bin/test_gpt2cu-$p" --config L1H2C64T32 --B 2 --T 16 --quick
  done
}

# mpi_launcher: sets `launcher` to the mpirun that starts the binaries in $bin: the bundle's
# (build/gpu-dist/bin/mpirun, scripts/bundle_openmpi.sh) for the bundle's binaries, the machine's
# own for binaries built here; empty when there is none (a SKIP row then says $no_mpirun).
# `launcher_name` says which.
no_mpirun="no mpirun: neither the machine's nor the bundle's (make gpu-dist carries one)"
mpi_launcher() {
  launcher=()
  launcher_name=""
  if [ "$bin" != "$dist/bin" ] && command -v mpirun >/dev/null 2>&1; then launcher=(mpirun)
  elif [ -x "$dist/bin/mpirun" ]; then launcher=("$dist/bin/mpirun"); launcher_name="bundled mpirun"
  fi
}

# multi_rank_rows: the multi-rank paths on the one GPU (FP32 build, small model, shards
# $corpus/corpus_train_*.bin): NCCL with 1 rank (LLMC_COMMUNICATOR=nccl, -z 1) against the plain
# run; 2 ranks sharing the GPU with ZeRO-1 through MPI (host staging) against 1 rank with the same
# -d, under the bundle's mpirun (scripts/bundle_openmpi.sh) or, for binaries built here, the
# machine's (SKIP when there is neither). Two rows.
multi_rank_rows() {
  local small name rc_plain rc diff
  if [ -z "$corpus" ]; then
    row FAIL "multi-rank (NCCL 1 rank, MPI 2 ranks)" "$corpus_missing"
  else
    small=(-i "$corpus/corpus_train_*.bin" -e L2H4C256T64 -b 4 -t 64 -d 1024 -x 6 -l 1e-3 -v 0 -s 0 -sh 0 -z 1)
    name="NCCL communicator, 1 rank, -z 1"
    limited 60 "$logs/rank1_plain.log" "$bin/train_gpt2cu-fp32" "${small[@]}" -o "$logs/rank1_plain"
    rc_plain=$?
    limited 60 "$logs/rank1_nccl.log" env LLMC_COMMUNICATOR=nccl "$bin/train_gpt2cu-fp32" "${small[@]}" \
      -o "$logs/rank1_nccl"
    rc=$?
    if [ "$rc_plain" -ne 0 ]; then
      row FAIL "$name" "plain run: $(status_text "$rc_plain" "$logs/rank1_plain.log")"
    elif [ "$rc" -ne 0 ]; then
      row FAIL "$name" "$(status_text "$rc" "$logs/rank1_nccl.log")"
    elif ! grep -q "over NCCL" "$logs/rank1_nccl.log"; then
      row FAIL "$name" "the run did not use NCCL (see rank1_nccl.log)"
    elif cmp -s <(without_mfu "$logs/rank1_plain/main.log") <(without_mfu "$logs/rank1_nccl/main.log"); then
      row PASS "$name" "main.log identical to the run without collectives (but for the MFU timings)"
    else
      row FAIL "$name" "main.log differs from the plain run (max rel $(max_rel_diff \
        "$logs/rank1_plain/main.log" "$logs/rank1_nccl/main.log"))"
    fi
    name="ZeRO-1, 2 ranks on 1 GPU (MPI)"
    mpi_launcher
    name="$name${launcher_name:+, $launcher_name}"
    if [ ${#launcher[@]} -eq 0 ]; then
      row SKIP "$name" "$no_mpirun"
    elif [ "$rc_plain" -ne 0 ]; then
      row FAIL "$name" "no single-rank run to compare with (rank1_plain.log)"
    else
      limited 120 "$logs/rank2_mpi.log" "${launcher[@]}" --allow-run-as-root --oversubscribe -np 2 \
        "$bin/train_gpt2cu-fp32" "${small[@]}" -o "$logs/rank2_mpi" </dev/null
      rc=$?
      if [ "$rc" -ne 0 ]; then
        row FAIL "$name" "$(status_text "$rc" "$logs/rank2_mpi.log")"
      elif ! grep -q "2 ranks over MPI" "$logs/rank2_mpi.log"; then
        row FAIL "$name" "the 2 ranks did not use the MPI path (see rank2_mpi.log)"
      else
        diff=$(max_rel_diff "$logs/rank2_mpi/main.log" "$logs/rank1_plain/main.log")
        if [ "$diff" != "events differ" ] && awk -v d="$diff" 'BEGIN { exit !(d + 0 <= 1e-5) }'; then
          row PASS "$name" "losses vs 1 rank: max rel diff $diff (bar 1e-5)"
        else
          row FAIL "$name" "losses vs 1 rank: max rel diff $diff (bar 1e-5)"
        fi
      fi
    fi
  fi
}

# find_corpus: sets `corpus` to the folder of the bundled corpus shards: $dist/corpus (make gpu-dist
# copies data/corpus there), else data/corpus (`make data`), else "" with `corpus_missing` saying
# what to do.
find_corpus() {
  corpus=""
  corpus_missing="no corpus shards in $dist/corpus or data/corpus: run \`make data\`"
  local d
  for d in "$dist/corpus" data/corpus; do
    if ls "$d"/corpus_train_*.bin >/dev/null 2>&1; then corpus=$d; return 0; fi
  done
  return 1
}

# devcuda_benches: the dev/cuda benchmarks beside the binaries in $bin: the bundle's list when $bin is
# the bundle's, else every dev/cuda/*.cu but compile_fp32 (gpu_binaries built them all).
devcuda_benches() {
  local src b
  if [ "$bin" = "$dist/bin" ]; then
    cat "$dist/dev_cuda_benches.txt" 2>/dev/null
  else
    for src in dev/cuda/*.cu; do
      b=$(basename "$src" .cu)
      [ "$b" = compile_fp32 ] || echo "$b"
    done
  fi
}

# devcuda_row SECONDS BENCH...: run_all.sh --check over these dev/cuda benchmarks from $bin, for at
# most SECONDS; one row, the FAIL lines echoed. No benchmark at all is a FAIL, not 0 checks passed.
devcuda_row() {
  local want=$1 rc summary
  shift
  if [ $# -eq 0 ]; then
    row FAIL "dev/cuda kernel checks" "no benchmarks to run (none in the bundle's dev_cuda_benches.txt, none built)"
    return
  fi
  limited "$want" "$logs/dev_cuda_check.log" "$bin/run_all.sh" --check "$@"
  rc=$?
  if [ "$rc" -eq 0 ]; then row PASS "dev/cuda kernel checks" "$(tail -n 1 "$logs/dev_cuda_check.log")"
  else
    summary=$(grep 'checks passed' "$logs/dev_cuda_check.log" | tail -n 1)
    row FAIL "dev/cuda kernel checks" "${summary:-$(status_text "$rc" "$logs/dev_cuda_check.log")}"
    grep '^FAIL' "$logs/dev_cuda_check.log" | head -n 10
  fi
}
