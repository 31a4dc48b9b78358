// Sizes of the fp32 scratch the CUDA kernels need from their caller, in a plain C++ header: the
// memory plan (llmc/cuda/memory_plan.h, host code) sizes the backend's buffers from the same
// constants the kernels (layernorm.cuh, matmul.cuh, global_norm.cuh) launch their grids with, and
// from the layout cudnn_attention.cu gives its backward workspace.
#pragma once
#include <cstddef>

namespace llmc {

// The gradient partial-sums scratch is one buffer, which layernorm_backward and the bias gradient
// take turns in: each writes all the partial sums it reads back, so it needs no clearing.

// layernorm_backward's grid is at most this many blocks (fixed by (N, C), so its sums are
// reproducible); each block leaves 2*C partial sums (dweight, dbias).
constexpr int kLayerNormBackwardMaxBlocks = 512;
// The deterministic bias gradient sums fixed slices of this many rows, each slice OC partial sums.
constexpr int kBiasRowsPerSlice = 64;
// The encoder backward cuts a token's positions into pieces of at most this many rows.
constexpr int kEncoderPieceRows = 64;
// The global norm's first pass runs this many blocks, one fp32 partial sum each.
constexpr int kGlobalNormBlocks = 1024;

// fp32 scratch the caller provides to layernorm_backward (enough for any N).
inline size_t layernorm_backward_scratch_floats(int C) {
  return size_t(kLayerNormBackwardMaxBlocks) * 2 * size_t(C);
}

inline int bias_grad_slices(int BT) { return (BT + kBiasRowsPerSlice - 1) / kBiasRowsPerSlice; }
// fp32 scratch the bias gradient of a (BT, OC) output needs (the kernels' slice sums).
inline size_t matmul_bias_grad_scratch_floats(int BT, int OC) {
  return size_t(bias_grad_slices(BT)) * size_t(OC);
}

// fp32 scratch of the encoder backward's piece sums: C floats per piece of the tokens cut into
// several, i.e. of those with s > K = kEncoderPieceRows positions. Such a token has ceil(s/K) <= (s+K-1)/K <= 2s/(K+1) pieces (the last step is K+1 <= s), so all of them
// together have at most 2*BT/(K+1).
inline size_t encoder_piece_sums_floats(size_t BT, size_t C) { return 2 * BT / (kEncoderPieceRows + 1) * C; }

// cuDNN's attention backward workspace: the engine's own bytes, then (from cudnn_backward_extras_offset)
// the fp32 dQ accumulator of rows x head_size floats, which only the default graph has (with
// dq_accumulator; LLMC_CUDNN_BACKWARD=deterministic computes dQ without one), then
// (cudnn_softmax_sum_offset bytes further) one fp32 softmax sum per row; rows = B*NH*T, and each
// part starts on 256 bytes.
inline size_t round_up_256(size_t bytes) { return (bytes + 255) / 256 * 256; }
inline size_t cudnn_backward_extras_offset(size_t engine_bytes) { return round_up_256(engine_bytes); }
inline size_t cudnn_softmax_sum_offset(size_t rows, size_t head_size, bool dq_accumulator) {
  return dq_accumulator ? round_up_256(rows * head_size * sizeof(float)) : 0;
}
inline size_t cudnn_backward_workspace_bytes(size_t engine_bytes, size_t rows, size_t head_size, bool dq_accumulator) {
  return cudnn_backward_extras_offset(engine_bytes) + cudnn_softmax_sum_offset(rows, head_size, dq_accumulator) +
         rows * sizeof(float);
}

}  // namespace llmc
