// Sum of squares of a gradient buffer (global norm before clipping): versions checked against a
// double-precision host sum, for floatX and fp32 gradients, then timed.
// The versions: kVersions at the end (or --help).
// Also checked: bitwise determinism, and two buffers accumulated into the same partials.
#include "dev/cuda/common.cuh"
#include "llmc/cuda/global_norm.cuh"

using llmc::floatX;

namespace {

constexpr size_t kSmallN = 100005;  // not whole vectors: the tail path

// The three-buffer check's split: the second buffer starts 16-byte aligned but has a length that is
// not a multiple of 8, so the tail path is exercised too (at the default -N as at kSmallN).
constexpr size_t first_part(size_t n) { return n / 16 * 8 - 8; }
static_assert(first_part(kSmallN) % 8 == 0 && (kSmallN - first_part(kSmallN) - 3) % 8 != 0);

template <class T>
__global__ void global_norm_partial_naive(float* partials, const T* values, size_t n) {
  LLMC_SHARED(float, scratch, [32]);
  float sum = 0.0f;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    sum += float(values[i]) * float(values[i]);
  sum = llmc::block_reduce_sum(sum, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

template <class T>
void launch(const std::string& v, size_t n, float* out, float* partials, const T* values) {
  if (v == "v1") {
    llmc::launch<global_norm_partial_naive<T>>(llmc::kGlobalNormBlocks, llmc::kGlobalNormThreads, 0, 0, partials,
                                               values, n);
    CUDA_CHECK_LAST();
    llmc::global_norm_squared_finish(out, partials, 0);
  } else {
    llmc::global_norm_squared(out, partials, values, n, 0);
  }
}

template <class T>
bool check_and_time(const bench::Args& args, size_t n, bool timed, const std::string& type, uint64_t seed,
                    float* d_out, float* d_partials) {
  bool ok = true;
  const std::string tag = fmt::format("global_norm n={} ", n);
  const auto host = bench::round_through<T>(bench::random_vector(n, seed));
  double ref = 0.0;
  for (float x : host) ref += double(x) * double(x);
  T* d_values = bench::to_device<T>(host);

  for (const std::string v : {"v1", "v2"}) {
    if (!bench::selected(args, v)) continue;
    bench::poison(d_out, sizeof(float));
    bench::poison(d_partials, llmc::kGlobalNormBlocks * sizeof(float));
    launch(v, n, d_out, d_partials, d_values);
    const auto got = bench::from_device(d_out, 1);
    ok &= bench::check(tag + v + " " + type, got, {float(ref)}, 1e-5);
    launch(v, n, d_out, d_partials, d_values);
    ok &= bench::check_identical(tag + v + " " + type, bench::from_device(d_out, 1), got);
  }
  if (bench::selected(args, "v2")) {
    const size_t half = first_part(n);
    bench::poison(d_partials, llmc::kGlobalNormBlocks * sizeof(float));
    llmc::global_norm_squared_partial(d_partials, d_values, half, false, 0);
    llmc::global_norm_squared_partial(d_partials, d_values + half, n - half - 3, true, 0);
    llmc::global_norm_squared_partial(d_partials, d_values + n - 3, 3, true, 0);
    llmc::global_norm_squared_finish(d_out, d_partials, 0);
    ok &= bench::check(tag + "v2 " + type + " three buffers accumulated (with tails)",
                       bench::from_device(d_out, 1), {float(ref)}, 1e-5);
  }

  if (timed && !args.check_only && ok) {
    // Every value read once; flops: one multiply-add per element.
    for (const std::string v : {"v1", "v2"})
      if (bench::selected(args, v))
        bench::report(tag + v + " " + type, bench::time_ms([&] { launch(v, n, d_out, d_partials, d_values); }),
                      double(n) * sizeof(T), 2.0 * n);
  }
  CUDA_CHECK(cudaFree(d_values));
  return ok;
}

bool run(const bench::Args& args) {
  float* d_out = bench::to_device<float>({1.0f});
  float* d_partials = bench::to_device<float>(std::vector<float>(llmc::kGlobalNormBlocks, 1.0f));
  bool ok = true;
  if (!args.small) {
    const size_t n = size_t(args.dim("-N"));
    if (n < 32) throw std::invalid_argument(fmt::format("-N {} is under 32 (the three-buffer check splits it)", n));
    ok &= check_and_time<floatX>(args, n, true, "floatX", 51, d_out, d_partials);
    ok &= check_and_time<float>(args, n, true, "fp32", 52, d_out, d_partials);
  }
  // With a shape of one's own, that shape alone.
  if (!args.shape_given) {
    ok &= check_and_time<floatX>(args, kSmallN, false, "floatX", 53, d_out, d_partials);
    ok &= check_and_time<float>(args, kSmallN, false, "fp32", 54, d_out, d_partials);
  }
  bench::free_device({d_out, d_partials});
  return ok;
}

}  // namespace

const std::vector<bench::VersionInfo> kVersions = {
    {"v1", "fixed grid, grid-stride scalar loads, block partials, fixed-order finish"},
    {"v2", "llmc/cuda/global_norm.cuh: v1 with 16-byte vector loads"},
};

int main(int argc, char** argv) {
  // GPT-2 124M's gradients with the vocabulary padded to 50304.
  const std::vector<bench::Dim> shape = {{"-N", "values", 124475904}};
  return bench::run_main(argc, argv, shape, kVersions, run);
}
