// Fully connected layers y = x W^T + b (W is OC x C, the checkpoint layout) through cuBLASLt, with
// the bias, GELU and GELU-backward folded into the GEMM epilogues, and the bias gradient from
// deterministic kernels (for the layer before a GELU, optionally those kernels running the GELU
// backward: gelu_backward_bias_grad). See docs/kernels-matmul-attention.md for the layout mapping.
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
#include "llmc/cuda/fp8.cuh"
#include "llmc/cuda/gelu.cuh"
#include "llmc/cuda/kernel_scratch.h"

namespace llmc {

// One cuBLASLt GEMM, its arguments named: column-major D (m x n, leading dimension ldd) = op(A) op(B)
// (+ D when accumulate), then the epilogue; op(X) = X^T when transpose_x (A is then stored k x m,
// B n x k).
struct LtGemm {
  void* d = nullptr;
  const void* a = nullptr;
  const void* b = nullptr;
  int m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
  int lda = 0, ldb = 0, ldd = 0;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void* bias = nullptr;  // the *_BIAS epilogues' bias vector
  void* aux = nullptr;   // the GELU pre-activation, m x n: written by GELU_AUX_BIAS, read by DGELU
  int aux_ld = 0;        // aux's leading dimension
  bool accumulate = false;
  // FP8 operands (--fp8 1): A and B hold FP8 values, each multiplied by its scale_inv (cuBLASLt's
  // A/B scale pointers) in the product; D and the bias stay floatX. cuBLASLt takes them only with A
  // transposed and B not ("TN").
  bool fp8 = false;
  Fp8Matrix a8{}, b8{};
  // With fp8: cuBLASLt's fast accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM; Hopper's FP8 MMA
  // accumulates in fewer than fp32's bits, and without it cuBLASLt promotes the partial sums to fp32
  // every so often, at a cost in throughput).
  bool fast_accum = false;
  // With fp8 and d8.data: D in E4M3, d8.data[j] = sat(x_j * *d8.scale) of each value x_j the product
  // and epilogue give (cuBLASLt's D scale), the largest |x_j| written as a float to d8.amax's first
  // slot where set (AMAX_D; the slot was cleared, and nothing else records that tensor); C is then
  // floatX (cuBLASLt's FP8 table: C, the bias and a GELU aux in bf16 with an E4M3 D), and `d` unused.
  Fp8Sink d8{};
  // Where cuBLASLt has no algorithm for it (an epilogue it does not offer for these types), lt_gemm
  // returns false, having launched nothing; otherwise that is an error.
  bool optional = false;
};

inline cudaDataType_t fp8_cuda_type(__nv_fp8_interpretation_t format) {
  return format == __NV_E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2;
}

// The name LLMC_PROFILE's table gives the GEMM `g` (cuBLASLt's column-major shape, the operands'
// transposes, FP8 operands, the epilogue): "cublasLt m=2304 n=65536 k=768 TN bias",
// "cublasLt m=768 n=65536 k=2304 TN fp8 e4m3 x e5m2".
inline std::string lt_gemm_profile_name(const LtGemm& g) {
  std::string name = "cublasLt m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) +
                     " " + (g.transpose_a ? "T" : "N") + (g.transpose_b ? "T" : "N");
  if (g.fp8)
    name += std::string(" fp8 ") + (g.a8.format == __NV_E4M3 ? "e4m3" : "e5m2") + " x " +
            (g.b8.format == __NV_E4M3 ? "e4m3" : "e5m2") + (g.d8.data ? " -> e4m3" : "") + (g.fast_accum ? " fast" : "");
  if (g.epilogue != CUBLASLT_EPILOGUE_DEFAULT) name += std::string(" ") + epilogue_name(g.epilogue);
  return g.accumulate ? name + " +=" : name;
}

// Runs `g` with the algorithm `ctx` keeps for its shape; returns whether it ran (always, unless
// g.optional: see there).
inline bool lt_gemm(BlasContext& ctx, const LtGemm& g, cudaStream_t stream) {
  // The epilogue vectors have no alignment preference to tell the heuristic; 16 bytes always holds
  // for this project's tensors (sizes are multiples of 8 elements) and is what the kernels need.
  if ((reinterpret_cast<uintptr_t>(g.bias) | reinterpret_cast<uintptr_t>(g.aux)) % 16 != 0)
    throw std::invalid_argument("lt_gemm: bias and GELU aux pointers must be 16-byte aligned");
  const cudaDataType_t type = floatX_cuda_type();
  const cudaDataType_t a_type = g.fp8 ? fp8_cuda_type(g.a8.format) : type;
  const cudaDataType_t b_type = g.fp8 ? fp8_cuda_type(g.b8.format) : type;
  const bool fp8_out = g.fp8 && g.d8.data;
  const cudaDataType_t d_type = fp8_out ? CUDA_R_8F_E4M3 : type;
  LtGemmDescs descs;
  // floatX operands, always accumulated in full fp32: CUBLAS_COMPUTE_32F never uses TF32, which the
  // FP32 build's 1e-4 parity needs.
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&descs.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const auto set = [&](cublasLtMatmulDescAttributes_t attribute, const auto& value) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(descs.op, attribute, &value, sizeof(value)));
  };
  set(CUBLASLT_MATMUL_DESC_TRANSA, g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N);
  set(CUBLASLT_MATMUL_DESC_TRANSB, g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N);
  set(CUBLASLT_MATMUL_DESC_EPILOGUE, g.epilogue);
  // The bias, and a GELU aux under an E4M3 D (unset, the aux takes D's type), in floatX: for GEMMs
  // that are neither int8 nor fp8, the only bias type cublasLt.h documents (_BIAS_DATA_TYPE).
  const int32_t floatx_type = type;
  if (g.bias) {
    set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
    set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, floatx_type);
  }
  if (g.aux) {
    set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.aux);
    set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int64_t(g.aux_ld));
    if (fp8_out) set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, floatx_type);
  }
  if (fp8_out) {
    set(CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, g.d8.scale);
    if (g.d8.amax) set(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, reinterpret_cast<float*>(g.d8.amax));
  }
  if (g.fp8) {
    set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, g.a8.scale_inv);
    set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, g.b8.scale_inv);
    set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, int8_t(g.fast_accum ? 1 : 0));
  }
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&descs.a, a_type, g.transpose_a ? g.k : g.m, g.transpose_a ? g.m : g.k, g.lda));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&descs.b, b_type, g.transpose_b ? g.n : g.k, g.transpose_b ? g.k : g.n, g.ldb));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&descs.c, type, g.m, g.n, g.ldd));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&descs.d, d_type, g.m, g.n, g.ldd));

  constexpr long long e = sizeof(floatX);
  const long long e_ab = g.fp8 ? 1 : e, e_d = fp8_out ? 1 : e;
  const void* a = g.fp8 ? static_cast<const void*>(g.a8.data) : g.a;
  const void* b = g.fp8 ? static_cast<const void*>(g.b8.data) : g.b;
  void* d = fp8_out ? static_cast<void*>(g.d8.data) : g.d;
  // The key needs no D type: the one FP8 GEMM with an E4M3 D is also the one FP8 GEMM with GELU_AUX_BIAS.
  const GemmKey key{g.m, g.n, g.k, g.transpose_a, g.transpose_b, int(g.epilogue), g.accumulate,
                    lt_alignment(a, g.lda * e_ab), lt_alignment(b, g.ldb * e_ab), lt_alignment(d, g.ldd * e_d),
                    g.fp8 ? int(a_type) : -1, g.fp8 ? int(b_type) : -1, g.fp8 && g.fast_accum};
  const float alpha = 1.0f, beta = g.accumulate ? 1.0f : 0.0f;
  // C is D for the accumulating GEMMs; an E4M3 D never accumulates, and its C (of another type) is
  // not read: null, rather than D's bytes under C's type.
  const void* c = fp8_out ? nullptr : g.d;
  const TimedRegion timed(stream, [&] { return lt_gemm_profile_name(g); });
  const cublasLtMatmulAlgo_t* algo = ctx.algorithm(key, descs, [&](const cublasLtMatmulAlgo_t& candidate) {
    return cublasLtMatmul(ctx.lt(), descs.op, &alpha, a, descs.a, b, descs.b, &beta, c, descs.c, d, descs.d,
                          &candidate, ctx.workspace(), ctx.workspace_bytes(), stream);
  }, stream);
  if (algo == nullptr) {
    if (g.optional) return false;
    throw std::runtime_error("cuBLASLt has no algorithm for GEMM m=" + std::to_string(g.m) + " n=" +
                             std::to_string(g.n) + " k=" + std::to_string(g.k) +
                             " epilogue=" + std::to_string(int(g.epilogue)));
  }
  CUBLAS_CHECK(cublasLtMatmul(ctx.lt(), descs.op, &alpha, a, descs.a, b, descs.b, &beta, c, descs.c, d, descs.d, algo,
                              ctx.workspace(), ctx.workspace_bytes(), stream));
  return true;
}

