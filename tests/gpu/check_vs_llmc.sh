#!/usr/bin/env bash
# dev/bench/vs_llmc.sh without a GPU and without llm.c:
#  (a) its argument and environment errors;
#  (b) its build steps, on a stand-in checkout written here (not llm.c): a Makefile with llm.c's
#      variables, link line and frontend search (./cudnn-frontend/include or ~/cudnn-frontend/include,
#      else "cuDNN not found"), and a train_gpt2.cu that makes llm.c's CUDA 12 cudaMemAdvise call,
#      shuffles its train loader as llm.c does and references cuBLAS, cuDNN, NVRTC and the driver
#      API. The call must fail to compile with CUDA 13 as it is and compile in the script's copy,
#      the copy's loader must be sequential, and the binary must link with the libnvidia-ml, libcuda
#      and libnvrtc the script supplies, once with cuDNN and cuBLAS from a fake wheel tree; the
#      commit named is git's, else the SNAPSHOT file's (a snapshot is no git checkout);
#  (c) its runs and table, with stand-ins for nvidia-smi and both trainers that print known step
#      times, losses and hold known memory: the A B A B order, the same shape flags for both (one
#      initial model file with VS_LLMC_INIT), the medians, tokens/s, MFU, memory, the losses and the
#      ratios worked out by hand below; the summary and the logs in VS_LLMC_OUT (a relative one from
#      the caller's folder); a prebuilt llm.c without LLMC_DIR, its commit from COMMIT.
# Skips (exit 77) without nvcc: (b) needs the toolkit.
set -u
cd "$(dirname "$0")/../.." || exit 1
root=$PWD
# shellcheck source=scripts/cuda_wheels.sh
source scripts/cuda_wheels.sh
toolkit=$(cuda_toolkit_root) || { echo "SKIP: nvcc not found (the build steps need the CUDA toolkit)"; exit 77; }
tmp=$PWD/build/tmp/check_vs_llmc
rm -rf "$tmp"
mkdir -p "$tmp"
# shellcheck source=tests/lib/tally.sh
source tests/lib/tally.sh
# shellcheck source=tests/lib/fake_llmc.sh
source tests/lib/fake_llmc.sh
script=dev/bench/vs_llmc.sh
work=$tmp/work
export VS_LLMC_WORK=$work

# ---- (a) errors: exit status and the message ----
expect_error() {  # expect_error NAME STATUS MESSAGE_PART ENV... -- ARGS...
  local name=$1 status=$2 part=$3
  shift 3
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local out rc=0
  out=$(env "${envs[@]}" bash "$script" "$@" 2>&1 </dev/null) || rc=$?
  if [ "$rc" = "$status" ] && grep -qF -- "$part" <<<"$out"; then ok "error: $name"
  else fail "error: $name: exit $rc (expected $status), output lacks '$part':"; sed 's/^/      /' <<<"$out" | head -n 8; fi
}
checkout=$tmp/llm.c
frontend=$tmp/cudnn-frontend
mkdir -p "$checkout/llmc" "$frontend/include" "$tmp/not-llmc"
expect_error "no argument: the usage" 2 "usage: dev/bench/vs_llmc.sh LLMC_DIR" --
expect_error "three arguments" 2 "too many arguments (3)" -- a b c
expect_error "LLMC_DIR missing" 1 "LLMC_DIR '$tmp/nowhere' is not a directory" -- "$tmp/nowhere"
expect_error "LLMC_DIR not llm.c" 1 "is not an llm.c checkout: it has no Makefile" -- "$tmp/not-llmc"
out=$(bash "$script" --help)
if grep -qF "llm.c f1e2ace651495b74ae22d45d1723443fd00ecd3a" <<<"$out" && grep -qF "VS_LLMC_BUILD_ONLY=1" <<<"$out"; then
  ok "--help names the llm.c commit it was built against"
else fail "--help lacks the llm.c commit or VS_LLMC_BUILD_ONLY"; fi

# ---- (b) the build, on a stand-in checkout ----
fake_llmc_checkout "$checkout" "$frontend"
expect_error "no cudnn-frontend there" 1 "no cudnn-frontend: no include/cudnn_frontend.h in $tmp/not-llmc" \
  -- "$checkout" "$tmp/not-llmc"
(cd "$checkout" && git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm stand-in)
commit=$(git -C "$checkout" rev-parse --short=12 HEAD)
cp -R "$checkout" "$tmp/pristine"

