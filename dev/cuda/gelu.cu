// GELU (tanh approximation) forward and backward: versions checked against llmc/cpu/gelu.h, then
// timed. The versions: kVersions below (or --help).
#include "dev/cuda/versions.cuh"
#include "llmc/cpu/gelu.h"
#include "llmc/cuda/gelu.cuh"

using llmc::floatX;

namespace {

constexpr size_t kSmallN = size_t(2) * 50 * 4 * 96;  // a small model's: a partial last block

// A thread per element, scalar loads: the vector kernels' functions (the sigmoid form) element by element.
__global__ void gelu_forward_naive(floatX* out, const floatX* inp, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = floatX(llmc::gelu_value(float(inp[i])));
}

__global__ void gelu_backward_naive(floatX* dinp, const floatX* inp, const floatX* dout, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dinp[i] = floatX(llmc::gelu_derivative(float(inp[i])) * float(dout[i]));
}

// The inputs, the outputs and the CPU's answers for n elements. `dinp` is where the backward
// writes: `out` when timed (repeated in place, dout would shrink towards zero), `dout` when the
// in-place versions are checked as the trainer calls them.
struct Data {
  size_t n;
  floatX *inp, *dout, *out, *dinp, *gelu_out;
  std::vector<float> dout0, out_ref, dinp_ref;
};

int blocks_of(const Data& d, int block, int per_thread) {
  return llmc::ceil_div(static_cast<long long>(d.n / per_thread), block);
}

void fwd1(Data& d, int block) {
  block = block ? block : 256;
  llmc::launch<gelu_forward_naive>(blocks_of(d, block, 1), block, 0, 0, d.out, d.inp, d.n);
}

// The production kernels (llmc/cuda/gelu.cuh), a 16-byte vector per thread; block 0 is the
// trainer's launch.
void fwd_vectors(Data& d, int block) {
  if (block == 0) return llmc::gelu_forward(d.out, d.inp, d.n, 0);
  llmc::require_whole_vectors("gelu_forward", "size", d.n);
  llmc::launch<llmc::gelu_forward_kernel<floatX>>(blocks_of(d, block, llmc::Packed128<floatX>::size), block, 0, 0,
                                                  d.out, d.inp, d.n, llmc::Fp8Sink{});
}

void bwd1(Data& d, int block) {
  block = block ? block : 256;
  llmc::launch<gelu_backward_naive>(blocks_of(d, block, 1), block, 0, 0, d.dinp, d.inp, d.dout, d.n);
}

void bwd_vectors(Data& d, int block) {
  if (block == 0) return llmc::gelu_backward(d.dinp, d.inp, d.dout, d.n, 0);
  llmc::require_whole_vectors("gelu_backward", "size", d.n);
  llmc::launch<llmc::gelu_backward_kernel<floatX>>(blocks_of(d, block, llmc::Packed128<floatX>::size), block, 0, 0,
                                                   d.dinp, d.inp, d.dout, d.n, llmc::Fp8Sink{}, nullptr);
}

// bwd3 also writing gelu(inp) into `out` (LLMC_FP8_GELU=epilogue: the forward kept the GELU in FP8
// only, and fcproj's weight gradient reads this).
void bwd_gelu_out(Data& d, int block) {
  if (block == 0)
    return llmc::gelu_backward(d.dinp, d.inp, d.dout, d.n, 0, llmc::Fp8Sink{}, d.gelu_out);
  llmc::require_whole_vectors("gelu_backward", "size", d.n);
  llmc::launch<llmc::gelu_backward_kernel<floatX>>(blocks_of(d, block, llmc::Packed128<floatX>::size), block, 0, 0,
                                                   d.dinp, d.inp, d.dout, d.n, llmc::Fp8Sink{}, d.gelu_out);
}

// Bytes for n elements in floatX: the forward reads inp and writes out; the backward reads inp and
// dout and writes dinp.
bench::Cost forward_cost(const Data& d) { return {2.0 * d.n * sizeof(floatX)}; }
bench::Cost backward_cost(const Data& d) { return {3.0 * d.n * sizeof(floatX)}; }
bench::Cost backward_gelu_out_cost(const Data& d) { return {4.0 * d.n * sizeof(floatX)}; }

using Version = bench::Version<Data>;

bool check_forward(Data& d, const Version& v, const std::string& tag, int block) {
  bench::poison(d.out, d.n * sizeof(floatX));
  v.launch(d, block);
  return bench::check(tag + " out", bench::from_device(d.out, d.n), d.out_ref, 1e-2);
}

// bwd1 out of place; the vector versions in place (dinp aliases dout), as the trainer calls them.
bool check_backward(Data& d, const Version& v, const std::string& tag, int block) {
  bench::upload(d.dout, d.dout0);
  bench::poison(d.out, d.n * sizeof(floatX));
  const bool in_place = v.name != "bwd1";
  if (in_place) d.dinp = d.dout;
  v.launch(d, block);
  d.dinp = d.out;
  const bool ok = bench::check(tag + " dinp", bench::from_device(in_place ? d.dout : d.out, d.n), d.dinp_ref, 1e-2);
  bench::upload(d.dout, d.dout0);
  return ok;
}

// bwd4: check_backward's dinp, and gelu(inp) as the forward kernel (fwd3) stores it, bit for bit.
bool check_backward_gelu_out(Data& d, const Version& v, const std::string& tag, int block) {
  bench::poison(d.gelu_out, d.n * sizeof(floatX));
  const bool ok = check_backward(d, v, tag, block);
  const std::vector<float> written = bench::from_device(d.gelu_out, d.n);
  fwd_vectors(d, 0);
  const std::vector<float> forward = bench::from_device(d.out, d.n);
  size_t differ = 0;
  for (size_t i = 0; i < d.n; ++i) differ += written[i] != forward[i];
  fmt::print("{}  {} gelu out: {} of {} values differ from fwd3's\n", differ == 0 ? "PASS" : "FAIL", tag, differ, d.n);
  return ok && differ == 0;
}

const std::vector<int> kBlocks = {0, 64, 128, 256, 512, 1024};
const std::vector<Version> kVersions = {
    {"fwd1", "a thread per element, scalar loads", {256, 64, 128, 512, 1024}, fwd1, check_forward, forward_cost},
    {"fwd3", "llmc/cuda/gelu.cuh: a thread per 16-byte vector, the sigmoid form (exp2f and __fdividef)", kBlocks,
     fwd_vectors, check_forward, forward_cost},
    {"bwd1", "a thread per element, scalar, out of place", {256, 64, 128, 512, 1024}, bwd1, check_backward,
     backward_cost},
    {"bwd3", "llmc/cuda/gelu.cuh: 16-byte vectors, in place (checked so; timed out of place, the same traffic)",
     kBlocks, bwd_vectors, check_backward, backward_cost},
    {"bwd4", "bwd3 also writing gelu(inp), as the forward kernel would (LLMC_FP8_GELU=epilogue)", kBlocks,
     bwd_gelu_out, check_backward_gelu_out, backward_gelu_out_cost},
};

bool run_size(const bench::Args& args, size_t n, bool timed) {
  Data d{};
  d.n = n;
  // Pre-activations of a trained MLP spread over a few units; cover both tails of the curve.
  const auto inp = bench::round_through<floatX>(bench::random_vector(n, 21, -4.0f, 4.0f));
  d.dout0 = bench::round_through<floatX>(bench::random_vector(n, 22));
  d.out_ref.resize(n);
  d.dinp_ref.resize(n);
  llmc::gelu_forward(d.out_ref.data(), inp.data(), n);
  llmc::gelu_backward(d.dinp_ref.data(), inp.data(), d.dout0.data(), n);

  d.inp = bench::to_device<floatX>(inp);
  d.dout = bench::to_device<floatX>(d.dout0);
  d.out = bench::to_device<floatX>(std::vector<float>(n, 1.0f));
  d.dinp = d.out;
  d.gelu_out = bench::to_device<floatX>(std::vector<float>(n, 1.0f));
  const bool ok = bench::run_versions(args, kVersions, d, fmt::format("gelu n={} ", n), timed);
  bench::free_device({d.inp, d.dout, d.out, d.gelu_out});
  return ok;
}

bool run(const bench::Args& args) {
  bool ok = args.small || run_size(args, size_t(args.dim("-N")), true);
  if (args.shape_given) return ok;  // a shape of one's own: that shape alone
  ok &= run_size(args, kSmallN, false);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  // The fc activations of GPT-2 124M at B=8, T=1024 (B*T*4C), in whole 16-byte vectors.
  const std::vector<bench::Dim> shape = {
      {"-N", "elements", static_cast<long long>(size_t(8) * 1024 * 4 * 768), llmc::Packed128<floatX>::size}};
  return bench::run_main(argc, argv, shape, bench::infos(kVersions), run);
}
