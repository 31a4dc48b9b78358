#!/usr/bin/env bash
# The GPU build's variants and its start-up check, on the emulated GPU (BF16, ASan + UBSan):
#  (a) USE_CUDNN=0 NO_MULTI_GPU=1 (build/emu-address/bf16-nocudnn-nonccl): no object includes nccl.h
#      or a cuDNN header and the NCCL communicator is not linked; test_gpt2cu passes against the CPU
#      backend with the fallback attention (its NCCL buckets check skipped, saying why); 4 training
#      steps give a main.log bit-identical to the default build's (the same kernels: the emulated GPU
#      has no cuDNN, and one rank no NCCL); its version line says why it has neither, and
#      LLMC_ATTENTION=cudnn and LLMC_COMMUNICATOR=nccl stop it with the make variable to blame.
#  (b) a GPU that the binary holds no code for (LLMC_EMU_COMPUTE_CAPABILITY, with LLMC_EMU_KERNEL_IMAGES
#      standing in for the architectures the binary holds): the trainer stops before training with
#      an error naming the GPU's compute capability, the architectures and the CUDA_ARCHS to build;
#      the default architectures' PTX (compute_80) runs on a Blackwell (12.0), an "a" PTX does not.
# NO_MULTI_GPU=1 implies NO_USE_MPI=1 (host code without MPI, in build/no-mpi/); here NO_USE_MPI=0 keeps
# the host library's MPI, as the emulated GPU's stand-in for NCCL carries its ranks over MPI and the
# emulator's runtime links it. The host code without MPI is tests/dist/check_no_mpi_build.sh's, and the
# nvcc side of the variants (NO_MULTI_GPU=1 with no MPI at all) tests/gpu/check_cuda_build.sh's.
# Skips (77) without the CUDA headers.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/emu_headers.sh
source tests/lib/emu_headers.sh
default=build/emu-address/bf16/trainer
variant=build/emu-address/bf16-nocudnn-nonccl/trainer
make -s -j2 CUDA_HOME="$cuda_home" EMU_SANITIZER=address PRECISION=BF16 "$default/train_gpt2cu" >"$tmp/build.log" 2>&1 &&
  make -s -j2 CUDA_HOME="$cuda_home" EMU_SANITIZER=address PRECISION=BF16 USE_CUDNN=0 NO_MULTI_GPU=1 NO_USE_MPI=0 \
    "$variant/train_gpt2cu" "$variant/test_gpt2cu" >>"$tmp/build.log" 2>&1 ||
  { tail -n 30 "$tmp/build.log"; echo "FAIL: build of the emulated trainer"; exit 1; }
export OMP_NUM_THREADS=2

# --- (a) USE_CUDNN=0 NO_MULTI_GPU=1 -------------------------------------------------------------
included=$(cat "$variant"/*.d "$variant"/llmc/*/*.d | grep -oE '[^ ]*/(nccl|cudnn)[^ /]*\.h' | sort -u || true)
objects=$(find "$variant" \( -name '*nccl*.o' -o -name '*cudnn*.o' \) | wc -l)
[ -z "$included" ] && [ "$objects" = 0 ] && echo "ok    USE_CUDNN=0 NO_MULTI_GPU=1: no nccl.h or cuDNN header included, no NCCL object" ||
  fail "USE_CUDNN=0 NO_MULTI_GPU=1 includes $included, $objects NCCL or cuDNN objects"

/usr/bin/python3 tests/lib/tiny_model_and_shards.py "$tmp" --seed 11 --first-token 5 --layers 3 --heads 3 \
  --channels 96 --max-seq-len 40 val_000000.bin:400 train_000001.bin:1000 >/dev/null
if LLMC_EMU_SEED=3 "$variant/test_gpt2cu" --model "$tmp/model.bin" --B 2 --T 40 --quick >"$tmp/test.log" 2>&1 &&
  grep -q '^test_gpt2cu (bf16, attention fallback): [0-9]* checks passed, 0 failed$' "$tmp/test.log" &&
  grep -q '^SKIP  grad through overlapped NCCL buckets: this build has no NCCL (NO_MULTI_GPU=1)$' "$tmp/test.log"; then
  echo "ok    test_gpt2cu (USE_CUDNN=0 NO_MULTI_GPU=1): $(tail -n 1 "$tmp/test.log")"
else
  fail "test_gpt2cu (USE_CUDNN=0 NO_MULTI_GPU=1) (log: $tmp/test.log): $(tail -n 1 "$tmp/test.log")"
fi

train=(-i "$tmp/train_*.bin" -j "$tmp/val_*.bin" -e "$tmp/model.bin" -b 2 -t 40 -d 160 -x 4 -l 1e-3 -v 2 -m 2 -s 0
  -sh 0)