// The forward mapping above: out (BT x OC) = inp (BT x C) weight^T, + bias in the epilogue where set.
inline LtGemm forward_gemm(floatX* out, const floatX* inp, const floatX* weight, const floatX* bias, int BT, int C,
                           int OC) {
  return {.d = out, .a = weight, .b = inp, .m = OC, .n = BT, .k = C, .transpose_a = true, .lda = C, .ldb = C,
          .ldd = OC, .epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT,
          .bias = const_cast<floatX*>(bias)};
}

// The same product from FP8 copies (--fp8 1): (inp8 / s_inp) (weight8 / s_w)^T, E4M3 both, the
// forward mapping's TN layout as it is; with fast_accum, cuBLASLt's fast accumulation
// (LtGemm::fast_accum; LLMC_FP8_FAST_ACCUM).
inline LtGemm fp8_forward_gemm(floatX* out, const Fp8Matrix& inp, const Fp8Matrix& weight, const floatX* bias, int BT,
                               int C, int OC, bool fast_accum) {
  LtGemm g = forward_gemm(out, nullptr, nullptr, bias, BT, C, OC);
  g.fp8 = true;
  g.fast_accum = fast_accum;
  g.a8 = weight;
  g.b8 = inp;
  return g;
}

// out (BT x OC) = inp (BT x C) weight^T + bias; bias may be null.
inline void matmul_forward(BlasContext& ctx, floatX* out, const floatX* inp, const floatX* weight, const floatX* bias,
                           int BT, int C, int OC, cudaStream_t stream) {
  lt_gemm(ctx, forward_gemm(out, inp, weight, bias, BT, C, OC), stream);
}

