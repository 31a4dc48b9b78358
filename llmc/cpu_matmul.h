// Fully connected layer y = x W^T + b (W is OC x C, rows are output features, as in nn.Linear and
// the checkpoint layout), forward and backward, on the CPU. The products are computed by two
// kernels whose per-element summation order is fixed by the code (not by the number of OpenMP
// threads), so results are identical run to run and for any thread count.
#pragma once
#include <cstddef>

namespace llmc {

// Cmat[m][n] = (accumulate ? Cmat[m][n] : 0) + sum_k A[m][k] * B[n][k], all row-major, A is M x K,
// B is N x K, Cmat is M x N. Both operands are read along k, contiguously.
void gemm_nt(float* Cmat, const float* A, const float* B, int M, int N, int K, bool accumulate);

// Cmat[m][n] = (accumulate ? Cmat[m][n] : 0) + sum_k a(m,k) * B[k][n] with a(m,k) = A[m*a_m + k*a_k]
// (a_m = K, a_k = 1: A is M x K row-major; a_m = 1, a_k = M: A is K x M, i.e. used transposed).
// B (K x N) and Cmat (M x N) are read along n, contiguously.
void gemm_xn(float* Cmat, const float* A, size_t a_m, size_t a_k, const float* B, int M, int N, int K,
             bool accumulate);

// out (N x OC) = inp (N x C) weight^T + bias; bias may be null.
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC);

// dinp (N x C) = dout weight (overwritten); dweight (OC x C) += dout^T inp; dbias (OC) += column sums
// of dout (skipped when null).
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC);

}  // namespace llmc
