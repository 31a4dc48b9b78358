// GELU (tanh approximation) forward and backward: versions checked against llmc/cpu/gelu.h, then timed.
//   fwd1  one thread per element, scalar loads
//   fwd2  llmc/cuda/gelu.cuh: one thread per 16-byte vector
//   bwd1  one thread per element, scalar, out of place
//   bwd2  llmc/cuda/gelu.cuh: 16-byte vectors, in place (dinp aliases dout, as the trainer uses it)
//   fwd3, bwd3  fwd2 and bwd2 with fast math (LLMC_FAST_MATH=on): the sigmoid form, exp2f and __fdividef
#include "dev/cuda/common.cuh"
#include "llmc/cpu/gelu.h"
#include "llmc/cuda/gelu.cuh"

using llmc::floatX;

namespace {

constexpr size_t kN = size_t(8) * 1024 * 4 * 768;  // the fc activations of GPT-2 124M at B=8, T=1024
constexpr size_t kSmallN = size_t(2) * 50 * 4 * 96;  // a small model's: a partial last block

__global__ void gelu_forward_naive(floatX* out, const floatX* inp, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = floatX(llmc::gelu_value<false>(float(inp[i])));
}

__global__ void gelu_backward_naive(floatX* dinp, const floatX* inp, const floatX* dout, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dinp[i] = floatX(llmc::gelu_derivative<false>(float(inp[i])) * float(dout[i]));
}

// The fast-math form for the versions ending in 3.
llmc::FastMath fast_math_of(const std::string& v) { return v.back() == '3' ? llmc::FastMath::kOn : llmc::FastMath::kOff; }

void forward(const std::string& v, size_t n, floatX* out, const floatX* inp) {
  if (v == "fwd1") {
    llmc::launch<gelu_forward_naive>(llmc::ceil_div(static_cast<long long>(n), 256), 256, 0, 0, out, inp, n);
    CUDA_CHECK_LAST();
  } else {
    llmc::gelu_forward(out, inp, n, fast_math_of(v), 0);
  }
}

// bwd1 writes dinp from dout; bwd2 and bwd3 overwrite dout with dinp in place.
void backward(const std::string& v, size_t n, floatX* dinp, const floatX* inp, floatX* dout) {
  if (v == "bwd1") {
    llmc::launch<gelu_backward_naive>(llmc::ceil_div(static_cast<long long>(n), 256), 256, 0, 0, dinp, inp, dout, n);
    CUDA_CHECK_LAST();
  } else {
    llmc::gelu_backward(dout, inp, dout, n, fast_math_of(v), 0);
  }
}

bool run_size(const bench::Args& args, size_t n, bool timed) {
  bool ok = true;
  const std::string tag = timed ? "gelu " : fmt::format("gelu n={} ", n);
  // Pre-activations of a trained MLP spread over a few units; cover both tails of the curve.
  const auto inp = bench::round_through<floatX>(bench::random_vector(n, 21, -4.0f, 4.0f));
  const auto dout = bench::round_through<floatX>(bench::random_vector(n, 22));
  std::vector<float> out_ref(n), dinp_ref(n);
  llmc::gelu_forward(out_ref.data(), inp.data(), n);
  llmc::gelu_backward(dinp_ref.data(), inp.data(), dout.data(), n);

  floatX* d_inp = bench::to_device<floatX>(inp);
  floatX* d_dout = bench::to_device<floatX>(dout);
  floatX* d_out = bench::to_device<floatX>(std::vector<float>(n, 1.0f));
  const size_t bytes = n * sizeof(floatX);

  for (const std::string v : {"fwd1", "fwd2", "fwd3"}) {
    if (!bench::selected(args, v)) continue;
    bench::poison(d_out, bytes);
    forward(v, n, d_out, d_inp);
    ok &= bench::check(tag + v + " out", bench::from_device(d_out, n), out_ref, 1e-2);
  }
  for (const std::string v : {"bwd1", "bwd2", "bwd3"}) {
    if (!bench::selected(args, v)) continue;
    bench::upload(d_dout, dout);
    bench::poison(d_out, bytes);
    backward(v, n, d_out, d_inp, d_dout);
    ok &= bench::check(tag + v + " dinp", bench::from_device(v == "bwd1" ? d_out : d_dout, n), dinp_ref, 1e-2);
  }

  if (timed && !args.check_only && ok) {
    // Forward reads inp and writes out; backward reads inp and dout and writes dinp.
    for (const std::string v : {"fwd1", "fwd2", "fwd3"})
      if (bench::selected(args, v))
        bench::report(tag + v, bench::time_ms([&] { forward(v, n, d_out, d_inp); }), 2.0 * bytes, 0);
    // Timing the in-place version repeatedly shrinks dout towards zero; bwd2 and bwd3 are timed
    // out of place (same kernel, same traffic) to keep the data realistic.
    for (const std::string v : {"bwd1", "bwd2", "bwd3"}) {
      if (!bench::selected(args, v)) continue;
      const float ms =
          v == "bwd1" ? bench::time_ms([&] { backward(v, n, d_out, d_inp, d_dout); })
                      : bench::time_ms([&] { llmc::gelu_backward(d_out, d_inp, d_dout, n, fast_math_of(v), 0); });
      bench::report(tag + v, ms, 3.0 * bytes, 0);
    }
  }

  bench::free_device({d_inp, d_dout, d_out});
  return ok;
}

bool run(const bench::Args& args) {
  bool ok = args.small || run_size(args, kN, true);
  ok &= run_size(args, kSmallN, false);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_main(argc, argv, {"fwd1", "fwd2", "fwd3", "bwd1", "bwd2", "bwd3"}, run);
}