// out = (inp8 / s_inp) (weight8 / s_w)^T + bias (fp8_forward_gemm).
inline void matmul_forward_fp8(BlasContext& ctx, floatX* out, const Fp8Matrix& inp, const Fp8Matrix& weight,
                               const floatX* bias, int BT, int C, int OC, bool fast_accum, cudaStream_t stream) {
  lt_gemm(ctx, fp8_forward_gemm(out, inp, weight, bias, BT, C, OC, fast_accum), stream);
}

// The fc layer under --fp8 1 with its GELU in the FP8 GEMM's epilogue (LLMC_FP8_GELU=epilogue):
// pre_gelu (BT x OC, floatX) = (inp8 / s_inp) (weight8 / s_w)^T + bias, GELU_AUX_BIAS's aux, and
// out8 (the next GEMM's E4M3 operand) = sat(gelu(x) * *out8.scale) of the fp32 pre-activation x,
// the largest |gelu(x)| recorded where out8.amax is set. No floatX GELU output: the backward's
// GELU kernel writes it (MatmulBackward::inp_by_gelu_backward). cuBLASLt's GELU is the tanh form.
inline void matmul_forward_fp8_gelu(BlasContext& ctx, const Fp8Sink& out8, floatX* pre_gelu, const Fp8Matrix& inp,
                                    const Fp8Matrix& weight, const floatX* bias, int BT, int C, int OC,
                                    bool fast_accum, cudaStream_t stream) {
  if (!bias || !out8.data || out8.format != __NV_E4M3)
    throw std::invalid_argument("matmul_forward_fp8_gelu: needs the bias and an E4M3 output");
  LtGemm g = fp8_forward_gemm(nullptr, inp, weight, bias, BT, C, OC, fast_accum);
  g.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  g.aux = pre_gelu;
  g.aux_ld = OC;
  g.d8 = out8;
  g.optional = true;
  bool ran = false;
  std::string why = "no algorithm";
  try {
    ran = lt_gemm(ctx, g, stream);
  } catch (const std::runtime_error& e) {
    why = e.what();
  }
  if (!ran)
    throw std::runtime_error("LLMC_FP8_GELU=epilogue: cuBLASLt ran no FP8 GEMM with a GELU_AUX_BIAS epilogue and an "
                             "E4M3 output for m=" + std::to_string(OC) + " n=" + std::to_string(BT) + " k=" +
                             std::to_string(C) + " (" + why + "); unset LLMC_FP8_GELU to run the GELU as a kernel");
}

