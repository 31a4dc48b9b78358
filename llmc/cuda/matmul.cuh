// Fully connected layers y = x W^T + b (W is OC x C, the checkpoint layout) through cuBLASLt, with
// the bias, GELU and GELU-backward folded into the GEMM epilogues, plus a deterministic bias-gradient
// kernel. See docs/kernels-matmul-attention.md for the layout mapping.
//
// cuBLASLt is column-major. A row-major (R x K) matrix X is the same bytes as the column-major
// (K x R) matrix X_c = X^T, so every row-major product is issued as its transpose:
//   forward  out_c  (OC x BT) = W_c^T inp_c    m=OC, n=BT, k=C,  A = W (op T), B = inp
//   dinp     dinp_c (C x BT)  = W_c dout_c     m=C,  n=BT, k=OC, A = W, B = dout
//   dweight  dW_c   (C x OC)  = inp_c dout_c^T m=C,  n=OC, k=BT, A = inp, B = dout (op T), beta = 1
// The bias has one entry per row of the column-major result (m), exactly cuBLASLt's bias vector.
#pragma once
#include <cublasLt.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "llmc/cuda/common.cuh"
#include "llmc/cuda/cublaslt_handle.cuh"
#include "llmc/cuda/gelu.cuh"
#include "llmc/cuda/kernel_scratch.h"

namespace llmc {

// Owns the descriptors of one cublasLtMatmul call, so that an error thrown midway leaks nothing.
struct LtGemmDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  ~LtGemmDescs() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// Column-major D (m x n, leading dimension ldd) = op(A) op(B) (+ D when accumulate), then the
// epilogue. `bias` is the epilogue's bias vector (an input for *_BIAS, the output for BGRADB);
// `aux` is the GELU pre-activation (written by GELU_AUX_BIAS, read by DGELU), m x n with aux_ld.
// Returns false, having launched nothing, when cuBLASLt has no algorithm for this GEMM.
inline bool try_lt_gemm(BlasContext& ctx, void* d, const void* a, const void* b, int m, int n, int k, bool trans_a,
                        bool trans_b, int lda, int ldb, int ldd, cublasLtEpilogue_t epilogue, void* bias, void* aux,
                        int aux_ld, bool accumulate, cudaStream_t stream) {
  // The epilogue vectors have no alignment preference to tell the heuristic; 16 bytes always holds
  // for this project's tensors (sizes are multiples of 8 elements) and is what the kernels need.
  if ((reinterpret_cast<uintptr_t>(bias) | reinterpret_cast<uintptr_t>(aux)) % 16 != 0)
    throw std::invalid_argument("lt_gemm: bias and GELU aux pointers must be 16-byte aligned");
  const cudaDataType_t type = floatX_cuda_type();
  LtGemmDescs g;
  // floatX operands, always accumulated in full fp32: CUBLAS_COMPUTE_32F never uses TF32, which the
  // FP32 build's 1e-4 parity needs.
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&g.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  if (bias)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  if (aux) {
    const int64_t ld = aux_ld;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)));
  }
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g.a, type, trans_a ? k : m, trans_a ? m : k, lda));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g.b, type, trans_b ? n : k, trans_b ? k : n, ldb));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g.d, type, m, n, ldd));

  constexpr long long e = sizeof(floatX);
  const GemmKey key{m, n, k, trans_a, trans_b, int(epilogue), accumulate, lt_alignment(a, lda * e),
                    lt_alignment(b, ldb * e), lt_alignment(d, ldd * e)};
  const cublasLtMatmulAlgo_t* algo = ctx.algo(key, g.op, g.a, g.b, g.d);
  if (algo == nullptr) return false;
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(ctx.lt(), g.op, &alpha, a, g.a, b, g.b, &beta, d, g.d, d, g.d, algo, ctx.workspace(),
                              ctx.workspace_bytes(), stream));
  return true;
}

// try_lt_gemm for the GEMMs that have no alternative: no algorithm is an error.
inline void lt_gemm(BlasContext& ctx, void* d, const void* a, const void* b, int m, int n, int k, bool trans_a,
                    bool trans_b, int lda, int ldb, int ldd, cublasLtEpilogue_t epilogue, void* bias, void* aux,
                    int aux_ld, bool accumulate, cudaStream_t stream) {
  if (!try_lt_gemm(ctx, d, a, b, m, n, k, trans_a, trans_b, lda, ldb, ldd, epilogue, bias, aux, aux_ld, accumulate,
                   stream))
    throw std::runtime_error("cuBLASLt has no algorithm for GEMM m=" + std::to_string(m) + " n=" + std::to_string(n) +
                             " k=" + std::to_string(k) + " epilogue=" + std::to_string(int(epilogue)));
}

