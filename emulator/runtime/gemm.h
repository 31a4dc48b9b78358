// The arithmetic under the emulated cuBLAS and cuBLASLt (blas_api.cpp): one column-major product
// op(A) op(B) accumulated in fp32, for operands in fp32 or bf16. What the libraries add around it
// (scaling, C, epilogues, the rounding to the output type) is theirs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace emu {

// A column-major matrix operand as cuBLAS names it: element (r, c) of the stored matrix is at
// data[r + c * ld]; op(X) is X or, when `transposed`, X^T.
struct GemmOperand {
  const void* data;
  bool bf16;  // else fp32
  long long ld;
  bool transposed;
};

// acc (m x n, column-major, leading dimension m) = op(A) op(B), op(A) m x k, op(B) k x n, every
// product and sum in fp32. The order of the sums is the emulator's own (a GPU's is its kernel's).
void gemm_fp32(std::vector<float>& acc, const GemmOperand& a, const GemmOperand& b, int m, int n, int k);

// Element (r, c) of a stored matrix operand (ignoring `transposed`), as fp32.
float operand_at(const GemmOperand& x, long long r, long long c);

}  // namespace emu
