#!/usr/bin/env bash
# Each dev/cuda benchmark links only the libraries it uses: cuDNN (and llmc's cuDNN wrapper,
# libllmc_cuda.a) for attention alone; cuBLAS/cuBLASLt for attention and matmul alone (not
# attention_kernels, which launches the attention path's own kernels but none of its GEMMs); the CPU
# references, fmt and OpenMP for every one. Read from the link line `make -n -B -C dev/cuda NAME` prints (nothing is
# compiled), so it needs no nvcc or GPU; and `make -C dev/cuda NAME` builds one benchmark alone.
set -u
cd "$(dirname "$0")/../.." || exit 1
failed=0
checked=0
fail() { echo "FAIL  $*"; failed=$((failed + 1)); }

# has LINE WORD: LINE contains WORD as a whole word.
has() { grep -Eq -- "(^| )[^ ]*$2( |$)" <<<"$1"; }

for src in dev/cuda/*.cu; do
  name=$(basename "$src" .cu)
  [ "$name" = compile_fp32 ] && continue
  # Only the benchmark's own link line: the one writing `-o NAME`.
  line=$(make --no-print-directory -n -B -C dev/cuda "$name" 2>&1 | grep -E -- "-o $name( |$)")
  if [ -z "$line" ]; then
    fail "$name: no link line in \`make -n -B -C dev/cuda $name\`"
    continue
  fi
  case $name in attention) want_cudnn=1 ;; *) want_cudnn=0 ;; esac
  case $name in attention | matmul) want_cublas=1 ;; *) want_cublas=0 ;; esac
  for lib in -lcudnn libllmc_cuda.a; do
    if has "$line" "$lib"; then got=1; else got=0; fi
    [ "$got" = "$want_cudnn" ] || fail "$name: $lib linked=$got, expected $want_cudnn: $line"
  done
  for lib in -lcublas -lcublasLt; do
    if has "$line" "$lib"; then got=1; else got=0; fi
    [ "$got" = "$want_cublas" ] || fail "$name: $lib linked=$got, expected $want_cublas: $line"
  done
  for lib in libcpu_reference.a -lfmt -lgomp; do
    has "$line" "$lib" || fail "$name: $lib missing: $line"
  done
  checked=$((checked + 1))
done
[ "$checked" -gt 0 ] || fail "no dev/cuda benchmarks found"
if [ "$failed" -ne 0 ]; then
  echo "dev/cuda links: $failed failures"
  exit 1
fi
echo "dev/cuda links: $checked benchmarks, each with only the libraries it uses (cuDNN: attention alone)"