// The fc layer with its GELU: pre_gelu (BT x OC) = inp weight^T + bias, out = gelu(pre_gelu) (tanh
// approximation). pre_gelu is what the layer's backward needs. With `epilogue`, cuBLASLt's GELU_AUX_BIAS
// epilogue computes both in one pass, out from the fp32 pre-activation; otherwise (or where
// cuBLASLt offers no such epilogue) a bias GEMM writes pre_gelu and the GELU kernel computes out
// from it as stored, exactly as a recompute in the backward pass does (gelu_forward).
inline void matmul_forward_gelu(BlasContext& ctx, floatX* out, floatX* pre_gelu, const floatX* inp,
                                const floatX* weight, const floatX* bias, int BT, int C, int OC, bool epilogue,
                                cudaStream_t stream) {
  if (epilogue) {
    LtGemm g = forward_gemm(out, inp, weight, bias, BT, C, OC);
    g.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    g.aux = pre_gelu;
    g.aux_ld = OC;
    g.optional = true;
    if (lt_gemm(ctx, g, stream)) return;
  }
  matmul_forward(ctx, pre_gelu, inp, weight, bias, BT, C, OC, stream);
  gelu_forward(out, pre_gelu, size_t(BT) * OC, stream);
}

// ---- Deterministic bias gradient: dbias[oc] += sum over rows of dout[row][oc] ----
//
// Pass 1: the rows are cut into fixed slices of kBiasRowsPerSlice; block (x, y) sums slice y over
// kWarpSize * x128::size columns in fp32 (each of its 8 warps takes every 8th row, each lane 16 bytes of
// columns) and the 8 warp sums are added in warp order. Pass 2: each block takes kWarpSize columns,
// one per lane; warp w adds slices w, w + kBiasFinishWarps, w + 2 kBiasFinishWarps, ... in that
// order, and lane c then adds the kBiasFinishWarps warp sums in warp order to dbias. Every sum's
// order depends only on (BT, OC), never on scheduling, so results are bitwise reproducible; no
// thread adds more than ceil(slices / kBiasFinishWarps) slices in a row (32 at B*T = 64K), where a
// serial sum over the slices took 1,024 dependent loads and ran on ceil(OC / 256) blocks.
// kBiasRowsPerSlice, bias_grad_slices and the scratch size are in kernel_scratch.h (the memory plan
// needs them too).
constexpr int kBiasWarps = 8;
constexpr int kBiasFinishWarps = 32;

// Where the partial sums read their rows' vectors: dout itself, or (GeluBackwardRows) the GELU
// backward's output, which it computes and stores as it goes.
template <class T>
struct StoredRows {
  const T* dout;
  __device__ Packed128<T> operator()(size_t at) const { return load128cs(dout + at); }
};
template <class T>
struct GeluBackwardRows {
  T* dinp;
  const T* pre_gelu;
  const T* dout;
  T* gelu_out;
  __device__ Packed128<T> operator()(size_t at) const {
    return gelu_backward_vector<T>(dinp, pre_gelu, dout, at, gelu_out);
  }
};

