// Causal flash attention (bf16) through cuDNN's graph backend API, read straight from the qkv
// activation by strides. The operation graphs and their execution plans are built once per shape
// and cached. Implementation and graph layout: llmc/cuda/cudnn_attention.cu and
// docs/kernels-matmul-attention.md.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include "llmc/cuda/speed_switches.h"

namespace llmc {

class CudnnAttention {
 public:
  // backward: which backward graph (LLMC_CUDNN_BACKWARD).
  explicit CudnnAttention(CudnnBackward backward);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Device workspace bytes the forward or the backward needs at this shape. Builds and caches the plan; throws std::runtime_error naming the shape
  // when cuDNN has no engine for it.
  size_t forward_workspace_bytes(int B, int T, int NH, int HS);
  size_t backward_workspace_bytes(int B, int T, int NH, int HS);

  // out (B, T, NH*HS) from qkv (B, T, 3*NH*HS), and stats (B, NH, T) fp32: the log-sum-exp of each
  // scaled, masked score row, which the backward needs.
  void forward(__nv_bfloat16* out, float* stats, const __nv_bfloat16* qkv, int B, int T, int NH, int HS,
               void* workspace, size_t workspace_bytes, cudaStream_t stream);

  // dqkv (B, T, 3C), overwritten, from dout (B, T, C) and the forward's qkv, out and stats. The
  // workspace needs no preparation (the fp32 dQ accumulator inside it is cleared here where the
  // loaded cuDNN does not clear it itself).
  void backward(__nv_bfloat16* dqkv, const __nv_bfloat16* dout, const __nv_bfloat16* qkv, const __nv_bfloat16* out,
                const float* stats, int B, int T, int NH, int HS, void* workspace, size_t workspace_bytes,
                cudaStream_t stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmc
