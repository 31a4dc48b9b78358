# shellcheck shell=bash
# fake_cuda_wheels SITE TOOLKIT: a site-packages folder SITE laid out as NVIDIA's CUDA 13 wheels
# are (scripts/cuda_wheels.sh reads it): nvidia/cudnn, nvidia/nccl and the shared nvidia/cu13 of
# cuBLAS, each with the toolkit's headers in include/ and only versioned libraries in lib/
# (libcudnn.so.9, libnccl.so.2, libcublasLt.so.13, libcublas.so.13), links to TOOLKIT's, so that a
# binary linked against them runs like one linked against the toolkit. Sourced by the checks of
# cuda_wheels.sh's users (tests/gpu/check_cuda_build.sh, tests/gpu/check_vs_llmc.sh).
fake_cuda_wheels() {
  local site=$1/nvidia toolkit=$2 lib
  mkdir -p "$site"/{cudnn,nccl,cu13}/{include,lib}
  cp "$toolkit"/include/cudnn*.h "$site/cudnn/include/"
  cp "$toolkit/include/nccl.h" "$site/nccl/include/"
  cp "$toolkit"/include/cublas*.h "$site/cu13/include/"
  for lib in cudnn/lib/libcudnn.so.9 nccl/lib/libnccl.so.2 cu13/lib/libcublasLt.so.13 cu13/lib/libcublas.so.13; do
    ln -s "$toolkit/lib64/$(basename "$lib")" "$site/$lib"
  done
}
