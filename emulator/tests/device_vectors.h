// Device arrays for the emulator's tests: allocated, filled from the host and read back, each step
// REQUIREd to succeed.
#pragma once
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

template <class T>
T* device_array(size_t n) {
  T* p = nullptr;
  REQUIRE(cudaMalloc(&p, n * sizeof(T)) == cudaSuccess);
  return p;
}

template <class T>
T* upload(const std::vector<T>& host) {
  T* p = device_array<T>(host.size());
  REQUIRE(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  return p;
}

template <class T>
std::vector<T> download(const T* dev, size_t n) {
  std::vector<T> host(n);
  REQUIRE(cudaMemcpy(host.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
  return host;
}
