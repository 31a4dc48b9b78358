// Causal multi-head self-attention, the plain (non-fused) way: permute qkv into per-head Q, K, V,
// full T x T score GEMMs through cuBLAS, a causal softmax kernel in fp32, and the probabilities kept
// for the backward pass. Memory-hungry (B*NH*T*T twice) but exact; the FP32 build and the tests use
// it, the BF16 trainer uses cuDNN's flash attention (llmc/cuda/cudnn_attention.h).
//
// Layouts: qkv (B, T, 3C) with q, k, v side by side and head h owning channels [h*HS, (h+1)*HS) of
// each; Q, K, V, vaccum (B, NH, T, HS); att, preatt (B, NH, T, T); out (B, T, C).
//
// The kernels are templates over the element type, launched for floatX, as in every kernel header:
// a template's instances are merged at link time, so several translation units may include this
// header, where a plain __global__ function would be defined in each of them.
#pragma once
#include <cublas_v2.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "llmc/cuda/attention_scratch.h"
#include "llmc/cuda/common.cuh"
#include "llmc/cuda/cublaslt_handle.cuh"
#include "llmc/cuda/fast_math.cuh"
#include "llmc/cuda/reduce.cuh"

namespace llmc {

// The fallback's scratch (llmc/cuda/attention_scratch.h) in the build's floatX.
using AttentionBuffers = AttentionScratch<floatX>;

// ---- permutes between the token-major and the head-major layouts (16-byte vectors) ----

// Between `parts` token-major tensors side by side, (B, T, parts*C) (qkv: parts = 3), and as many
// head-major ones (B, NH, T, HS), part 0 in q, 1 in k, 2 in v. to_heads = true:
// q/k/v[b][h][t][:] = tokens[b][t][part*C + h*HS + :]; false: the reverse.
template <class Real>
__global__ void permute_heads_kernel(Real* q, Real* k, Real* v, Real* tokens, int parts, int B, int T, int NH, int HS,
                                     bool to_heads) {
  const int C = NH * HS;
  const size_t width = size_t(parts) * C;
  const size_t idx = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) * Packed128<Real>::size;
  if (idx >= size_t(B) * T * width) return;
  const int c = int(idx % width), part = c / C;
  const size_t bt = idx / width;
  const int t = int(bt % T), b = int(bt / T);
  Real* heads = (part == 0 ? q : part == 1 ? k : v) + ((size_t(b) * NH + c % C / HS) * T + t) * HS + c % HS;
  if (to_heads)
    store128(heads, load128cs(tokens + idx));
  else
    store128(tokens + idx, load128cs(heads));
}

// ---- causal softmax, one warp per score row, fp32 math ----

// att[row][j] = softmax_j(scale * preatt[row][j]) over j <= t (t = row % T), 0 for j > t. The
// exponents are kept in base 2 (llmc/cuda/fast_math.cuh): scale carries log2(e), so each
// exponential is one FFMA and ex2.approx.
template <class Real>
__global__ void causal_softmax_forward_kernel(Real* att, const Real* preatt, int rows, int T, float scale) {
  scale *= FastExp::kUnit;
  const int row = blockIdx.x * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= rows) return;
  const int t = row % T;
  const Real* in = preatt + size_t(row) * T;
  Real* out = att + size_t(row) * T;
  float m = -INFINITY;
  for (int j = lane; j <= t; j += kWarpSize) m = fmaxf(m, scale * static_cast<float>(in[j]));
  m = warp_reduce_max(m);
  float s = 0.0f;
  for (int j = lane; j <= t; j += kWarpSize) s += FastExp::power(scale * static_cast<float>(in[j]) - m);
  const float inv = 1.0f / warp_reduce_sum(s);
  for (int j = lane; j < T; j += kWarpSize)
    out[j] = Real(j <= t ? FastExp::power(scale * static_cast<float>(in[j]) - m) * inv : 0.0f);
}