nvcc=$(command -v nvcc || echo "$toolkit/bin/nvcc")
if grep -qE 'cudaMemAdvise\([^)]*struct cudaMemLocation location\)' "$toolkit/include/cuda_runtime_api.h"; then
  if "$nvcc" -std=c++17 -c -o "$tmp/unpatched.o" -x cu "$checkout/llmc/cuda_utils.cuh" >"$tmp/unpatched.log" 2>&1; then
    fail "the CUDA 12 cudaMemAdvise call compiled with this CUDA 13 toolkit: the stand-in tests nothing"
  elif grep -q cudaMemAdvise "$tmp/unpatched.log"; then ok "the CUDA 12 cudaMemAdvise call fails with this toolkit"
  else fail "the unpatched call failed for another reason: $(head -n 3 "$tmp/unpatched.log")"; fi
fi

build() {  # build NAME ENV...: the script's build of the stand-in; checks the binary
  local name=$1 out rc=0
  shift
  out=$(env VS_LLMC_BUILD_ONLY=1 GPU_COMPUTE_CAPABILITY=90 HOME="$tmp/home" "$@" bash "$script" "$checkout" "$frontend" \
    2>&1 </dev/null) || rc=$?
  local bin=$work/llm.c/train_gpt2cu
  if [ "$rc" -ne 0 ] || [ ! -x "$bin" ]; then
    fail "build ($name): exit $rc"; sed 's/^/      /' <<<"$out" | tail -n 15; return 1
  fi
  local needed
  needed=$(readelf -d "$bin" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
  local lib missing=""
  # (-lnvidia-ml links, but nothing of it is used here: a linker with --as-needed drops it.)
  for lib in libcublas.so.13 libcudnn.so.9 libnvrtc.so.13 libcuda.so.1; do
    [[ " $needed" == *" $lib "* ]] || missing+=" $lib"
  done
  if [ -n "$missing" ]; then fail "build ($name): the binary does not need$missing (needs: $needed)"; return 1; fi
  if ! grep -q 'code=\[compute_90,sm_90\]' "$work/build.log"; then fail "build ($name): not for sm_90"; return 1; fi
  if ! grep -qF "building llm.c $commit for sm_90" <<<"$out"; then fail "build ($name): commit not named: $out"; return 1; fi
  ok "build ($name): linked with -lnvidia-ml, needs libcublas, libcudnn, libnvrtc and libcuda"
}
if build "the toolkit's libraries"; then
  if grep -qF 'cudaMemAdvise(*out, bytes, cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})' \
    "$work/llm.c/llmc/cuda_utils.cuh"; then ok "the copy's cudaMemAdvise takes a host cudaMemLocation"
  else fail "the copy's cudaMemAdvise was not patched: $(grep cudaMemAdvise "$work/llm.c/llmc/cuda_utils.cuh")"; fi
  if grep -qF 'int permute_train_loader = 0;' "$work/llm.c/train_gpt2.cu"; then ok "the copy's train loader is sequential"
  else fail "the copy still shuffles: $(grep permute_train_loader "$work/llm.c/train_gpt2.cu")"; fi
  if [ "$(readlink "$work/llm.c/cudnn-frontend")" = "$frontend" ]; then ok "the frontend is where llm.c's Makefile looks"
  else fail "no cudnn-frontend link in the copy: $(ls -l "$work/llm.c")"; fi
  if [ "$(cat "$work/llm.c/COMMIT")" = "$commit" ]; then ok "the build writes the commit to COMMIT beside the binary"
  else fail "COMMIT beside the binary: '$(cat "$work/llm.c/COMMIT" 2>/dev/null)', expected $commit"; fi
  if diff -r -x .git "$tmp/pristine" "$checkout" >/dev/null; then ok "the checkout is untouched"
  else fail "the script changed the checkout"; fi
  # The link name the script made in its library folder: none beside the toolkit's stub, else a link
  # to the driver's library, else a stub of its own with the driver's soname.
  made=$work/lib/libnvidia-ml.so
  driver=$(ldconfig -p | sed -n 's/.*libnvidia-ml\.so\.1 .*=> //p' | head -n 1)
  if [ -e "$toolkit/lib64/stubs/libnvidia-ml.so" ]; then
    if [ ! -e "$made" ]; then ok "libnvidia-ml: the toolkit's stub, no link name of the script's"
    else fail "libnvidia-ml: the script made $made beside the toolkit's stub"; fi
  elif [ -n "$driver" ]; then
    if [ "$(readlink "$made")" = "$driver" ]; then ok "libnvidia-ml: a link name to the driver's $driver"
    else fail "libnvidia-ml: $made is not a link to the driver's $driver"; fi
  elif [ "$(readelf -d "$made" | sed -n 's/.*soname: \[\(.*\)\]/\1/p')" = libnvidia-ml.so.1 ]; then
    ok "libnvidia-ml: no driver and no toolkit stub here, an empty stub with the driver's soname"
  else fail "the libnvidia-ml stub has the wrong soname"; fi
fi
# cuDNN and cuBLAS only as wheels (tests/lib/fake_cuda_wheels.sh): a toolkit folder without them
# (cuda_wheels.sh reads CUDA_HOME for what the system has).
# shellcheck source=tests/lib/fake_cuda_wheels.sh
source tests/lib/fake_cuda_wheels.sh
mkdir -p "$tmp/toolkit"
fake_cuda_wheels "$tmp/site" "$toolkit"
site=$tmp/site/nvidia
if build "cuDNN and cuBLAS from wheels" CUDA_HOME="$tmp/toolkit" CUDA_WHEEL_SITES="$tmp/site"; then
  if [ "$(readlink "$work/lib/libcudnn.so")" = "$site/cudnn/lib/libcudnn.so.9" ] &&
    [ "$(readlink "$work/lib/libcublasLt.so")" = "$site/cu13/lib/libcublasLt.so.13" ] &&
    grep -qF -- "-I$site/cudnn/include" "$work/build.log"; then
    ok "the wheels' headers and libraries are on the build's paths"
  else fail "the wheels' libraries are not linked: $(ls -l "$work/lib")"; fi
fi

# A snapshot (../shared/external's): no git checkout of its own, inside another repository (this
# one), with a SNAPSHOT file naming its commit.
snapshot=$tmp/snapshot/llm.c
mkdir -p "$tmp/snapshot"
cp -R "$tmp/pristine" "$snapshot" && rm -rf "$snapshot/.git"
echo "karpathy/llm.c 0123456789abcdef0123456789abcdef01234567 2025-05-10" >"$snapshot/SNAPSHOT"
out=$(env VS_LLMC_BUILD_ONLY=1 GPU_COMPUTE_CAPABILITY=90 HOME="$tmp/home" bash "$script" "$snapshot" "$frontend" 2>&1)
if grep -qF "building llm.c 0123456789ab for sm_90" <<<"$out" && [ "$(cat "$work/llm.c/COMMIT")" = 0123456789ab ]; then
  ok "a snapshot's commit from its SNAPSHOT file, not the repository around it"
else fail "snapshot commit: $(head -n 3 <<<"$out")"; fi
sed -i '/permute_train_loader = /d' "$snapshot/train_gpt2.cu"
expect_error "no shuffle switch to turn off" 1 "has no 'int permute_train_loader = ...;' to turn the shuffle off" \
  VS_LLMC_BUILD_ONLY=1 HOME="$tmp/home" -- "$snapshot" "$frontend"

# ---- (c) the runs, with stand-ins ----
fake=$tmp/fake
mkdir -p "$fake/bin"
echo 500 >"$fake/mem"
cat >"$fake/bin/nvidia-smi" <<EOF
#!/usr/bin/env bash
case "\$*" in
  -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-stand-in)" ;;
  *memory.used*)  # every 50 ms, the memory the running stand-in holds; it waits to be seen
    while :; do v=\$(cat "$fake/mem"); echo "\$v"; echo "\$v" >"$fake/seen.tmp"; mv "$fake/seen.tmp" "$fake/seen"; sleep 0.05; done ;;
  *name*) echo "NVIDIA H100 80GB HBM3" ;;
  *compute_cap*) echo "9.0" ;;
  *) exit 1 ;;
