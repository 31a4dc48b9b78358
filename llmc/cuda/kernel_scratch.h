// Sizes of the fp32 scratch the CUDA kernels need from their caller, in a plain C++ header: the
// memory plan (llmc/cuda/memory_plan.h, host code) sizes the backend's buffers from the same
// constants the kernels (layernorm.cuh, matmul.cuh, global_norm.cuh) launch their grids with, and
// from the layout cudnn_attention.cu gives its backward workspace.
#pragma once
#include <cstddef>

namespace llmc {

// The gradient partial-sums scratch (one buffer, which layernorm_backward and the bias gradient take
// turns in) starts with kScratchCounterFloats floats that hold the fused LayerNorm backward's
// completion counter: zeroed once when the buffer is allocated, and back at zero after every kernel
// that counts in it. Every user's partial sums start after it (scratch_partials), so none of them
// overwrites the counter; 64 floats keep the partial sums as aligned (256 bytes) as the buffer.
// The two accessors are called by kernels too: host and device functions under nvcc, plain
// functions elsewhere (the host code, and the emulated GPU's kernels, compiled by g++).
#if defined(__CUDACC__)
#define LLMC_SCRATCH_ACCESSOR __host__ __device__ inline
#else
#define LLMC_SCRATCH_ACCESSOR inline
#endif
constexpr size_t kScratchCounterFloats = 64;
LLMC_SCRATCH_ACCESSOR float* scratch_partials(float* scratch) { return scratch + kScratchCounterFloats; }
LLMC_SCRATCH_ACCESSOR unsigned* scratch_counter(float* scratch) { return reinterpret_cast<unsigned*>(scratch); }
#undef LLMC_SCRATCH_ACCESSOR

// layernorm_backward's grid is at most this many blocks (fixed by (N, C), so its sums are
// reproducible); each block leaves 2*C partial sums (dweight, dbias). Carrying a linear layer's bias
// gradient too (LLMC_BIAS_GRAD=layernorm), a block leaves 3*C, on at most 2/3 as many blocks: the
// same scratch holds them.
constexpr int kLayerNormBackwardMaxBlocks = 512;
constexpr int kLayerNormBackwardMaxBlocksWithBias = kLayerNormBackwardMaxBlocks * 2 / 3;
static_assert(3 * kLayerNormBackwardMaxBlocksWithBias <= 2 * kLayerNormBackwardMaxBlocks,
              "the 3*C partial sums of the bias-carrying grid fit the scratch of the 2*C ones");
// The deterministic bias gradient sums fixed slices of this many rows, each slice OC partial sums.
constexpr int kBiasRowsPerSlice = 64;
// LLMC_ENCODER_BACKWARD=pieces cuts a token's positions into pieces of at most this many rows.
constexpr int kEncoderPieceRows = 64;
// The global norm's first pass runs this many blocks, one fp32 partial sum each.
constexpr int kGlobalNormBlocks = 1024;

// fp32 scratch the caller provides to layernorm_backward (enough for any N).
inline size_t layernorm_backward_scratch_floats(int C) {
  return kScratchCounterFloats + size_t(kLayerNormBackwardMaxBlocks) * 2 * size_t(C);
}

inline int bias_grad_slices(int BT) { return (BT + kBiasRowsPerSlice - 1) / kBiasRowsPerSlice; }
// fp32 scratch the bias gradient of a (BT, OC) output needs (the kernels' slice sums; the BGRADB
// epilogue's OC sums fit in the first slice's place).
inline size_t matmul_bias_grad_scratch_floats(int BT, int OC) {
  return kScratchCounterFloats + size_t(bias_grad_slices(BT)) * size_t(OC);
}

// fp32 scratch of the encoder backward's piece sums (LLMC_ENCODER_BACKWARD=pieces): C floats per
// piece of the tokens cut into several, i.e. of those with s > K = kEncoderPieceRows positions. Such
// a token has ceil(s/K) <= (s+K-1)/K <= 2s/(K+1) pieces (the last step is K+1 <= s), so all of them
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
