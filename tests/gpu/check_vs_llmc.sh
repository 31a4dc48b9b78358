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
#      times and losses and hold known memory, by setting: the order (llm.c defaults, ours, llm.c
#      fastest, ours with VS_LLMC_OURS_EXTRA, then the reverse), llm.c fastest with -r 0 -ge 2 and
#      its defaults with neither, ours without the caller's LLMC_ variables and flags, the same shape
#      flags for all (one initial model file with VS_LLMC_INIT), each setting's row and each pair's
#      line (ratios, memories, losses) worked out here from the stand-ins' figures; the summary and
#      the logs in VS_LLMC_OUT (a relative one from the caller's folder); a prebuilt llm.c without
#      LLMC_DIR, its commit from COMMIT; d24 at a given B; bad VS_LLMC_MODEL, VS_LLMC_B, VS_LLMC_INIT.
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
# The stand-ins' figures by setting (told apart by their flags): step time in round 1 (+10 ms in
# round 2), MiB held, and the loss after the n-th step, L0 - floor(n/4).
declare -A fig_ms=([llmc-defaults]=200 [llmc-fastest]=180 [ours-defaults]=160 [ours-fp8]=150)
declare -A fig_mib=([llmc-defaults]=30000 [llmc-fastest]=34000 [ours-defaults]=20480 [ours-fp8]=24576)
declare -A fig_loss=([llmc-defaults]=11.0 [llmc-fastest]=11.1 [ours-defaults]=11.2 [ours-fp8]=10.8)
# fake_trainer SIDE ARGS...: logs its setting, its flags and its LLMC_ variables to $fake/order, holds
# its memory until nvidia-smi has seen it, prints the mfu line (ours) and 12 step lines: 2 warm-up
# steps of 999 ms, then 10 of the setting's time in this round (its runs counted in $fake/order).
cat >"$fake/trainer" <<EOF
#!/usr/bin/env bash
$(declare -p fig_ms fig_mib fig_loss)
side=\$1
shift
case "\$side \$* " in
  "llmc "*" -ge 2 "*) setting=llmc-fastest ;;
  llmc*) setting=llmc-defaults ;;
  *" --fp8 1 "*) setting=ours-fp8 ;;
  *) setting=ours-defaults ;;
esac
line="\$setting \$* | \$(env | grep '^LLMC_' | sort | tr '\n' ' ')"
echo "\$line" >>"$fake/order"
round=\$(grep -cxF -- "\$line" "$fake/order")
mib=\${fig_mib[\$setting]}
echo "\$mib" >"$fake/mem"
for _ in \$(seq 400); do [ "\$(cat "$fake/seen" 2>/dev/null)" = "\$mib" ] && break; sleep 0.05; done
[ "\$side" = ours ] && echo "mfu: 100000000 FLOPs per token (6N + 6LCT at T=1024) against 1000 TFLOP/s, the dense bf16 peak of NVIDIA H100 80GB HBM3"
ms=\$((fig_ms[\$setting] + 10 * (round - 1)))
for i in \$(seq 12); do
  t=\$([ "\$i" -le 2 ] && echo 999 || echo "\$ms")
  loss=\$(awk -v l="\${fig_loss[\$setting]}" -v i="\$i" 'BEGIN { printf "%.6f", l - int(i / 4) }')
  if [ "\$side" = ours ]; then echo "step \$((i - 1))/12 | loss \$loss | norm 1.0 | lr 6.00e-04 | \$t.0 ms | 1 tok/s | eta 0s"
  else printf 'step %4d/12 | loss %s (+0.00z)| norm 1.0000 (+0.00z)| lr 6.00e-04 | %.2f ms | 1.0%% bf16 MFU | 1 tok/s\n' \
    "\$i" "\$loss" "\$t"; fi
done
echo 500 >"$fake/mem"
EOF
printf '#!/usr/bin/env bash\nexec bash %s llmc "$@"\n' "$fake/trainer" >"$fake/llmc_train_gpt2cu"
printf '#!/usr/bin/env bash\nexec bash %s ours "$@"\n' "$fake/trainer" >"$fake/ours_train_gpt2cu"
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
expect_error "bad VS_LLMC_MODEL" 1 "VS_LLMC_MODEL='d36' is not one of d12, d24, d48" VS_LLMC_MODEL=d36 -- "$checkout"
expect_error "d48 without VS_LLMC_B" 1 "VS_LLMC_MODEL=d48 needs VS_LLMC_B: the largest B that both trainers fit" \
  VS_LLMC_MODEL=d48 -- "$checkout"