esac
EOF
# fake_trainer SIDE MIB: prints the mfu line (ours) and 12 step lines: 2 warm-up steps of 999 ms,
# then 10 steps of MS_<side>_<round> ms, the round counted in a file.
cat >"$fake/trainer" <<EOF
#!/usr/bin/env bash
side=\$1 mib=\$2
shift 2
echo "\$side \$*" >>"$fake/order"
round=\$(grep -c "^\$side " "$fake/order")
echo "\$mib" >"$fake/mem"
for _ in \$(seq 400); do [ "\$(cat "$fake/seen" 2>/dev/null)" = "\$mib" ] && break; sleep 0.05; done
[ "\$side" = ours ] && echo "mfu: 100000000 FLOPs per token (6N + 6LCT at T=1024) against 1000 TFLOP/s, the dense bf16 peak of NVIDIA H100 80GB HBM3"
ms=\$([ "\$side" = ours ] && echo 160 || echo \$((190 + 10 * round)))
for i in \$(seq 12); do
  t=\$([ "\$i" -le 2 ] && echo 999 || echo "\$ms")
  if [ "\$side" = ours ]; then echo "step \$((i - 1))/12 | loss \$((11 - i / 4)).5 | norm 1.0 | lr 6.00e-04 | \$t.0 ms | 1 tok/s | eta 0s"
  else printf 'step %4d/12 | loss %d.000000 (+0.00z)| norm 1.0000 (+0.00z)| lr 6.00e-04 | %.2f ms | 1.0%% bf16 MFU | 1 tok/s\n' \
    "\$i" \$((11 - i / 4)) "\$t"; fi