// With p = att row and g = d(att) row: d(preatt)[j] = scale * p[j] (g[j] - sum_i p[i] g[i]) for
// j <= t, 0 above the diagonal. dpreatt may alias datt (each lane rereads only what it writes).
template <class Real>
__global__ void causal_softmax_backward_kernel(Real* dpreatt, const Real* datt, const Real* att, int rows, int T,
                                               float scale) {
  const int row = blockIdx.x * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= rows) return;
  const int t = row % T;
  const size_t base = size_t(row) * T;
  float dot = 0.0f;
  for (int j = lane; j <= t; j += kWarpSize)
    dot += static_cast<float>(att[base + j]) * static_cast<float>(datt[base + j]);
  dot = warp_reduce_sum(dot);
  for (int j = lane; j < T; j += kWarpSize) {
    const float p = static_cast<float>(att[base + j]), g = static_cast<float>(datt[base + j]);
    dpreatt[base + j] = Real(j <= t ? scale * p * (g - dot) : 0.0f);
  }
}

// ---- launchers of the kernels above (dev/cuda/attention_kernels.cu checks each alone) ----

inline int vec_blocks(size_t elements) { return ceil_div(elements / Packed128<floatX>::size, 256); }

// to_heads: q, k, v from qkv (B, T, 3C); else the reverse, dqkv from dq, dk, dv.
inline void permute_qkv(floatX* q, floatX* k, floatX* v, floatX* qkv, int B, int T, int NH, int HS, bool to_heads,
                        cudaStream_t stream) {
  launch<permute_heads_kernel<floatX>>(vec_blocks(size_t(B) * T * 3 * NH * HS), 256, 0, stream, q, k, v, qkv, 3, B, T,
                                       NH, HS, to_heads);
}

inline void permute_heads(floatX* heads, floatX* tokens, int B, int T, int NH, int HS, bool to_heads,
                          cudaStream_t stream) {
  launch<permute_heads_kernel<floatX>>(vec_blocks(size_t(B) * T * NH * HS), 256, 0, stream, heads, heads, heads,
                                       tokens, 1, B, T, NH, HS, to_heads);
}

// rows = B * NH * T score rows of length T, eight rows (warps) per block.
inline void causal_softmax_forward(floatX* att, const floatX* preatt, int rows, int T, float scale,
                                   cudaStream_t stream) {
  launch<causal_softmax_forward_kernel<floatX>>(ceil_div(rows, 8), 256, 0, stream, att, preatt, rows, T, scale);
}

inline void causal_softmax_backward(floatX* dpreatt, const floatX* datt, const floatX* att, int rows, int T,
                                    float scale, cudaStream_t stream) {
  launch<causal_softmax_backward_kernel<floatX>>(ceil_div(rows, 8), 256, 0, stream, dpreatt, datt, att, rows, T, scale);
}

// ---- batched GEMMs, one per (b, h), row-major views ----

// Row-major C (M x N) = op(A) op(B) for `batch` matrices at fixed strides;
// op(X) = X^T when trans_X (X then stored N x K or K x M). Issued as the column-major
// C^T = op(B)^T op(A)^T, which swaps the operands and keeps each op flag.
// `stream` is the handle's (ctx.blas(stream)), for LLMC_PROFILE's events.
inline void gemm_batched_rm(cublasHandle_t handle, floatX* c, const floatX* a, const floatX* b, int M, int N, int K,
                            bool trans_a, bool trans_b, long long stride_a, long long stride_b, long long stride_c,
                            int batch, cudaStream_t stream) {
  const cudaDataType_t type = floatX_cuda_type();
  const int lda = trans_a ? M : K, ldb = trans_b ? K : N;
  const float alpha = 1.0f, beta = 0.0f;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const TimedRegion timed(stream, [&] {
    return "cublas batched M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) + " " +
           (trans_a ? "T" : "N") + (trans_b ? "T" : "N") + " x" + std::to_string(batch);
  });
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, op_b, op_a, N, M, K, &alpha, b, type, ldb, stride_b, a, type, lda,
                                          stride_a, &beta, c, type, N, stride_c, batch, CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT));
}

