// The arithmetic under the emulated cuBLAS and cuBLASLt (blas_api.cpp): one column-major product
// op(A) op(B) accumulated in fp32, for operands in fp32, bf16 or one of the two FP8 formats. What
// the libraries add around it (scaling, C, epilogues, the rounding to the output type) is theirs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace emu {

// How an operand's elements are stored: fp32, bf16 (fp32's upper 16 bits), or the OCP 8-bit
// floating point formats E4M3 and E5M2 (fp8_to_float).
enum class ElementType { fp32, bf16, e4m3, e5m2 };

// A column-major matrix operand as cuBLAS names it: element (r, c) of the stored matrix is at
// data[r + c * ld]; op(X) is X or, when `transposed`, X^T.
struct GemmOperand {
  const void* data;
  ElementType type;
  long long ld;
  bool transposed;
};

// acc (m x n, column-major, leading dimension m) = op(A) op(B), op(A) m x k, op(B) k x n, every
// product and sum in fp32. The order of the sums is the emulator's own (a GPU's is its kernel's).
void gemm_fp32(std::vector<float>& acc, const GemmOperand& a, const GemmOperand& b, int m, int n, int k);

// Element (r, c) of a stored matrix operand (ignoring `transposed`), as fp32.
float operand_at(const GemmOperand& x, long long r, long long c);

// The value of an 8-bit float, E5M2 when `e5m2`, else E4M3, exactly (every FP8 value is an fp32),
// from the OCP 8-bit floating point specification: sign, exponent and mantissa bits S.EEEE.MMM
// (E4M3, bias 7) or S.EEEEE.MM (E5M2, bias 15); a zero exponent field is subnormal, m / 2^mbits
// times 2^(1 - bias). E4M3 has no infinities and one NaN per sign, S.1111.111 (so its largest
// value is S.1111.110 = 448); E5M2's all-ones exponent is IEEE's, infinity with mantissa 0 and NaN
// otherwise (largest 57344).
float fp8_to_float(uint8_t bits, bool e5m2);

}  // namespace emu
