// CUBLAS_CHECK: a cuBLAS or cuBLASLt status other than success as a std::runtime_error naming the call site.
#pragma once
#include <cublas_v2.h>

#include <stdexcept>
#include <string>

namespace llmc {

inline void cublas_check(cublasStatus_t status, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS error at ") + file + ":" + std::to_string(line) + ": " +
                             cublasGetStatusString(status));
}
#define CUBLAS_CHECK(call) ::llmc::cublas_check((call), __FILE__, __LINE__)

}  // namespace llmc
