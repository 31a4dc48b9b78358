// Sum of squares of a gradient buffer (global norm before clipping): versions checked against a
// double-precision host sum, for floatX and fp32 gradients, then timed.
//   v1  fixed grid, grid-stride scalar loads, block partials, fixed-order finish
//   v2  llmc/cuda/global_norm.cuh: same, with 16-byte vector loads
// Also checked: bitwise determinism, and two buffers accumulated into the same partials.
#include "dev/cuda/common.cuh"
#include "llmc/cuda/global_norm.cuh"

using llmc::floatX;

namespace {

constexpr size_t kN = 124475904;  // GPT-2 124M gradients with the vocabulary padded to 50304

template <class T>
__global__ void global_norm_partial_naive(float* partials, const T* values, size_t n) {
  __shared__ float scratch[32];
  float sum = 0.0f;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    sum += float(values[i]) * float(values[i]);
  sum = llmc::block_reduce_sum(sum, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

template <class T>
void launch(const std::string& v, float* out, float* partials, const T* values) {
  if (v == "v1") {
    global_norm_partial_naive<<<llmc::kGlobalNormBlocks, llmc::kGlobalNormThreads>>>(partials, values, kN);
    CUDA_CHECK_LAST();
    llmc::global_norm_squared_finish(out, partials, 0);
  } else {
    llmc::global_norm_squared(out, partials, values, kN, 0);
  }
}

template <class T>
bool check_and_time(const bench::Args& args, const std::string& type, uint64_t seed, float* d_out, float* d_partials) {
  bool ok = true;
  const auto host = bench::round_through<T>(bench::random_vector(kN, seed));
  double ref = 0.0;
  for (float x : host) ref += double(x) * double(x);
  T* d_values = bench::to_device<T>(host);

  for (const std::string v : {"v1", "v2"}) {
    if (!bench::selected(args, v)) continue;
    bench::poison(d_out, sizeof(float));
    bench::poison(d_partials, llmc::kGlobalNormBlocks * sizeof(float));
    launch(v, d_out, d_partials, d_values);
    const auto got = bench::from_device(d_out, 1);
    ok &= bench::check("global_norm " + v + " " + type, got, {float(ref)}, 1e-5);
    launch(v, d_out, d_partials, d_values);
    ok &= bench::check_identical("global_norm " + v + " " + type, bench::from_device(d_out, 1), got);
  }
  if (bench::selected(args, "v2")) {
    // The second buffer starts 16-byte aligned but has a length that is not a multiple of 8, so
    // the tail path is exercised too.
    const size_t half = kN / 16 * 8 - 8;
    static_assert((kN / 16 * 8 - 8) % 8 == 0 && (kN - (kN / 16 * 8 - 8) - 3) % 8 != 0);
    bench::poison(d_partials, llmc::kGlobalNormBlocks * sizeof(float));
    llmc::global_norm_squared_partial(d_partials, d_values, half, false, 0);
    llmc::global_norm_squared_partial(d_partials, d_values + half, kN - half - 3, true, 0);
    llmc::global_norm_squared_partial(d_partials, d_values + kN - 3, 3, true, 0);
    llmc::global_norm_squared_finish(d_out, d_partials, 0);
    ok &= bench::check("global_norm v2 " + type + " three buffers accumulated (with tails)",
                       bench::from_device(d_out, 1), {float(ref)}, 1e-5);
  }

  if (!args.check_only && ok) {
    // Every value read once; flops: one multiply-add per element.
    for (const std::string v : {"v1", "v2"})
      if (bench::selected(args, v))
        bench::report("global_norm " + v + " " + type, bench::time_ms([&] { launch(v, d_out, d_partials, d_values); }),
                      double(kN) * sizeof(T), 2.0 * kN);
  }
  CUDA_CHECK(cudaFree(d_values));
  return ok;
}

bool run(const bench::Args& args) {
  float* d_out = bench::to_device<float>({1.0f});
  float* d_partials = bench::to_device<float>(std::vector<float>(llmc::kGlobalNormBlocks, 1.0f));
  bool ok = check_and_time<floatX>(args, "floatX", 51, d_out, d_partials);
  ok &= check_and_time<float>(args, "fp32", 52, d_out, d_partials);
  bench::free_device({d_out, d_partials});
  return ok;
}

}  // namespace

int main(int argc, char** argv) { return bench::run_main(argc, argv, {"v1", "v2"}, run); }
