// Fully connected layer y = x W^T + b (W is OC x C, rows are output features, as in nn.Linear and
// the checkpoint layout), forward and backward, on the CPU, on top of one cache-blocked SGEMM.
//
// Numerics: every output element is the sum over k in blocks of kGemmKBlock consecutive k; within
// a block the products are accumulated one after the other, starting from 0 (as fused multiply-adds
// where the target has FMA, at every optimisation level), and the block sums are added to the
// output in block order. That order is fixed by the code, not by the number of OpenMP threads or
// the SIMD width, so results are identical run to run and for any thread count; the two-level sum
// keeps the rounding error ~(kGemmKBlock + K / kGemmKBlock) ulp in the worst case, instead of K ulp
// for one long chain.
#pragma once
#include <cstddef>

namespace llmc {

constexpr int kGemmKBlock = 256;

// A matrix operand read through strides: element (r, c) is data[r * row_stride + c * col_stride].
// A row-major R x C matrix is {data, C, 1}; the same memory used transposed is {data, 1, C}.
struct MatrixView {
  const float* data;
  size_t row_stride, col_stride;
};

// Cmat (M x N, row-major) = (accumulate ? Cmat : 0) + A B, with A M x K and B K x N given as views.
void gemm(float* Cmat, MatrixView A, MatrixView B, int M, int N, int K, bool accumulate);

// out (N x OC) = inp (N x C) weight^T + bias; bias may be null.
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC);

// dinp (N x C) = dout weight (overwritten); dweight (OC x C) += dout^T inp; dbias (OC) += column sums
// of dout (skipped when null).
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC);

}  // namespace llmc