// With fp8.data, the FP8 copy of each vector read, its amax recorded per warp.
template <class T, class Rows>
__global__ void bias_grad_partial_kernel(float* partial, Rows rows, int BT, int OC, Fp8Sink fp8) {
  using x128 = Packed128<T>;
  constexpr int kCols = kWarpSize * x128::size;
  LLMC_SHARED(float, sums, [kBiasWarps][kCols]);
  const int lane = threadIdx.x, warp = threadIdx.y;
  const int block_col = blockIdx.x * kCols;
  const int col = block_col + lane * x128::size;
  const int row_end = min(BT, int(blockIdx.y + 1) * kBiasRowsPerSlice);
  float acc[x128::size] = {};
  float amax = 0.0f;
  if (col < OC) {
    for (int r = blockIdx.y * kBiasRowsPerSlice + warp; r < row_end; r += kBiasWarps) {
      const x128 v = rows(size_t(r) * OC + col);
#pragma unroll
      for (int k = 0; k < x128::size; ++k) acc[k] += static_cast<float>(v[k]);
      if (fp8.data) amax = fmaxf(amax, fp8_store_vector(fp8, size_t(r) * OC + col, v));
    }
  }
  // Blocks are kBiasWarps rows of kWarpSize lanes: threadIdx.y is the warp.
  if (fp8.amax) fp8_record_warp_amax(fp8.amax, amax, (blockIdx.y * gridDim.x + blockIdx.x) * kBiasWarps + warp);
#pragma unroll
  for (int k = 0; k < x128::size; ++k) sums[warp][lane * x128::size + k] = acc[k];
  __syncthreads();
  for (int c = warp * kWarpSize + lane; c < kCols; c += kBiasWarps * kWarpSize) {
    if (block_col + c >= OC) break;
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kBiasWarps; ++w) s += sums[w][c];
    partial[size_t(blockIdx.y) * OC + block_col + c] = s;
  }
}

template <class T>
__global__ void bias_grad_finish_kernel(T* dbias, const float* partial, int slices, int OC) {
  LLMC_SHARED(float, sums, [kBiasFinishWarps][kWarpSize]);
  const int lane = threadIdx.x, warp = threadIdx.y;
  const int c = blockIdx.x * kWarpSize + lane;
  float s = 0.0f;
  if (c < OC)
    for (int i = warp; i < slices; i += kBiasFinishWarps) s += partial[size_t(i) * OC + c];
  sums[warp][lane] = s;
  __syncthreads();
  if (warp != 0 || c >= OC) return;
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kBiasFinishWarps; ++w) total += sums[w][lane];
  dbias[c] = T(static_cast<float>(dbias[c]) + total);
}

// dbias (OC) += the slices' partial sums in the scratch. (Not part of the template below: g++, which
// compiles the emulated GPU's kernels, leaves a kernel template named only inside another template's
// launch uninstantiated.)
inline void bias_grad_finish(floatX* dbias, const float* partial, int BT, int OC, cudaStream_t stream) {
  launch<bias_grad_finish_kernel<floatX>>(ceil_div(OC, kWarpSize), dim3(kWarpSize, kBiasFinishWarps), 0, stream, dbias,
                                          partial, bias_grad_slices(BT), OC);
}

// dbias (OC) += column sums of the BT x OC vectors `rows` gives, and with fp8.data their FP8 copy.
template <class Rows>
inline void bias_grad_sums(floatX* dbias, float* scratch, Rows rows, int BT, int OC, cudaStream_t stream,
                           const Fp8Sink& fp8) {
  require_whole_vectors("matmul_bias_grad", "output channels", size_t(OC));
  constexpr int kCols = kWarpSize * Packed128<floatX>::size;
  const dim3 grid(ceil_div(OC, kCols), bias_grad_slices(BT));
  launch<bias_grad_partial_kernel<floatX, Rows>>(grid, dim3(kWarpSize, kBiasWarps), 0, stream, scratch, rows, BT, OC,
                                                 fp8);
  bias_grad_finish(dbias, scratch, BT, OC, stream);
}

