// CudaBackend's classifier (llmc/cuda/cuda_backend_impl.cuh): logits = lnf wte^T (the LM head of
// llmc/linear_layers.def: its weight is the token embedding, tied, no bias), the fused softmax/cross-entropy
// (llmc/cuda/classifier.cuh) and, in training, the classifier's two backward GEMMs; for training,
// evaluation (forward_losses), sampling (next_token_logits) and the parity tests (forward_logits).
//
// With --fp8 1 and LLMC_FP8_LM_HEAD=on the LM head's two GEMMs run in FP8 (llmc/cuda/fp8_layout.h):
// the logits from lnf's E4M3 copy, which the final LayerNorm forward wrote for all B*T rows, and
// d(lnf) from the E5M2 copy of the chunk's d(logits), which the fused classifier writes.
//
// The logits buffer holds logits_chunk_rows rows (logits_rows, llmc/cuda/memory_plan.h): B*T, or
// kClassifierChunkRows (fewer where a test asks) where B*T is more. Each chunk of rows is done
// with before the next one overwrites the buffer: in training its logits GEMM, the fused classifier
// (the chunk's losses, and its logits overwritten with their gradient), the input-gradient GEMM
// (d(lnf) of its rows, into d_ln) and the weight-gradient GEMM (beta = 1: the chunks add up in wte's
// gradient as micro-batches do). Each row's logits, loss and d(lnf) are the products one chunk
// computes; only wte's gradient is summed in another grouping of the rows.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "llmc/cuda/classifier.cuh"
#include "llmc/cuda/cuda_backend_impl.cuh"
#include "llmc/cuda/matmul.cuh"
#include "llmc/cuda/reduce.cuh"

namespace llmc {

namespace {

// accumulator[0] += scale * sum(losses[0..n)), one block with a fixed summation order, so that
// the reported loss is reproducible and never needs the host.
__global__ void accumulate_loss_kernel(float* accumulator, const float* losses, int n, float scale) {
  LLMC_SHARED(float, scratch, [kMaxWarpsPerBlock]);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) sum += losses[i];
  sum = block_reduce_sum(sum, scratch);
  if (threadIdx.x == 0) accumulator[0] += scale * sum;
}

void accumulate_loss(float* accumulator, const float* losses, int n, float scale, cudaStream_t stream) {
  launch<accumulate_loss_kernel>(1, 1024, 0, stream, accumulator, losses, n, scale);
  CUDA_CHECK_LAST();
}

}  // namespace

void CudaBackend::Impl::logits_forward(int row0, int rows) {
  linear_forward(LinearLayer::kLmHead, 0, logits, lnf, rows, row0);
}

// With LLMC_FP8_LM_HEAD=on the gradient pass also writes the chunk's d(logits) E5M2 copy (from the
// operand buffer's start), which the LM head's input-gradient GEMM reads.
void CudaBackend::Impl::classify_chunk(int BT, int row0, int rows, float dloss, bool write_dlogits) {
  fused_classifier(logits, losses + row0, tokens_dev + BT + row0, rows, cfg.vocab_size, cfg.padded_vocab_size, dloss,
                   write_dlogits, stream,
                   write_dlogits ? fp8_sink(Fp8Role::kGradient, LinearLayer::kLmHead, 0) : Fp8Sink{});
}

void CudaBackend::Impl::classifier_forward_backward(int BT, float dloss) {
  for_each_logits_chunk(BT, [&](int row0, int rows) {
    logits_forward(row0, rows);
    classify_chunk(BT, row0, rows, dloss, true);
    const size_t first = size_t(row0) * C();
    linear_backward(LinearLayer::kLmHead, 0, {.dinp = d_ln + first, .dout = logits, .inp = lnf + first, .BT = rows});
  });
  accumulate_loss(scalars + kLossAccum, losses, BT, dloss, stream);
}

void CudaBackend::forward_losses(const int* inputs, const int* targets, int B, int T, float* losses) {
  Impl& d = *impl_;
  d.outside_step();
  const int BT = B * T;
  d.stage_tokens(inputs, targets, B, T);
  d.forward(B, T);
  // The classifier writes each position's cross-entropy (fp32) without touching the logits.
  d.for_each_logits_chunk(BT, [&](int row0, int rows) {
    d.logits_forward(row0, rows);
    d.classify_chunk(BT, row0, rows, 0.0f, false);
  });
  CUDA_CHECK(cudaMemcpyAsync(losses, d.losses, size_t(BT) * sizeof(float), cudaMemcpyDeviceToHost, d.stream));
  CUDA_CHECK(cudaStreamSynchronize(d.stream));
}

void CudaBackend::next_token_logits(const int* tokens, int T, float* logits) {
  Impl& d = *impl_;
  d.outside_step();
  if (T <= 0 || T > d.opt.max_seq_len)
    throw std::runtime_error(fmt::format("CUDA backend: sampling context of {} tokens is not within 1..{}", T,
                                         d.opt.max_seq_len));
  // Always the longest T, padded after the context: attention is causal, so position T-1 does not
  // see the padding, and one fixed shape means one set of GEMM algorithms and attention plans.
  const int Tp = d.opt.max_seq_len;
  std::vector<int> padded(size_t(Tp), 0);
  std::copy(tokens, tokens + T, padded.begin());
  d.stage_tokens(padded.data(), nullptr, 1, Tp);
  d.forward(1, Tp);
  // The logits of the chunk that holds row T-1 only.
  const int row = T - 1, row0 = row / d.logits_chunk_rows * d.logits_chunk_rows;
  d.logits_forward(row0, std::min(d.logits_chunk_rows, Tp - row0));
  const std::vector<float> values = floatx_to_host(d.logits + size_t(row - row0) * d.cfg.padded_vocab_size,
                                                   size_t(d.cfg.vocab_size), d.stream);
  std::copy(values.begin(), values.end(), logits);
}

std::vector<float> CudaBackend::forward_logits(const int* inputs, int B, int T) {
  Impl& d = *impl_;
  d.outside_step();
  d.stage_tokens(inputs, nullptr, B, T);
  d.forward(B, T);
  const size_t Vp = size_t(d.cfg.padded_vocab_size);
  std::vector<float> all(size_t(B) * T * Vp);
  d.for_each_logits_chunk(B * T, [&](int row0, int rows) {
    d.logits_forward(row0, rows);
    const std::vector<float> chunk = floatx_to_host(d.logits, size_t(rows) * Vp, d.stream);
    std::copy(chunk.begin(), chunk.end(), all.begin() + ptrdiff_t(size_t(row0) * Vp));
  });
  return all;
}

}  // namespace llmc
