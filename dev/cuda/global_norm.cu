// Sum of squares of a gradient buffer (global norm before clipping): versions checked against a
// double-precision host sum, for floatX and fp32 gradients, then timed.
// The versions: kVersions below (or --help).
// Also checked: bitwise determinism, and v2 over pieces of the buffer with ragged lengths.
#include "dev/cuda/versions.cuh"
#include "llmc/cuda/global_norm.cuh"

using llmc::floatX;

namespace {

constexpr size_t kSmallN = 100005;  // not whole vectors: the tail path

// The three-piece check's split: the second piece starts 16-byte aligned but has a length that is
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

// n values of type T (floatX or fp32 gradients), the per-block partials, the result and the host's
// double-precision sum of squares.
template <class T>
struct Data {
  size_t n;
  T* values;
  float *out, *partials;
  double ref;
};

// A fixed grid of kGlobalNormBlocks blocks (so the sum's order, and its bits, never depend on the
// device) of `block` threads, then the production finishing kernel.
template <class T>
void v1(Data<T>& d, int block) {
  llmc::launch<global_norm_partial_naive<T>>(llmc::kGlobalNormBlocks, block ? block : llmc::kGlobalNormThreads, 0, 0,
                                             d.partials, d.values, d.n);
  llmc::global_norm_squared_finish(d.out, d.partials, llmc::kGlobalNormBlocks, 0);
}

template <class T>
void v2(Data<T>& d, int) {
  llmc::global_norm_squared(d.out, d.partials, d.values, d.n, 0);
}

// Every value read once; one multiply-add per value.
template <class T>
bench::Cost cost(const Data<T>& d) {
  return {double(d.n) * sizeof(T), 2.0 * d.n};
}

template <class T>
using Version = bench::Version<Data<T>>;

// The sum of squares against the host's, and the same bits from a second run.
template <class T>
bool check_sum(Data<T>& d, const Version<T>& v, const std::string& tag, int block) {
  bench::poison(d.out, sizeof(float));
  bench::poison(d.partials, llmc::kGlobalNormBlocks * sizeof(float));
  v.launch(d, block);
  const auto got = bench::from_device(d.out, 1);
  bool ok = bench::check(tag, got, {float(d.ref)}, 1e-5);
  v.launch(d, block);
  ok &= bench::check_identical(tag, bench::from_device(d.out, 1), got);
  return ok;
}

// v2 also over three pieces of the buffer, each summed alone (the second's length not whole
// vectors, the last's 3 values no vector at all), their sums added on the host.
template <class T>
bool check_pieces(Data<T>& d, const Version<T>& v, const std::string& tag, int block) {
  bool ok = check_sum(d, v, tag, block);
  const size_t first = first_part(d.n);
  const size_t begins[] = {0, first, d.n - 3, d.n};
  float total = 0.0f;
  for (int i = 0; i < 3; ++i) {
    bench::poison(d.partials, llmc::kGlobalNormBlocks * sizeof(float));
    llmc::global_norm_squared(d.out, d.partials, d.values + begins[i], begins[i + 1] - begins[i], 0);
    total += bench::from_device(d.out, 1)[0];
  }
  ok &= bench::check(tag + " three pieces (with tails)", {total}, {float(d.ref)}, 1e-5);
  return ok;
}

template <class T>
const std::vector<Version<T>> kVersions = {
    {"v1", "fixed grid, grid-stride scalar loads, block partials, fixed-order finish", {512, 128, 256, 1024}, v1<T>,
     check_sum<T>, cost<T>},
    {"v2", "llmc/cuda/global_norm.cuh: v1 with 16-byte vector loads, no more blocks than they fill", {}, v2<T>,
     check_pieces<T>, cost<T>},
};

template <class T>
bool check_and_time(const bench::Args& args, size_t n, bool timed, const std::string& type, uint64_t seed,
                    float* d_out, float* d_partials) {
  const auto host = bench::round_through<T>(bench::random_vector(n, seed));
  Data<T> d{n, bench::to_device<T>(host), d_out, d_partials, 0.0};
  for (float x : host) d.ref += double(x) * double(x);
  const bool ok = bench::run_versions(args, kVersions<T>, d, fmt::format("global_norm n={} {} ", n, type), timed);
  CUDA_CHECK(cudaFree(d.values));
  return ok;
}

bool run(const bench::Args& args) {
  float* d_out = bench::to_device<float>({1.0f});
  float* d_partials = bench::to_device<float>(std::vector<float>(llmc::kGlobalNormBlocks, 1.0f));
  bool ok = true;
  if (!args.small) {
    const size_t n = size_t(args.dim("-N"));
    if (n < 32) throw std::invalid_argument(fmt::format("-N {} is under 32 (the three-piece check splits it)", n));
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

int main(int argc, char** argv) {
  // GPT-2 124M's gradients with the vocabulary padded to 50304.
  const std::vector<bench::Dim> shape = {{"-N", "values", 124475904}};
  return bench::run_main(argc, argv, shape, bench::infos(kVersions<floatX>), run);
}
