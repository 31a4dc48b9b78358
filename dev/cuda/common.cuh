// Benchmark harness shared by every dev/cuda/<family>.cu: random inputs, host<->device copies in
// any element type, NaN poisoning, error measurement against a CPU reference, and event timing.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <string>
#include <vector>

#include "dev/cuda/command_line.cuh"
#include "llmc/cuda/common.cuh"

namespace bench {

// splitmix64: a tiny counter-based generator, so every benchmark's inputs depend only on its seed.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [lo, hi), never exactly zero: zeros hide unwritten outputs and wrong indexing.
inline std::vector<float> random_vector(size_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  std::vector<float> v(n);
  uint64_t state = seed;
  for (size_t i = 0; i < n; ++i) {
    float u = float(splitmix64(state) >> 40) * (1.0f / 16777216.0f);
    float x = lo + (hi - lo) * u;
    if (x == 0.0f) x = 0.5f * (hi != 0.0f ? hi : lo);
    v[i] = x;
  }
  return v;
}

// Random integers in [0, n), for token ids and targets.
inline std::vector<int> random_ints(size_t count, int n, uint64_t seed) {
  std::vector<int> v(count);
  uint64_t state = seed;
  for (auto& x : v) x = int(splitmix64(state) % uint64_t(n));
  return v;
}

// Converts to T, allocates, copies; the caller frees (free_device). T is float or __nv_bfloat16,
// whose conversions from and to float (round to nearest even) work on the host too.
template <class T>
T* to_device(const std::vector<float>& host) {
  std::vector<T> converted(host.begin(), host.end());
  T* dev = nullptr;
  CUDA_CHECK(cudaMalloc(&dev, std::max<size_t>(1, host.size()) * sizeof(T)));
  CUDA_CHECK(cudaMemcpy(dev, converted.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return dev;
}

// Integer buffers (token ids) go up unconverted.
inline int* to_device_ints(const std::vector<int>& host) {
  int* dev = nullptr;
  CUDA_CHECK(cudaMalloc(&dev, std::max<size_t>(1, host.size()) * sizeof(int)));
  CUDA_CHECK(cudaMemcpy(dev, host.data(), host.size() * sizeof(int), cudaMemcpyHostToDevice));
  return dev;
}

// Overwrites the first host.size() elements of a device buffer with host values converted to T.
template <class T>
void upload(T* dev, const std::vector<float>& host) {
  T* fresh = to_device<T>(host);
  CUDA_CHECK(cudaMemcpy(dev, fresh, host.size() * sizeof(T), cudaMemcpyDeviceToDevice));
  CUDA_CHECK(cudaFree(fresh));
}

template <class T>
std::vector<float> from_device(const T* dev, size_t n) {
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<T> raw(n);
  CUDA_CHECK(cudaMemcpy(raw.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost));
  return std::vector<float>(raw.begin(), raw.end());
}

// Rounds a host vector through T, so the CPU reference sees exactly the inputs the GPU sees.
template <class T>
std::vector<float> round_through(const std::vector<float>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = float(T(v[i]));
  return out;
}

// cudaFree of buffers of any element types (each from cudaMalloc, or null).
inline void free_device(std::initializer_list<void*> buffers) {
  for (void* p : buffers) CUDA_CHECK(cudaFree(p));
}

// 0xFF bytes are NaN in fp32 and bf16 alike, so any element a kernel fails to write fails the check.
inline void poison(void* dev, size_t bytes) {
  CUDA_CHECK(cudaMemset(dev, 0xFF, bytes));
}

// ||got - ref|| / ||ref|| in double; any NaN/inf or a size mismatch gives +inf.
inline double rel_l2_error(const std::vector<float>& got, const std::vector<float>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    double d = double(got[i]) - double(ref[i]);
    num += d * d;
    den += double(ref[i]) * double(ref[i]);
  }
  if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
  return std::sqrt(num / den);
}

inline bool check(const std::string& what, const std::vector<float>& got,
                  const std::vector<float>& ref, double tol) {
  double err = rel_l2_error(got, ref);
  bool ok = err < tol;
  fmt::print("{}  {}  rel_err={:.3e} (tol {:.0e})\n", ok ? "PASS" : "FAIL", what, err, tol);
  return ok;
}

// Bitwise equality, for kernels that promise deterministic results (same inputs, same output).
inline bool check_identical(const std::string& what, const std::vector<float>& a, const std::vector<float>& b) {
  bool ok = a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  fmt::print("{}  {}  bitwise identical over two runs\n", ok ? "PASS" : "FAIL", what);
  return ok;
}

// --reps N from the command line replaces every timing's repetition count (0: each keeps its own).
inline int reps_override = 0;

// A device buffer twice the L2 cache's size: writing all of it before a timed launch leaves none of
// the launch's inputs in L2, so each repetition reads them from device memory as the trainer does
// (where the layers between two calls of a kernel evict its data) instead of from a warm cache.
class L2Flush {
 public:
  L2Flush() {
    int device = 0;
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    bytes_ = 2 * static_cast<size_t>(std::max(prop.l2CacheSize, 1));
    CUDA_CHECK(cudaMalloc(&buffer_, bytes_));
  }
  ~L2Flush() { cudaFree(buffer_); }
  size_t bytes() const { return bytes_; }
  L2Flush(const L2Flush&) = delete;
  L2Flush& operator=(const L2Flush&) = delete;
  void operator()(int round) const { CUDA_CHECK(cudaMemsetAsync(buffer_, round & 0xFF, bytes_, 0)); }

 private:
  void* buffer_ = nullptr;
  size_t bytes_ = 0;
};

// One buffer for the program's life (a static of this function, not of the template time_ms, which
// would hold one per launch type): allocating twice the L2 for every timing cost more than the
// kernels timed at small shapes.
inline const L2Flush& l2_flush() {
  static const L2Flush flush;
  return flush;
}

// Set by the first timing, which says how the times are taken.
inline bool timings_announced = false;

// Median of `reps` event-timed launches on the default stream, after `warmup` untimed ones, with
// L2 flushed before each timed launch (outside the events).
template <class F>
float time_ms(F&& launch, int warmup = 10, int reps = 100) {
  if (reps_override > 0) {
    reps = reps_override;
    warmup = std::min(warmup, reps);
  }
  const L2Flush& flush_l2 = l2_flush();
  if (!timings_announced)
    fmt::print("timings: median of {} runs, L2 ({} MiB) flushed before each\n", reps, flush_l2.bytes() / 2 >> 20);
  timings_announced = true;
  for (int i = 0; i < warmup; ++i) launch();
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> times(reps);
  for (int i = 0; i < reps; ++i) {
    flush_l2(i);
    CUDA_CHECK(cudaEventRecord(start));
    launch();
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    CUDA_CHECK(cudaEventElapsedTime(&times[i], start, stop));
  }
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  std::nth_element(times.begin(), times.begin() + reps / 2, times.end());
  return times[reps / 2];
}

// One timing line: the time, the bytes moved as GB/s and, for versions that count them, TFLOP/s.
inline void report(const std::string& version, float ms, double bytes, double flops) {
  double seconds = double(ms) * 1e-3;
  std::string line = fmt::format("{:<36} {:9.4f} ms  {:8.1f} GB/s", version, ms, bytes / seconds * 1e-9);
  if (flops > 0) line += fmt::format("  {:7.2f} TFLOP/s", flops / seconds * 1e-12);
  fmt::print("{}\n", line);
}

// The whole main() of a benchmark: parses the command line against the family's shape flags and
// versions (command_line.cuh) and runs `run(args)`, which returns whether every check passed: exit
// 0 if so, 1 if not. An exception (a CUDA, cuBLAS or cuDNN error, a shape a kernel refuses) ends the
// run with `error: ...` on stderr and exit 1.
template <class Run>
int run_main(int argc, char** argv, const std::vector<Dim>& shape, const std::vector<VersionInfo>& versions,
             Run&& run) {
  try {
    const Args args = parse_args(argc, argv, shape, versions);
    reps_override = args.reps;
    return run(args) ? 0 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace bench
