// A kernel launch for the emulator's tests, REQUIREd to succeed.
#pragma once
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cstddef>
#include <utility>

#include "llmc/cuda/common.cuh"

// Launches on the default stream, then requires that the launch and the kernel succeeded.
template <auto Kernel, class... Args>
void launch_ok(dim3 grid, dim3 block, size_t shared, Args&&... args) {
  llmc::launch<Kernel>(grid, block, shared, 0, std::forward<Args>(args)...);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
}