expect_error "VS_LLMC_B zero" 1 "VS_LLMC_B='0' is not a positive whole number" VS_LLMC_MODEL=d24 VS_LLMC_B=0 -- "$checkout"
expect_error "VS_LLMC_B not a number" 1 "VS_LLMC_B='6x4' is not a positive whole number" VS_LLMC_B=6x4 -- "$checkout"
expect_error "VS_LLMC_FASTEST empty" 1 "VS_LLMC_FASTEST is empty" VS_LLMC_FASTEST= -- "$checkout"
expect_error "an extra setting's name without the setting" 1 "VS_LLMC_OURS_EXTRA_NAME='fp8' names no setting" \
  VS_LLMC_OURS_EXTRA_NAME=fp8 -- "$checkout"
printf '#!/usr/bin/env bash\necho "error: out of memory"; exit 3\n' >"$fake/failing"
chmod +x "$fake/failing"
expect_error "a failing run" 1 "the llm.c defaults run of round 1 failed (exit 3)" "${run_env[@]}" VS_LLMC_THEIRS="$fake/failing" \
  VS_LLMC_ROUNDS=1 PATH="$fake/bin:$PATH" -- "$checkout" "$frontend"

# Two rounds of the four settings (with VS_LLMC_OURS_EXTRA, over two lines), from a caller whose
# environment holds speed switches and the profiler: none of it may reach our runs but the extra
# setting's own.
rm -f "$fake/order"
# No CUDNN_FRONTEND_DIR: the one beside the checkout.
out=$(env "${run_env[@]}" PATH="$fake/bin:$PATH" VS_LLMC_OUT="$tmp/vs-out" HOME="$tmp/home" LLMC_GEMM_SEARCH=timed \
  LLMC_PROFILE=on VS_LLMC_OURS_EXTRA="LLMC_FP8_LM_HEAD=on
  --fp8 1" VS_LLMC_OURS_EXTRA_NAME=fp8 bash "$script" "$checkout" \
  2>&1 </dev/null)
rc=$?
shape="-i $tmp/shards/s_train_*.bin -j $tmp/shards/s_val_*.bin -e d12 -b 64 -t 1024 -d 65536 -x 12 -l 6e-4 -u 0 -q 1.0 -c 0.1"
declare -A run_line=(
  [llmc-defaults]="llmc-defaults $shape -v 1000000 -m 1 -s 1000000 -g 16 | "
  [ours-defaults]="ours-defaults $shape -v 0 -s 0 -sh 0 | "
  [llmc-fastest]="llmc-fastest $shape -v 1000000 -m 1 -s 1000000 -g 16 -r 0 -ge 2 | "
  [ours-fp8]="ours-fp8 $shape -v 0 -s 0 -sh 0 --fp8 1 | LLMC_FP8_LM_HEAD=on ")
expected_order=$(for s in llmc-defaults ours-defaults llmc-fastest ours-fp8 ours-fp8 llmc-fastest ours-defaults llmc-defaults; do
  echo "${run_line[$s]}"; done)
if [ "$rc" -eq 0 ] && [ "$(cat "$fake/order")" = "$expected_order" ]; then
  ok "runs: llm.c defaults, ours, llm.c fastest, ours fp8, then the reverse, with the same shape"
else fail "runs (exit $rc): order and flags"; diff <(echo "$expected_order") "$fake/order" | sed 's/^/      /'
  sed 's/^/      /' <<<"$out" | tail -n 15; fi
# The same facts one by one, read off the log of what ran (not off expected_order).
if [ "$(grep -c '^llmc-fastest .* -r 0 -ge 2 | $' "$fake/order")" = 2 ]; then ok "llm.c fastest got -r 0 -ge 2"
else fail "llm.c fastest's flags: $(grep '^llmc-fastest' "$fake/order")"; fi
if [ "$(grep '^llmc-defaults ' "$fake/order" | grep -cE -- ' -r | -ge ')" = 0 ] && [ "$(grep -c '^llmc-defaults ' "$fake/order")" = 2 ]; then
  ok "llm.c defaults got neither -r nor -ge"
else fail "llm.c defaults' flags: $(grep '^llmc-defaults' "$fake/order")"; fi
if [ "$(grep -c '^ours-defaults .* -sh 0 | $' "$fake/order")" = 2 ] &&
  [ "$(grep '^ours-defaults ' "$fake/order" | grep -cE -- ' -r | --fp8 |LLMC_')" = 0 ]; then
  ok "ours defaults got no LLMC_ variable (the caller's removed) and no -r or --fp8"
else fail "ours defaults' flags or environment: $(grep '^ours-defaults' "$fake/order")"; fi
# The expected table, worked out by hand from the stand-ins' figures: each setting's median over its
# 20 timed steps (10 of round 1, 10 of round 2 at +10 ms) is round 1's time + 5 ms (205, 165, 185,
# 155); tokens/s = 65536 / that (319,688, 397,188, 354,249, 422,813); MFU = tokens/s x 1e8 FLOPs /
# 1e15 (3.2%, 4.0%, 3.5%, 4.2%); peak = MiB / 1024 (29.3, 20.0, 33.2, 24.0 GiB); the losses after
# steps 1, 3 (after the 2 warm-up steps) and 12 of the first run, L0, L0, L0 - 3; each pair's ratio
# of tokens/s is the inverse ratio of the medians (205/165 = 1.242, 185/165 = 1.121, 205/155 =
# 1.323, 185/155 = 1.194) and its loss difference (8.2/8.0 - 1 = +2.50%, 8.2/8.1 - 1 = +1.23%,
# 7.8/8.0 - 1 = -2.50%, 7.8/8.1 - 1 = -3.70%).
expect_lines "$out" \
  "llm.c defaults    205.0 ms/step    319688 tok/s  MFU   3.2%  peak  29.3 GiB  loss after step 1 / 3 / 12: 11.0000 / 11.0000 / 8.0000  (runs: 200.0, 210.0 ms)" \
  "ours defaults     165.0 ms/step    397188 tok/s  MFU   4.0%  peak  20.0 GiB  loss after step 1 / 3 / 12: 11.2000 / 11.2000 / 8.2000  (runs: 160.0, 170.0 ms)" \
  "llm.c fastest     185.0 ms/step    354249 tok/s  MFU   3.5%  peak  33.2 GiB  loss after step 1 / 3 / 12: 11.1000 / 11.1000 / 8.1000  (runs: 180.0, 190.0 ms)" \
  "ours fp8          155.0 ms/step    422813 tok/s  MFU   4.2%  peak  24.0 GiB  loss after step 1 / 3 / 12: 10.8000 / 10.8000 / 7.8000  (runs: 150.0, 160.0 ms)" \
  "ours defaults vs llm.c defaults: 1.242x tokens/s, memory 20.0 GiB vs 29.3 GiB, loss after 12 steps 8.200 vs 8.000 (+2.50%)" \
  "ours defaults vs llm.c fastest: 1.121x tokens/s, memory 20.0 GiB vs 33.2 GiB, loss after 12 steps 8.200 vs 8.100 (+1.23%)" \
  "ours fp8 vs llm.c defaults: 1.323x tokens/s, memory 24.0 GiB vs 29.3 GiB, loss after 12 steps 7.800 vs 8.000 (-2.50%)" \
  "ours fp8 vs llm.c fastest: 1.194x tokens/s, memory 24.0 GiB vs 33.2 GiB, loss after 12 steps 7.800 vs 8.100 (-3.70%)" \
  "GPT-2 d12 (d12), B=64 T=1024, -d 65536 on NVIDIA H100 80GB HBM3; llm.c $commit" \
  "llm.c defaults: no -r, no -ge; llm.c fastest: -r 0 -ge 2; ours defaults: no LLMC_ variable, no speed flag; ours fp8: LLMC_FP8_LM_HEAD=on --fp8 1"
if [ "$(grep -c ' vs llm\.c ' <<<"$out")" = 4 ] && [ "$(grep -cE '^ours (defaults|fp8) vs llm\.c (defaults|fastest): [0-9]\.[0-9]{3}x tokens/s, ' <<<"$out")" = 4 ]; then
  ok "four pair lines, each 'OURS vs LLM.C: N.NNNx tokens/s, ...'"
else fail "the pair lines: $(grep ' vs ' <<<"$out")"; fi
if tar tzf "$tmp/vs-out/vs_llmc-logs.tgz" | grep -qx 'logs/ours_extra_2.log' &&
  cmp -s "$tmp/vs-out/vs_llmc-summary.txt" "$work/logs/summary.txt"; then
  ok "logs and summary in VS_LLMC_OUT"
else fail "no logs or summary in VS_LLMC_OUT ($tmp/vs-out)"; fi
[ "$rc" -eq 0 ] || sed 's/^/      /' <<<"$out" | tail -n 20

# A prebuilt llm.c with no LLMC_DIR (the bundle's), its commit from COMMIT beside it, and one
# initial model file for all (VS_LLMC_INIT, by its absolute path): its header's 5th int32 the layers.
cp "$fake/llmc_train_gpt2cu" "$fake/prebuilt" && echo 0123456789ab >"$fake/COMMIT"
python3 -c 'import struct, sys; open(sys.argv[1], "wb").write(struct.pack("<256i", 20240326, 5, 1024, 50257, 12, *[0] * 251))' \
  "$tmp/init.bin"
rm -f "$fake/order"
out=$(cd "$tmp" && env "${run_env[@]}" VS_LLMC_THEIRS="$fake/prebuilt" VS_LLMC_ROUNDS=1 VS_LLMC_INIT=init.bin \
  VS_LLMC_OUT=rel-out PATH="$fake/bin:$PATH" bash "$root/$script" 2>&1 </dev/null)
rc=$?
if [ "$rc" -eq 0 ] && grep -qF "GPT-2 d12 (same init init.bin)" <<<"$out" && grep -qF "llm.c 0123456789ab" <<<"$out" &&
  [ "$(grep -c -- "-e $tmp/init.bin -b 64" "$fake/order")" = 3 ]; then
  ok "a prebuilt llm.c without LLMC_DIR: its COMMIT named, all settings from VS_LLMC_INIT"
else fail "prebuilt llm.c with VS_LLMC_INIT (exit $rc)"; sed 's/^/      /' <<<"$out" | tail -n 8; cat "$fake/order"; fi
if cmp -s "$tmp/rel-out/vs_llmc-summary.txt" "$work/logs/summary.txt"; then ok "a relative VS_LLMC_OUT is the caller's folder's"
else fail "no summary in $tmp/rel-out (VS_LLMC_OUT=rel-out from $tmp)"; fi
expect_error "VS_LLMC_INIT missing" 1 "VS_LLMC_INIT '$tmp/none.bin' is not a file" "${run_env[@]}" \
  VS_LLMC_INIT="$tmp/none.bin" PATH="$fake/bin:$PATH" --
expect_error "VS_LLMC_INIT of another depth" 1 "VS_LLMC_INIT '$tmp/init.bin' has 12 layers, VS_LLMC_MODEL=d24 has 24" \
  "${run_env[@]}" VS_LLMC_INIT="$tmp/init.bin" VS_LLMC_MODEL=d24 VS_LLMC_B=8 PATH="$fake/bin:$PATH" --

# d24 at B=8, one round, with the fallback attention the caller asks for (not a speed switch: it
# reaches our runs, and the summary says so).
rm -f "$fake/order"
out=$(env "${run_env[@]}" VS_LLMC_THEIRS="$fake/prebuilt" VS_LLMC_ROUNDS=1 VS_LLMC_MODEL=d24 VS_LLMC_B=8 VS_LLMC_OUT= \
  LLMC_ATTENTION=fallback PATH="$fake/bin:$PATH" bash "$script" 2>&1 </dev/null)
rc=$?
d24_shape="-e d24 -b 8 -t 1024 -d 8192 -x 12 "
if [ "$rc" -eq 0 ] && [ "$(grep -cF -- "$d24_shape" "$fake/order")" = 3 ] && [ "$(wc -l <"$fake/order")" = 3 ] &&
  grep -qF "GPT-2 d24 (d24), B=8 T=1024, -d 8192 on" <<<"$out" && grep -qF "ours with LLMC_ATTENTION=fallback" <<<"$out" &&
  [ "$(grep -c '^ours-defaults .*| LLMC_ATTENTION=fallback $' "$fake/order")" = 1 ]; then
  ok "VS_LLMC_MODEL=d24 VS_LLMC_B=8: every run -e d24 -b 8 -d 8192, LLMC_ATTENTION passed and named"
else fail "d24 (exit $rc)"; sed 's/^/      /' <<<"$out" | tail -n 8; cat "$fake/order"; fi
# One round: the medians are round 1's times, 180 / 160 = 1.125.
expect_lines "$out" "ours defaults vs llm.c fastest: 1.125x tokens/s"

tally_end vs_llmc "vs_llmc.sh: $checks checks: argument errors, the build on a stand-in checkout (CUDA 13 cudaMemAdvise, NVRTC, libcuda, libnvidia-ml, wheels), the runs of llm.c's defaults and fastest and ours (A B A B, then reversed), their flags and environment, the table and the pair lines with stand-in trainers, d24 (the real llm.c's build: check_gpu_dist.sh)"
