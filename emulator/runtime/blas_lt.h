// cuBLASLt's matmul on the emulated GPU, as blas_api.cpp's calls describe it, blas_fp8_rules.cpp
// checks its FP8 forms and blas_lt_run.cpp computes it: the descriptor and layouts the API records,
// the epilogues, the element access of fp32, bf16 and E4M3 operands, and the GEMM itself.
#pragma once
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "emulator/runtime/gemm.h"

namespace emu {

struct LtDesc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  int32_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void* bias = nullptr;
  // CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: -1 (the default) is D's type.
  int32_t bias_type = -1;
  void* aux = nullptr;
  int64_t aux_ld = 0;
  // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: -1 (the default) is D's type.
  int32_t aux_type = -1;
  // CUBLASLT_MATMUL_DESC_{A,B,C,D}_SCALE_POINTER and _AMAX_D_POINTER: device floats, null meaning
  // a scale of 1 and no amax. Only FP8 matmuls take them (check_scales).
  const float* scales[4] = {nullptr, nullptr, nullptr, nullptr};  // A, B, C, D
  float* amax_d = nullptr;
};
struct LtLayout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
};

enum class EpilogueKind { plain, bias, gelu, gelu_bias, gelu_aux, gelu_aux_bias, dgelu, dgelu_bgrad, bgrada, bgradb };
inline bool epilogue_kind(uint32_t e, EpilogueKind& kind) {
  switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: kind = EpilogueKind::plain; return true;
    case CUBLASLT_EPILOGUE_BIAS: kind = EpilogueKind::bias; return true;
    case CUBLASLT_EPILOGUE_GELU: kind = EpilogueKind::gelu; return true;
    case CUBLASLT_EPILOGUE_GELU_BIAS: kind = EpilogueKind::gelu_bias; return true;
    case CUBLASLT_EPILOGUE_GELU_AUX: kind = EpilogueKind::gelu_aux; return true;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: kind = EpilogueKind::gelu_aux_bias; return true;
    case CUBLASLT_EPILOGUE_DGELU: kind = EpilogueKind::dgelu; return true;
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: kind = EpilogueKind::dgelu_bgrad; return true;
    case CUBLASLT_EPILOGUE_BGRADA: kind = EpilogueKind::bgrada; return true;
    case CUBLASLT_EPILOGUE_BGRADB: kind = EpilogueKind::bgradb; return true;
    default: return false;
  }
}
inline bool uses_bias(EpilogueKind k) { return k != EpilogueKind::plain && k != EpilogueKind::gelu &&
                                        k != EpilogueKind::gelu_aux && k != EpilogueKind::dgelu; }
inline bool uses_aux(EpilogueKind k) {
  return k == EpilogueKind::gelu_aux || k == EpilogueKind::gelu_aux_bias || k == EpilogueKind::dgelu ||
         k == EpilogueKind::dgelu_bgrad;
}

struct LtShape {
  uint64_t m, n, k;
  EpilogueKind kind;
};

inline ElementType element_type(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_16BF: return ElementType::bf16;
    case CUDA_R_8F_E4M3: return ElementType::e4m3;
    case CUDA_R_8F_E5M2: return ElementType::e5m2;
    default: return ElementType::fp32;
  }
}

inline float load(const void* p, cudaDataType_t type, size_t i) {
  if (type == CUDA_R_32F) return static_cast<const float*>(p)[i];
  return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}
// An E4M3 D holds sat(v * D scale) (cublasLt.h, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER: the scale
// converts the result to D's range), rounded to nearest even and saturated to 448, as NVIDIA's
// own conversion (cuda_fp8.h, __NV_SATFINITE) does.
inline void store(void* p, cudaDataType_t type, size_t i, float v, float d_scale = 1.0f) {
  if (type == CUDA_R_32F)
    static_cast<float*>(p)[i] = v;
  else if (type == CUDA_R_8F_E4M3)
    static_cast<__nv_fp8_storage_t*>(p)[i] = __nv_cvt_float_to_fp8(v * d_scale, __NV_SATFINITE, __NV_E4M3);
  else
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(v);
}

inline bool is_fp8(cudaDataType_t t) { return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2; }
// The type of the GELU aux matrix: the descriptor's, or D's by default.
inline cudaDataType_t aux_type_of(const LtDesc& o, cudaDataType_t d_type) {
  return o.aux_type == -1 ? d_type : cudaDataType_t(o.aux_type);
}

// Prints the call and why it failed on stderr; returns `status`.
cublasStatus_t fail(cublasStatus_t status, const std::string& what);
// The largest power of two up to 256 that divides the address.
uint32_t alignment_of(const void* p);
// blas_fp8_rules.cpp: the documented FP8 forms (check_fp8, for both the heuristic query and the
// matmul), and which scale and amax pointers a GEMM takes (check_scales, the matmul's).
cublasStatus_t check_fp8(const char* call, const LtDesc& o, const LtLayout& la, const LtLayout& lb, const LtLayout& lc,
                         const LtLayout& ld);
cublasStatus_t check_scales(const char* call, const LtDesc& o, bool fp8, cudaDataType_t d_type);

// blas_lt_run.cpp: D = alpha scale_A scale_B op(A) op(B) + beta scale_C C and the epilogue.
void run_lt(const LtDesc& o, const LtShape& s, float alpha, const void* a, const LtLayout& la, const void* b,
            const LtLayout& lb, float beta, const void* c, const LtLayout& lc, void* d, const LtLayout& ld);

}  // namespace emu
