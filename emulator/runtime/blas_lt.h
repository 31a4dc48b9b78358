// cuBLASLt's matmul on the emulated GPU, as blas_api.cpp's calls describe it and blas_lt_run.cpp
// computes it: the descriptor and layouts the API records, the epilogues, the element access of
// fp32 and bf16 operands, and the GEMM itself.
#pragma once
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

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
inline void store(void* p, cudaDataType_t type, size_t i, float v) {
  if (type == CUDA_R_32F)
    static_cast<float*>(p)[i] = v;
  else
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(v);
}

// D = alpha scale_A scale_B op(A) op(B) + beta scale_C C and the epilogue, on host-visible device
// memory, each scale 1 unless set; amax_D, when set, gets the largest |x| over D's elements x as
// computed in fp32 after the epilogue, before their rounding to D's type. `c` may equal `d` (the
// product is formed in full before D is written).
void run_lt(const LtDesc& o, const LtShape& s, float alpha, const void* a, const LtLayout& la, const void* b,
            const LtLayout& lb, float beta, const void* c, const LtLayout& lc, void* d, const LtLayout& ld);

}  // namespace emu