LLMC_EMU_SEED=5 "$default/train_gpt2cu" "${train[@]}" -o "$tmp/default" >"$tmp/default.out" 2>&1 ||
  fail "the default build's run (log: $tmp/default.out)"
LLMC_EMU_SEED=6 "$variant/train_gpt2cu" "${train[@]}" -o "$tmp/variant" >"$tmp/variant.out" 2>&1 ||
  fail "USE_CUDNN=0 NO_MULTI_GPU=1's run (log: $tmp/variant.out)"
if cmp -s "$tmp/default/main.log" "$tmp/variant/main.log" && [ "$(grep -c ' trl:' "$tmp/variant/main.log")" = 4 ]; then
  echo "ok    USE_CUDNN=0 NO_MULTI_GPU=1: 4 training steps, main.log bit-identical to the default build's"
else
  fail "USE_CUDNN=0 NO_MULTI_GPU=1's main.log differs from the default build's: $(diff "$tmp/default/main.log" "$tmp/variant/main.log" | head -n 4)"
fi
grep -q '^cuda libraries: .*, cuDNN none (built with USE_CUDNN=0), NCCL none (built with NO_MULTI_GPU=1)$' "$tmp/variant.out" ||
  fail "the version line does not say why there is no cuDNN or NCCL: $(grep '^cuda libraries' "$tmp/variant.out")"
# refused NAME TEXT VARIABLE=VALUE: the variant stops before training, naming TEXT
refused() {
  if env "$3" "$variant/train_gpt2cu" "${train[@]}" -x 1 >"$tmp/$1.out" 2>&1; then
    fail "USE_CUDNN=0 NO_MULTI_GPU=1 ran with $3"
  else
    grep -qF -- "$2" "$tmp/$1.out" && ! grep -q '^step' "$tmp/$1.out" || fail "$3: $(tail -n 1 "$tmp/$1.out")"
  fi
}
before=$failures
refused cudnn "this build has no cuDNN attention (built with USE_CUDNN=0): use LLMC_ATTENTION=fallback" LLMC_ATTENTION=cudnn
refused nccl "LLMC_COMMUNICATOR=nccl: this train_gpt2cu was built without NCCL (NO_MULTI_GPU=1)" LLMC_COMMUNICATOR=nccl
[ "$failures" = "$before" ] && echo "ok    LLMC_ATTENTION=cudnn and LLMC_COMMUNICATOR=nccl refused, naming USE_CUDNN=0 and NO_MULTI_GPU=1"

# --- (b) a GPU the binary has no code for -------------------------------------------------------
# kernel_image NAME CAPABILITY IMAGES: the default build's one-step run on that GPU, holding IMAGES
kernel_image() {
  LLMC_EMU_COMPUTE_CAPABILITY=$2 LLMC_EMU_KERNEL_IMAGES=$3 "$default/train_gpt2cu" "${train[@]}" -x 1 \
    >"$tmp/image-$1.out" 2>&1
}
before=$failures
if kernel_image blackwell 12.0 "sm_80 sm_90a"; then
  fail "a binary of sm_80 and sm_90a ran on compute capability 12.0"
else
  grep -qF "this binary has no code that runs on the NVIDIA H100 80GB HBM3 (emulated on the CPU) (compute capability 12.0): it holds sm_80 sm_90a (CUDA_ARCHS)" "$tmp/image-blackwell.out" &&
    grep -qF 'make CUDA_ARCHS="-gencode arch=compute_120,code=sm_120"' "$tmp/image-blackwell.out" &&
    ! grep -q '^step' "$tmp/image-blackwell.out" ||
    fail "no code for 12.0: $(grep -v '^emulated GPU' "$tmp/image-blackwell.out" | tail -n 2)"
fi
if kernel_image hopper-a-ptx 10.0 "sm_90a compute_90a"; then
  fail "compute_90a's PTX ran on compute capability 10.0"
else
  grep -qF "(compute capability 10.0): it holds sm_90a compute_90a (CUDA_ARCHS)" "$tmp/image-hopper-a-ptx.out" ||
    fail "compute_90a on 10.0: $(tail -n 1 "$tmp/image-hopper-a-ptx.out")"
fi
kernel_image ptx 12.0 "sm_80 compute_80 sm_90a" && grep -q '^step 0/1 | loss ' "$tmp/image-ptx.out" ||
  fail "the default architectures (compute_80 PTX) did not run on 12.0: $(tail -n 1 "$tmp/image-ptx.out")"
[ "$failures" = "$before" ] && echo "ok    no code for the GPU: stopped naming its compute capability, the architectures held and the CUDA_ARCHS to build; compute_80 PTX runs on 12.0"

exit_if_failed
echo "gpu build variants on the emulated GPU: USE_CUDNN=0 NO_MULTI_GPU=1 test_gpt2cu passes, trains as the default build bit for bit, refuses cuDNN and NCCL; no code for a GPU: a named error"
