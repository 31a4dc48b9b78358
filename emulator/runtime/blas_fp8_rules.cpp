// The emulated cublasLtMatmul's FP8 rules (blas_lt.h): which FP8 matmuls it takes, and which scale
// and amax pointers a matmul may carry, from NVIDIA's cuBLAS documentation (cublasLtMatmul, FP8;
// cublasLtMatmulDescAttributes_t).
#include <string>

#include "emulator/runtime/blas_lt.h"
#include "emulator/runtime/device_memory.h"

namespace emu {

// Compute capability 8.9 or newer; A and B both FP8, but not both E5M2; the "TN" layout, A
// transposed and B not; leading dimensions of A and B multiples of 16 elements. Of the documented C
// and D types the emulator has C BF16 with D BF16 or E4M3 (the FP8 output, scaled by the D scale),
// and of the epilogues DEFAULT and BIAS, and GELU_AUX_BIAS with an E4M3 D whose aux (the
// pre-activation) is BF16: the form Transformer Engine asks of cuBLASLt for a GELU after an FP8
// GEMM (an FP8 aux it does not ask for). Each refusal is NOT_SUPPORTED: the library has no kernel
// for it, or the emulator does not emulate it.
cublasStatus_t check_fp8(const char* call, const LtDesc& o, const LtLayout& la, const LtLayout& lb, const LtLayout& lc,
                         const LtLayout& ld) {
  const std::string fp8 = std::string(call) + ": FP8 matmul: ";
  const int capability = compute_capability();
  if (capability < 89)
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, fp8 + "needs compute capability 8.9 or newer, the device has " +
                                                 std::to_string(capability / 10) + "." +
                                                 std::to_string(capability % 10));
  if (!is_fp8(la.type) || !is_fp8(lb.type))
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, fp8 + "A and B must both be FP8 (E4M3 or E5M2)");
  if (la.type == CUDA_R_8F_E5M2 && lb.type == CUDA_R_8F_E5M2)
    return fail(CUBLAS_STATUS_NOT_SUPPORTED,
                fp8 + "A and B both E5M2 has no kernel (E4M3 x E4M3, E4M3 x E5M2 and E5M2 x E4M3 have)");
  if (o.trans_a != CUBLAS_OP_T || o.trans_b != CUBLAS_OP_N)
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, fp8 + "A must be transposed and B not (the TN layout)");
  if (la.ld % 16 != 0 || lb.ld % 16 != 0)
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, fp8 + "the leading dimensions of A and B (" + std::to_string(la.ld) +
                                                 ", " + std::to_string(lb.ld) + ") must be multiples of 16");
  if (lc.type != CUDA_R_16BF || (ld.type != CUDA_R_16BF && ld.type != CUDA_R_8F_E4M3))
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, fp8 + "C other than BF16, or D other than BF16 or E4M3, is not emulated");
  const bool fp8_out = ld.type == CUDA_R_8F_E4M3;
  if (o.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS && fp8_out) {
    if (aux_type_of(o, ld.type) != CUDA_R_16BF)
      return fail(CUBLAS_STATUS_NOT_SUPPORTED,
                  fp8 + "GELU_AUX_BIAS with an E4M3 D is emulated with a BF16 aux only "
                        "(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE; unset, it is D's type)");
  } else if (o.epilogue != CUBLASLT_EPILOGUE_DEFAULT && o.epilogue != CUBLASLT_EPILOGUE_BIAS) {
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, fp8 + "epilogue " + std::to_string(o.epilogue) +
                                                 " is not emulated for FP8 (DEFAULT and BIAS are, and "
                                                 "GELU_AUX_BIAS with an E4M3 D)");
  }
  return CUBLAS_STATUS_SUCCESS;
}

// Documented for every scale and amax pointer: set on a GEMM whose types do not take it, it makes
// cublasLtMatmul return INVALID_VALUE. The A, B and C scales and amax_D are FP8 matmuls'; the D
// scale converts the result to D's range, so only an FP8 D takes it.
cublasStatus_t check_scales(const char* call, const LtDesc& o, bool fp8, cudaDataType_t d_type) {
  const char* names[] = {"CUBLASLT_MATMUL_DESC_A_SCALE_POINTER", "CUBLASLT_MATMUL_DESC_B_SCALE_POINTER",
                         "CUBLASLT_MATMUL_DESC_C_SCALE_POINTER", "CUBLASLT_MATMUL_DESC_D_SCALE_POINTER"};
  for (int i = 0; i < 3; ++i)
    if (o.scales[i] && !fp8)
      return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(call) + ": " + names[i] + " is set, but A and B are not FP8");
  if (o.scales[3] && !is_fp8(d_type))
    return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(call) + ": " + names[3] + " is set, but D is not FP8");
  if (o.amax_d && !fp8)
    return fail(CUBLAS_STATUS_INVALID_VALUE,
                std::string(call) + ": CUBLASLT_MATMUL_DESC_AMAX_D_POINTER is set, but A and B are not FP8");
  // Not in the documentation, seen on an H100 (cuBLASLt 13.1, docs/gpu-runs.md): an FP8 matmul whose
  // A or B scale pointer lay 4 bytes off a 16-byte boundary returned NOT_SUPPORTED from
  // cublasLtMatmul, after the heuristic had offered the algorithm; 16-byte-aligned ones ran.
  for (int i = 0; i < 3; ++i)
    if (o.scales[i] && alignment_of(o.scales[i]) < 16)
      return fail(CUBLAS_STATUS_NOT_SUPPORTED, std::string(call) + ": " + names[i] + " is " +
                                                   std::to_string(alignment_of(o.scales[i])) +
                                                   "-byte aligned; FP8 kernels take scales on 16-byte boundaries");
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace emu