// dbias (OC) += column sums of dout (BT x OC), and with dout_fp8.data dout's FP8 copy. OC must be a
// multiple of 16 / sizeof(floatX); scratch holds matmul_bias_grad_scratch_floats(BT, OC) floats.
inline void matmul_bias_grad(floatX* dbias, float* scratch, const floatX* dout, int BT, int OC, cudaStream_t stream,
                             const Fp8Sink& dout_fp8 = {}) {
  bias_grad_sums(dbias, scratch, StoredRows<floatX>{dout}, BT, OC, stream, dout_fp8);
}

// gelu_backward (dinp = gelu'(pre_gelu) * dout, BT x OC; dinp may alias dout; with gelu_out,
// gelu(pre_gelu) there) and dbias += dinp's column sums in one pass: the bias-gradient kernels
// computing the GELU backward's vectors as they read them. The same dinp, FP8 copy (with
// dinp_fp8.data), amax and dbias, bit for bit, as gelu_backward then matmul_bias_grad on its
// output: the same values, summed in the same order.
inline void gelu_backward_bias_grad(floatX* dinp, const floatX* pre_gelu, const floatX* dout, floatX* dbias,
                                    float* scratch, int BT, int OC, cudaStream_t stream, const Fp8Sink& dinp_fp8 = {},
                                    floatX* gelu_out = nullptr) {
  bias_grad_sums(dbias, scratch, GeluBackwardRows<floatX>{dinp, pre_gelu, dout, gelu_out}, BT, OC, stream, dinp_fp8);
}

// The arguments of a fully connected layer's backward (the backend's linear_backward, and
// matmul_backward_input's part of them), where the forward was
// out (BT x OC) = inp (BT x C) weight^T + bias.
struct MatmulBackward {
  floatX* dinp = nullptr;     // BT x C, overwritten
  floatX* dweight = nullptr;  // OC x C, accumulated
  floatX* dbias = nullptr;    // OC, accumulated; null: no bias
  // With dbias: the gradient partial-sums scratch, matmul_bias_grad_scratch_floats(BT, OC) floats
  // (kernel_scratch.h: its counter is left alone).
  float* bias_scratch = nullptr;
  const floatX* dout = nullptr;   // BT x OC
  const floatX* inp = nullptr;
  const floatX* weight = nullptr;
  // BT x C: inp was gelu(pre_gelu), and dinp comes out multiplied by gelu'(pre_gelu), the gradient
  // of the pre-activation; null: inp is not a GELU's output.
  const floatX* pre_gelu = nullptr;
  int BT = 0, C = 0, OC = 0;
  // gelu' through cuBLASLt's DGELU epilogue (one rounding) rather than the GELU backward kernel.
  bool dgelu_epilogue = false;
  // --fp8 1: dinp from FP8 copies, dout8 (E5M2, dout's) and weight_t8 (E4M3, weight^T: C x OC, the TN
  // layout cuBLASLt takes FP8 in), when dout8.data is set; the weight gradient stays floatX.
  Fp8Matrix dout8{}, weight_t8{};
  // --fp8 1 with pre_gelu: the GELU backward kernel also writes dinp's FP8 copy here (the next
  // GEMM's operand); the DGELU epilogue, which cannot, is not used then.
  Fp8Sink dinp_fp8{};
  // --fp8 1: dout's FP8 copy (what dout8 then reads), cast on its own, or with dout_fp8_by_bias_grad
  // written by the bias-gradient kernels as they read dout, where they run (dbias set). Null data:
  // the caller's producer wrote it.
  Fp8Sink dout_fp8{};
  bool dout_fp8_by_bias_grad = false;
  // The bias gradient (C) of the layer whose output pre_gelu was (the fc layer's), accumulated with
  // the column sums of dinp, the pre-activation's gradient, by the GELU backward kernel as it writes
  // them (gelu_backward_bias_grad), rather than by the bias-gradient kernels reading dinp again. Needs
  // bias_scratch and the GELU backward kernel: pre_gelu without the DGELU epilogue (dgelu_epilogue
  // false, or dinp_fp8 set: --fp8 1). Null: the caller sums it (the fc layer's own backward).
  floatX* dbias_pre_gelu = nullptr;
  // With pre_gelu and the GELU backward as a kernel (--fp8 1): inp, gelu(pre_gelu), is not stored
  // yet (LLMC_FP8_GELU=epilogue: the forward kept it in FP8 only); the GELU backward kernel writes
  // it as it reads pre_gelu, and the weight gradient runs after the input gradient.
  bool inp_by_gelu_backward = false;
};