// out (BT x OC) = inp (BT x C) weight^T + bias; bias may be null.
inline void matmul_forward(BlasContext& ctx, floatX* out, const floatX* inp, const floatX* weight, const floatX* bias,
                           int BT, int C, int OC, cudaStream_t stream) {
  lt_gemm(ctx, out, weight, inp, OC, BT, C, true, false, C, C, OC,
          bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT, const_cast<floatX*>(bias), nullptr, 0, false,
          stream);
}

// The fc layer with its GELU: pre_gelu (BT x OC) = inp weight^T + bias, out = gelu(pre_gelu) (tanh
// approximation). pre_gelu is what matmul_backward needs. With `epilogue`, cuBLASLt's GELU_AUX_BIAS
// epilogue computes both in one pass, out from the fp32 pre-activation; otherwise (or where
// cuBLASLt offers no such epilogue) a bias GEMM writes pre_gelu and the GELU kernel computes out
// from it as stored, exactly as a recompute in the backward pass does (gelu_forward).
inline void matmul_forward_gelu(BlasContext& ctx, floatX* out, floatX* pre_gelu, const floatX* inp,
                                const floatX* weight, const floatX* bias, int BT, int C, int OC, bool epilogue,
                                cudaStream_t stream) {
  if (epilogue && try_lt_gemm(ctx, out, weight, inp, OC, BT, C, true, false, C, C, OC,
                              CUBLASLT_EPILOGUE_GELU_AUX_BIAS, const_cast<floatX*>(bias), pre_gelu, OC, false, stream))
    return;
  matmul_forward(ctx, pre_gelu, inp, weight, bias, BT, C, OC, stream);
  gelu_forward(out, pre_gelu, size_t(BT) * OC, stream);
}

// dinp (BT x C) = dout (BT x OC) weight, overwritten. With pre_gelu (BT x C, the input of the GELU
// that produced this layer's input) the result is multiplied by gelu'(pre_gelu), so dinp is the
// gradient of the fc layer's pre-activation: with `epilogue` by cuBLASLt's DGELU epilogue (one
// rounding), otherwise (or where cuBLASLt offers no DGELU epilogue for these types) by the GELU
// backward kernel, in place.
inline void matmul_backward_input(BlasContext& ctx, floatX* dinp, const floatX* dout, const floatX* weight,
                                  const floatX* pre_gelu, int BT, int C, int OC, bool epilogue, cudaStream_t stream) {
  if (pre_gelu && epilogue &&
      try_lt_gemm(ctx, dinp, weight, dout, C, BT, OC, false, false, C, OC, C, CUBLASLT_EPILOGUE_DGELU, nullptr,
                  const_cast<floatX*>(pre_gelu), C, false, stream))
    return;
  lt_gemm(ctx, dinp, weight, dout, C, BT, OC, false, false, C, OC, C, CUBLASLT_EPILOGUE_DEFAULT, nullptr, nullptr, 0,
          false, stream);
  if (pre_gelu) gelu_backward(dinp, pre_gelu, dinp, size_t(BT) * C, stream);
}

// dweight (OC x C) += dout^T inp.
inline void matmul_backward_weight(BlasContext& ctx, floatX* dweight, const floatX* dout, const floatX* inp, int BT,
                                   int C, int OC, cudaStream_t stream) {
  lt_gemm(ctx, dweight, inp, dout, C, OC, BT, false, true, C, OC, C, CUBLASLT_EPILOGUE_DEFAULT, nullptr, nullptr, 0,
          true, stream);
}

// dweight += dout^T inp and, from the same GEMM's BGRADB epilogue, dbias = column sums of dout.
// The epilogue overwrites dbias (it cannot accumulate over micro-batches) and its reduction order
// is cuBLASLt's; the trainer uses matmul_bias_grad below, this is the benchmark's comparison.
inline void matmul_backward_weight_bgradb(BlasContext& ctx, floatX* dweight, floatX* dbias, const floatX* dout,
                                          const floatX* inp, int BT, int C, int OC, cudaStream_t stream) {
  lt_gemm(ctx, dweight, inp, dout, C, OC, BT, false, true, C, OC, C, CUBLASLT_EPILOGUE_BGRADB, dbias, nullptr, 0,
          true, stream);
}