// The permutes move 16-byte vectors, which must not straddle two heads.
inline void attention_require_shape(const char* who, int C, int NH) {
  if (NH <= 0 || C % NH != 0 || (C / NH) % Packed128<floatX>::size != 0)
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(C) + " channels over " + std::to_string(NH) +
                                " heads do not give a head size that is a multiple of " +
                                std::to_string(Packed128<floatX>::size));
}

// out (B, T, C) and att (B, NH, T, T, kept for the backward) from qkv (B, T, 3C).
inline void attention_forward(BlasContext& ctx, floatX* out, floatX* att, const AttentionBuffers& buf,
                              const floatX* qkv, int B, int T, int C, int NH, cudaStream_t stream) {
  attention_require_shape("attention_forward", C, NH);
  const int HS = C / NH;
  const long long tt = (long long)T * T, th = (long long)T * HS;
  cublasHandle_t h = ctx.blas(stream);
  permute_qkv(buf.q, buf.k, buf.v, const_cast<floatX*>(qkv), B, T, NH, HS, true, stream);
  // preatt = Q K^T (unscaled; the softmax applies 1/sqrt(HS) in fp32).
  gemm_batched_rm(h, buf.scratch, buf.q, buf.k, T, T, HS, false, true, th, th, tt, B * NH, stream);
  causal_softmax_forward(att, buf.scratch, B * NH * T, T, 1.0f / sqrtf(float(HS)), stream);
  gemm_batched_rm(h, buf.vaccum, att, buf.v, T, HS, T, false, false, tt, th, th, B * NH, stream);
  permute_heads(buf.vaccum, out, B, T, NH, HS, false, stream);
}

// dqkv (B, T, 3C), overwritten, from dout (B, T, C), the layer's qkv and the att its forward saved.
inline void attention_backward(BlasContext& ctx, floatX* dqkv, const floatX* dout, const floatX* qkv,
                               const floatX* att, const AttentionBuffers& buf, int B, int T, int C, int NH,
                               cudaStream_t stream) {
  attention_require_shape("attention_backward", C, NH);
  const int HS = C / NH;
  const long long tt = (long long)T * T, th = (long long)T * HS;
  cublasHandle_t h = ctx.blas(stream);
  floatX* dvaccum = buf.vaccum;
  floatX *dq = buf.dq, *dk = buf.dk, *dv = buf.dv;
  permute_qkv(buf.q, buf.k, buf.v, const_cast<floatX*>(qkv), B, T, NH, HS, true, stream);
  permute_heads(dvaccum, const_cast<floatX*>(dout), B, T, NH, HS, true, stream);
  // vaccum = att V:  d(att) = d(vaccum) V^T,  dV = att^T d(vaccum).
  gemm_batched_rm(h, buf.scratch, dvaccum, buf.v, T, T, HS, false, true, th, th, tt, B * NH, stream);
  gemm_batched_rm(h, dv, att, dvaccum, T, HS, T, true, false, tt, th, th, B * NH, stream);
  causal_softmax_backward(buf.scratch, buf.scratch, att, B * NH * T, T, 1.0f / sqrtf(float(HS)), stream);
  // preatt = Q K^T:  dQ = d(preatt) K,  dK = d(preatt)^T Q.
  gemm_batched_rm(h, dq, buf.scratch, buf.k, T, HS, T, false, false, tt, th, th, B * NH, stream);
  gemm_batched_rm(h, dk, buf.scratch, buf.q, T, HS, T, true, false, tt, th, th, B * NH, stream);
  permute_qkv(dq, dk, dv, dqkv, B, T, NH, HS, false, stream);
}

}  // namespace llmc