// dinp = dout weight, times gelu'(pre_gelu) when pre_gelu is set: by the DGELU epilogue when
// dgelu_epilogue (and not dinp_fp8, which it cannot write) and cuBLASLt offers one for these types,
// otherwise by the GELU backward kernel, in place; with dbias_pre_gelu that kernel also sums dinp's
// columns into it. Reads only dinp, dout, inp (with inp_by_gelu_backward), weight, pre_gelu,
// dbias_pre_gelu, bias_scratch, the sizes, dgelu_epilogue, inp_by_gelu_backward and the FP8 fields
// of `p`.
inline void matmul_backward_input(BlasContext& ctx, const MatmulBackward& p, cudaStream_t stream) {
  if (p.inp_by_gelu_backward && (!p.pre_gelu || !p.dinp_fp8.data))
    throw std::invalid_argument("matmul_backward_input: inp_by_gelu_backward needs the GELU backward kernel "
                                "(pre_gelu, under --fp8 1)");
  const bool try_dgelu_epilogue = p.pre_gelu && p.dgelu_epilogue && !p.dinp_fp8.data;
  if (p.dbias_pre_gelu && (!p.pre_gelu || try_dgelu_epilogue))
    throw std::invalid_argument("matmul_backward_input: dbias_pre_gelu needs the GELU backward kernel (pre_gelu, "
                                "without the DGELU epilogue, which cannot sum the bias gradient)");
  LtGemm g{.d = p.dinp, .a = p.weight, .b = p.dout, .m = p.C, .n = p.BT, .k = p.OC, .lda = p.C, .ldb = p.OC,
           .ldd = p.C};
  if (p.dout8.data) {
    // dinp_c (C x BT) = (weight^T)_c^T dout_c: A = weight_t8 stored OC x C column-major, op T.
    g.a = g.b = nullptr;
    g.transpose_a = true;
    g.lda = p.OC;
    g.fp8 = true;
    g.a8 = p.weight_t8;
    g.b8 = p.dout8;
  }
  if (try_dgelu_epilogue) {
    LtGemm dgelu = g;
    dgelu.epilogue = CUBLASLT_EPILOGUE_DGELU;
    dgelu.aux = const_cast<floatX*>(p.pre_gelu);
    dgelu.aux_ld = p.C;
    dgelu.optional = true;
    if (lt_gemm(ctx, dgelu, stream)) return;
  }
  lt_gemm(ctx, g, stream);
  if (!p.pre_gelu) return;
  floatX* gelu_out = p.inp_by_gelu_backward ? const_cast<floatX*>(p.inp) : nullptr;
  if (p.dbias_pre_gelu)
    gelu_backward_bias_grad(p.dinp, p.pre_gelu, p.dinp, p.dbias_pre_gelu, p.bias_scratch, p.BT, p.C, stream,
                            p.dinp_fp8, gelu_out);
  else
    gelu_backward(p.dinp, p.pre_gelu, p.dinp, size_t(p.BT) * p.C, stream, p.dinp_fp8, gelu_out);
}

// The dweight mapping above: dweight (OC x C) += dout^T inp, no epilogue (lt_gemm runs it).
inline LtGemm weight_grad_gemm(floatX* dweight, const floatX* dout, const floatX* inp, int BT, int C, int OC) {
  return {.d = dweight, .a = inp, .b = dout, .m = C, .n = OC, .k = BT, .transpose_b = true, .lda = C, .ldb = OC,
          .ldd = C, .accumulate = true};
}

}  // namespace llmc