done
echo 500 >"$fake/mem"
EOF
printf '#!/usr/bin/env bash\nexec bash %s llmc 30000 "$@"\n' "$fake/trainer" >"$fake/llmc_train_gpt2cu"
printf '#!/usr/bin/env bash\nexec bash %s ours 20480 "$@"\n' "$fake/trainer" >"$fake/ours_train_gpt2cu"
chmod +x "$fake/bin/nvidia-smi" "$fake/llmc_train_gpt2cu" "$fake/ours_train_gpt2cu"
mkdir -p "$tmp/shards"
: >"$tmp/shards/s_train_1.bin"
: >"$tmp/shards/s_val_0.bin"
run_env=(VS_LLMC_THEIRS="$fake/llmc_train_gpt2cu" VS_LLMC_OURS="$fake/ours_train_gpt2cu" VS_LLMC_STEPS=12
  VS_LLMC_WARMUP=2 VS_LLMC_TRAIN="$tmp/shards/s_train_*.bin" VS_LLMC_VAL="$tmp/shards/s_val_*.bin")
expect_error "no GPU" 1 "needs a GPU (nvidia-smi lists none)" "${run_env[@]}" PATH=/usr/bin:/bin -- "$checkout" "$frontend"
expect_error "no shards" 1 "no shards match $tmp/shards/none_*.bin" "${run_env[@]}" VS_LLMC_TRAIN="$tmp/shards/none_*.bin" \
  PATH="$fake/bin:$PATH" -- "$checkout" "$frontend"
expect_error "warm-up as long as the run" 1 "VS_LLMC_WARMUP=12 leaves none of VS_LLMC_STEPS=12" "${run_env[@]}" \
  VS_LLMC_WARMUP=12 -- "$checkout" "$frontend"
expect_error "bad VS_LLMC_ROUNDS" 1 "VS_LLMC_ROUNDS='two' is not a positive whole number" VS_LLMC_ROUNDS=two -- "$checkout"
printf '#!/usr/bin/env bash\necho "error: out of memory"; exit 3\n' >"$fake/failing"
chmod +x "$fake/failing"
expect_error "a failing run" 1 "the llmc run of round 1 failed (exit 3)" "${run_env[@]}" VS_LLMC_THEIRS="$fake/failing" \
  VS_LLMC_ROUNDS=1 PATH="$fake/bin:$PATH" -- "$checkout" "$frontend"
rm -f "$fake/order"
# No CUDNN_FRONTEND_DIR: the one beside the checkout.
out=$(env "${run_env[@]}" PATH="$fake/bin:$PATH" VS_LLMC_OUT="$tmp/vs-out" HOME="$tmp/home" bash "$script" "$checkout" 2>&1 </dev/null)
rc=$?
shape="-i $tmp/shards/s_train_*.bin -j $tmp/shards/s_val_*.bin -e d12 -b 64 -t 1024 -d 65536 -r 1 -x 12 -l 6e-4 -u 0 -q 1.0 -c 0.1"
expected_order="llmc $shape -v 1000000 -m 1 -s 1000000 -g 16
ours $shape -v 0 -s 0 -sh 0
llmc $shape -v 1000000 -m 1 -s 1000000 -g 16
ours $shape -v 0 -s 0 -sh 0"
if [ "$rc" -eq 0 ] && [ "$(cat "$fake/order")" = "$expected_order" ]; then ok "runs: llm.c, ours, llm.c, ours, with the same shape"
else fail "runs (exit $rc): order and flags"; diff <(echo "$expected_order") "$fake/order" | sed 's/^/      /'
  sed 's/^/      /' <<<"$out" | tail -n 15; fi