// ---- Deterministic bias gradient: dbias[oc] += sum over rows of dout[row][oc] ----
//
// Pass 1: the rows are cut into fixed slices of kBiasRowsPerSlice; block (x, y) sums slice y over
// 32 * x128::size columns in fp32 (each of its 8 warps takes every 8th row, each lane 16 bytes of
// columns) and the 8 warp sums are added in warp order. Pass 2 adds the slices in slice order.
// Every sum's order depends only on (BT, OC), never on scheduling, so results are bitwise
// reproducible.
// kBiasRowsPerSlice, bias_grad_slices and the scratch size are in kernel_scratch.h (the memory plan
// needs them too).
constexpr int kBiasWarps = 8;

template <class T>
__global__ void bias_grad_partial_kernel(float* partial, const T* dout, int BT, int OC) {
  using x128 = Packed128<T>;
  constexpr int kCols = 32 * x128::size;
  LLMC_SHARED(float, sums, [kBiasWarps][kCols]);
  const int lane = threadIdx.x, warp = threadIdx.y;
  const int block_col = blockIdx.x * kCols;
  const int col = block_col + lane * x128::size;
  const int row_end = min(BT, int(blockIdx.y + 1) * kBiasRowsPerSlice);
  float acc[x128::size] = {};
  if (col < OC) {
    for (int r = blockIdx.y * kBiasRowsPerSlice + warp; r < row_end; r += kBiasWarps) {
      const x128 v = load128cs(dout + size_t(r) * OC + col);
#pragma unroll
      for (int k = 0; k < x128::size; ++k) acc[k] += static_cast<float>(v[k]);
    }
  }
#pragma unroll
  for (int k = 0; k < x128::size; ++k) sums[warp][lane * x128::size + k] = acc[k];
  __syncthreads();
  for (int c = warp * 32 + lane; c < kCols; c += kBiasWarps * 32) {
    if (block_col + c >= OC) break;
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kBiasWarps; ++w) s += sums[w][c];
    partial[size_t(blockIdx.y) * OC + block_col + c] = s;
  }
}

template <class T>
__global__ void bias_grad_finish_kernel(T* dbias, const float* partial, int slices, int OC) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= OC) return;
  float s = 0.0f;
  for (int i = 0; i < slices; ++i) s += partial[size_t(i) * OC + c];
  dbias[c] = T(static_cast<float>(dbias[c]) + s);
}

// dbias (OC) += column sums of dout (BT x OC). OC must be a multiple of 16 / sizeof(floatX);
// scratch holds matmul_bias_grad_scratch_floats(BT, OC) floats.
inline void matmul_bias_grad(floatX* dbias, float* scratch, const floatX* dout, int BT, int OC, cudaStream_t stream) {
  require_whole_vectors("matmul_bias_grad", "output channels", size_t(OC));
  constexpr int kCols = 32 * Packed128<floatX>::size;
  const dim3 grid(ceil_div(OC, kCols), bias_grad_slices(BT));
  launch<bias_grad_partial_kernel<floatX>>(grid, dim3(32, kBiasWarps), 0, stream, scratch, dout, BT, OC);
  CUDA_CHECK_LAST();
  launch<bias_grad_finish_kernel<floatX>>(ceil_div(OC, 256), 256, 0, stream, dbias, scratch, bias_grad_slices(BT), OC);
  CUDA_CHECK_LAST();
}

// The whole backward of a fully connected layer: dinp overwritten (times gelu'(pre_gelu) when
// pre_gelu is given, through the DGELU epilogue when dgelu_epilogue, see matmul_backward_input),
// dweight += dout^T inp, dbias += column sums of dout (skipped when dbias is null; bias_scratch as
// for matmul_bias_grad).
inline void matmul_backward(BlasContext& ctx, floatX* dinp, floatX* dweight, floatX* dbias, float* bias_scratch,
                            const floatX* dout, const floatX* inp, const floatX* weight, const floatX* pre_gelu, int BT,
                            int C, int OC, bool dgelu_epilogue, cudaStream_t stream) {
  if (dbias) matmul_bias_grad(dbias, bias_scratch, dout, BT, OC, stream);
  matmul_backward_weight(ctx, dweight, dout, inp, BT, C, OC, stream);
  matmul_backward_input(ctx, dinp, dout, weight, pre_gelu, BT, C, OC, dgelu_epilogue, stream);
}

}  // namespace llmc
