#!/usr/bin/env bash
# `make gpu-dist`, the bundle to copy to a GPU machine without a toolchain (docs/cuda-trainer.md),
# built here without a GPU: it must hold every binary scripts/gpu_session.sh runs (ours in both
# precisions, hold_gpu_memory, the dev/cuda checks, the Open MPI launcher, llm.c's train_gpt2cu built from the
# snapshot in ../shared/external), each resolving every library it links; the corpus; the commits
# (ours and llm.c's, the latter the snapshot's) and the snapshots (to build llm.c there where it
# does not start); and stay within the bundle's limit of 60 MiB, a bundle over it failing with a
# clear message. Without the snapshots, the bundle has no llm.c and says what builds one. Skips
# (exit 77) without nvcc.
# Built with CUDA_WERROR=1 from the objects that check_cuda_build.sh compiles (whichever check comes
# first compiles them; nvcc never compiles one twice).
set -u
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=scripts/cuda_wheels.sh
source scripts/cuda_wheels.sh
cuda_toolkit_root >/dev/null || { echo "SKIP: nvcc not found (the bundle is CUDA binaries)"; exit 77; }
# shellcheck source=tests/lib/tally.sh
source tests/lib/tally.sh
dist=build/gpu-dist
log=build/tmp/check_gpu_dist.log
mkdir -p build/tmp

if ! make --no-print-directory CUDA_WERROR=1 gpu-dist >"$log" 2>&1; then
  tail -n 20 "$log"
  echo "FAIL  make gpu-dist (log: $log)"
  exit 1
fi
size=$(du -sm "$dist" | cut -f1)
if [ "$size" -le 60 ] && grep -qF "gpu-dist: $dist ($size MiB of at most 60)" "$log"; then
  ok "the bundle is $size MiB (at most 60), and says so"
else fail "the bundle is $size MiB; make said: $(grep '^gpu-dist:' "$log")"; fi

binaries=(bin/train_gpt2cu-bf16 bin/train_gpt2cu-fp32 bin/test_gpt2cu-bf16 bin/test_gpt2cu-fp32 bin/hold_gpu_memory
  llmc/train_gpt2cu)
for b in $(cat "$dist/dev_cuda_benches.txt"); do binaries+=("bin/$b"); done
missing=()
unresolved=()
for b in "${binaries[@]}"; do
  if [ ! -x "$dist/$b" ]; then missing+=("$b"); continue; fi
  # With the bundle's library folder on the loader's path, as scripts/gpu_env.sh sets it there.
  LD_LIBRARY_PATH=$PWD/$dist/openmpi/lib ldd "$dist/$b" | grep -q 'not found' && unresolved+=("$b")
done
if [ ${#missing[@]} -eq 0 ] && [ ${#unresolved[@]} -eq 0 ]; then
  ok "${#binaries[@]} binaries (ours, hold_gpu_memory, the dev/cuda checks, llm.c's) there, every library resolved"
else fail "missing: ${missing[*]:-none}; with unresolved libraries: ${unresolved[*]:-none}"; fi
for f in bin/run_all.sh bin/mpirun openmpi/bin/orterun; do
  [ -x "$dist/$f" ] || fail "no $f in the bundle"
done
[ -x "$dist/bin/mpirun" ] && [ -x "$dist/bin/run_all.sh" ] && ok "the kernel-check runner and the Open MPI launcher"

snapshot=$(ls "${LLMC_SNAPSHOTS:-../shared/external}"/llm.c-*.tar.gz | head -n 1)
snapshot_commit=$(tar xzOf "$snapshot" llm.c/SNAPSHOT | cut -d' ' -f2 | cut -c1-12)
if [ -n "$snapshot_commit" ] && [ "$(cat "$dist/llmc/COMMIT")" = "$snapshot_commit" ] &&
  cmp -s "$snapshot" "$dist/llmc/snapshots/$(basename "$snapshot")" && ls "$dist"/llmc/snapshots/cudnn-frontend-*.tar.gz >/dev/null; then
  ok "llm.c's commit is the snapshot's ($snapshot_commit), and both snapshots travel to build it there"
else fail "llmc/COMMIT '$(cat "$dist/llmc/COMMIT" 2>/dev/null)', the snapshot's '$snapshot_commit'"; fi
if [ "$(cat "$dist/PROJECT_COMMIT")" = "$(git describe --always --dirty --abbrev=12)" ]; then
  ok "our commit: $(cat "$dist/PROJECT_COMMIT")"
else fail "PROJECT_COMMIT '$(cat "$dist/PROJECT_COMMIT")'"; fi
if cmp -s <(cd data/corpus && cat corpus_*.bin) <(cd "$dist/corpus" && cat corpus_*.bin) &&
  [ "$(ls "$dist/corpus" | wc -l)" = "$(ls data/corpus/corpus_*.bin | wc -l)" ]; then
  ok "the corpus shards: $(ls "$dist/corpus" | wc -l)"
else fail "the bundle's corpus differs from data/corpus"; fi
if git check-ignore -q external/llm.c && [ -z "$(git ls-files external)" ]; then ok "nothing of llm.c is tracked"
else fail "external/ is not ignored, or holds tracked files"; fi

# Without llm.c's snapshots (a user's clone): a bundle without llm.c, saying how to get one there.
if LLMC_SNAPSHOTS=$PWD/build/tmp/no_snapshots LLMC_EXTERNAL=$PWD/build/tmp/no_external \
  make --no-print-directory CUDA_WERROR=1 gpu-dist >"$log.nollmc" 2>&1 && [ ! -e "$dist/llmc" ] && [ -x "$dist/bin/train_gpt2cu-bf16" ] &&
  grep -qF "gpu-dist: no llm.c snapshot in $PWD/build/tmp/no_snapshots (LLMC_SNAPSHOTS) or $PWD/build/tmp/no_external/: the bundle has no llm.c; there, make gpu-session LLMC_DIR=~/llm.c builds one from a checkout" "$log.nollmc"; then
  ok "without llm.c's snapshots: a bundle without llm.c, naming LLMC_DIR"
else fail "without llm.c's snapshots: $(grep -m 2 'gpu-dist\|llmc_snapshot' "$log.nollmc")"; fi

# Over the bar: the same bundle against a 1 MiB limit. The size check is the recipe's last step, so
# the bundle it leaves is complete, as the one checked above.
if make --no-print-directory CUDA_WERROR=1 gpu-dist GPU_DIST_MAX_MIB=1 >"$log.over" 2>&1; then
  fail "a bundle over GPU_DIST_MAX_MIB=1 passed"
elif grep -qF "gpu-dist: $dist is $size MiB, over the bundle's limit of 1 MiB (GPU_DIST_MAX_MIB)" "$log.over"; then
  ok "a bundle over the bar fails, naming its size and the bar"
else fail "over the bar: $(grep -m 1 'gpu-dist' "$log.over")"; fi

tally_end gpu_dist \
  "gpu-dist: $checks checks: $size MiB of at most 60, ${#binaries[@]} binaries with llm.c $snapshot_commit, all linking"