# By hand: llm.c's timed steps are 10 x 200 ms (round 1) and 10 x 210 ms (round 2), median 205 ms,
# 65536 / 0.205 = 319688 tok/s, MFU 319688 x 1e8 / 1e15 = 3.2%; ours 160 ms, 409600 tok/s, 4.1%.
# Memory: 30000 MiB = 29.3 GiB, 20480 MiB = 20.0 GiB, ratio 0.68; speed ratio 205 / 160 = 1.281.
# Losses after the n-th step (n = 1..12): ours 11.5 - floor(n/4), llm.c 11 - floor(n/4): step 1
# 11.5/11, step 3 (after the 2 warm-up steps) 11.5/11, step 12 8.5/8, 8.5/8 - 1 = +6.25%.
expect_lines "$out" \
  "llm.c     205.0 ms/step    319688 tok/s  MFU   3.2%  peak  29.3 GiB  (runs: 200.0, 210.0 ms)" \
  "ours      160.0 ms/step    409600 tok/s  MFU   4.1%  peak  20.0 GiB  (runs: 160.0, 160.0 ms)" \
  "loss after step 1: 11.5000/11.0000  3: 11.5000/11.0000  12: 8.5000/8.0000  (ours/llm.c, first runs)" \
  "ours / llm.c: 1.281x tokens/s, 0.68x peak memory, +6.25% loss after step 12" \
  "on NVIDIA H100 80GB HBM3; llm.c $commit"
if tar tzf "$tmp/vs-out/vs_llmc-logs.tgz" | grep -qx 'logs/llmc_2.log' &&
  cmp -s "$tmp/vs-out/vs_llmc-summary.txt" "$work/logs/summary.txt"; then
  ok "logs and summary in VS_LLMC_OUT"
else fail "no logs or summary in VS_LLMC_OUT ($tmp/vs-out)"; fi
[ "$rc" -eq 0 ] || sed 's/^/      /' <<<"$out" | tail -n 20

# A prebuilt llm.c with no LLMC_DIR (the bundle's), its commit from COMMIT beside it, and one
# initial model file for both (VS_LLMC_INIT, by its absolute path).
cp "$fake/llmc_train_gpt2cu" "$fake/prebuilt" && echo 0123456789ab >"$fake/COMMIT"
: >"$tmp/init.bin"
rm -f "$fake/order"
out=$(cd "$tmp" && env "${run_env[@]}" VS_LLMC_THEIRS="$fake/prebuilt" VS_LLMC_ROUNDS=1 VS_LLMC_INIT=init.bin \
  VS_LLMC_OUT=rel-out PATH="$fake/bin:$PATH" bash "$root/$script" 2>&1 </dev/null)
rc=$?
if [ "$rc" -eq 0 ] && grep -qF "GPT-2 d12 (same init init.bin)" <<<"$out" && grep -qF "llm.c 0123456789ab" <<<"$out" &&
  [ "$(grep -c -- "-e $tmp/init.bin -b 64" "$fake/order")" = 2 ]; then
  ok "a prebuilt llm.c without LLMC_DIR: its COMMIT named, both sides from VS_LLMC_INIT"
else fail "prebuilt llm.c with VS_LLMC_INIT (exit $rc)"; sed 's/^/      /' <<<"$out" | tail -n 8; cat "$fake/order"; fi
if cmp -s "$tmp/rel-out/vs_llmc-summary.txt" "$work/logs/summary.txt"; then ok "a relative VS_LLMC_OUT is the caller's folder's"
else fail "no summary in $tmp/rel-out (VS_LLMC_OUT=rel-out from $tmp)"; fi
expect_error "VS_LLMC_INIT missing" 1 "VS_LLMC_INIT '$tmp/none.bin' is not a file" "${run_env[@]}" \
  VS_LLMC_INIT="$tmp/none.bin" PATH="$fake/bin:$PATH" --

tally_end vs_llmc "vs_llmc.sh: $checks checks: argument errors, the build on a stand-in checkout (CUDA 13 cudaMemAdvise, NVRTC, libcuda, libnvidia-ml, wheels), A B A B runs, the losses and the table with stand-in trainers (the real llm.c's build: check_gpu_dist.sh)"
