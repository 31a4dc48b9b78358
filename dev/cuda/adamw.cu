// AdamW with fp32 master weights, rounded to nearest into floatX: versions checked against
// llmc/cpu/adamw.h over a GPT-2 124M-sized parameter buffer, then timed; also checked over 4,104
// parameters (a partial last block) and 1,003 (not whole vectors: adamw_update takes the scalar path).
//   v1  llmc/cuda/adamw.cuh scalar kernel: one element per thread (the fallback for odd sizes)
//   v2  llmc/cuda/adamw.cuh vector kernel: 16 bytes of params/grads and of each fp32 state per thread
#include "dev/cuda/common.cuh"
#include "llmc/cuda/adamw.cuh"
#include "llmc/optim/registry.h"

using llmc::floatX;

namespace {

constexpr size_t kN = 124475904;  // GPT-2 124M with the vocabulary padded to 50304
constexpr llmc::AdamWHyper kHyper = llmc::AdamW::kHyper;
// lr 1e-3 at step t = 5, gradients scaled by 0.8 (clipping), weight decay 0.1.
constexpr llmc::OptimizerStep kStep = {1e-3f, 5, 0.8f, 0.1f};

// n parameters of one tensor that decays, with m and v its state tensors 0 and 1.
template <class Real>
llmc::OptimizerSlice<Real> slice(size_t n, Real* params, float* master, const Real* grads, float* const* state) {
  llmc::OptimizerSlice<Real> s{params, master, grads, state};
  s.n = n;
  s.weight_decay = kStep.weight_decay;
  return s;
}

void launch(const std::string& v, size_t n, floatX* params, float* master, const floatX* grads, float* m, float* vv) {
  if (v == "v1") {
    const llmc::AdamWArgs a = llmc::adamw_args(kStep, kHyper, kStep.weight_decay);
    llmc::launch<llmc::adamw_scalar_kernel<floatX>>(llmc::ceil_div(static_cast<long long>(n), 256), 256, 0, 0, params,
                                                    master, grads, m, vv, n, a);
    CUDA_CHECK_LAST();
  } else {
    float* const state[] = {m, vv};
    llmc::adamw_update(slice(n, params, master, grads, state), kStep, kHyper, 0);
  }
}

bool run_size(const bench::Args& args, size_t n, bool timed) {
  bool ok = true;
  const std::string tag = timed ? "adamw " : fmt::format("adamw n={} ", n);
  const auto params = bench::round_through<floatX>(bench::random_vector(n, 41));
  const auto grads = bench::round_through<floatX>(bench::random_vector(n, 42));
  const auto m0 = bench::random_vector(n, 43, -0.1f, 0.1f);
  const auto v0 = bench::random_vector(n, 44, 1e-4f, 1e-2f);
  std::vector<float> params_ref = params, m_ref = m0, v_ref = v0;
  float* const state_ref[] = {m_ref.data(), v_ref.data()};
  llmc::adamw_update(slice<float>(n, params_ref.data(), nullptr, grads.data(), state_ref), kStep, kHyper);

  floatX* d_params = bench::to_device<floatX>(params);
  floatX* d_grads = bench::to_device<floatX>(grads);
  float* d_master = bench::to_device<float>(params);
  float* d_m = bench::to_device<float>(m0);
  float* d_v = bench::to_device<float>(v0);
  auto reset = [&] {
    for (auto [dev, host] : {std::pair{d_master, &params}, std::pair{d_m, &m0}, std::pair{d_v, &v0}})
      bench::upload(dev, *host);
    bench::poison(d_params, n * sizeof(floatX));
  };

  for (const std::string v : {"v1", "v2"}) {
    if (!bench::selected(args, v)) continue;
    reset();
    launch(v, n, d_params, d_master, d_grads, d_m, d_v);
    const auto master = bench::from_device(d_master, n);
    const auto params_low = bench::from_device(d_params, n);
    ok &= bench::check(tag + v + " master", master, params_ref, 1e-5);
    ok &= bench::check(tag + v + " m", bench::from_device(d_m, n), m_ref, 1e-5);
    ok &= bench::check(tag + v + " v", bench::from_device(d_v, n), v_ref, 1e-5);
    ok &= bench::check(tag + v + " params (floatX)", params_low, params_ref, 1e-2);
    // The floatX parameters are the new master values rounded to nearest (the host's conversion).
    std::vector<float> rounded(n);
    for (size_t i = 0; i < n; ++i) rounded[i] = float(floatX(master[i]));
    ok &= bench::check_identical(tag + v + " params = master rounded to nearest", params_low, rounded);
    reset();
    launch(v, n, d_params, d_master, d_grads, d_m, d_v);
    ok &= bench::check_identical(tag + v + " params (floatX)", bench::from_device(d_params, n), params_low);
  }

  if (timed && !args.check_only && ok) {
    // Per element: grad read, m/v/master read and written, floatX params written.
    const double bytes = n * (2.0 * sizeof(floatX) + 6.0 * sizeof(float));
    for (const std::string v : {"v1", "v2"})
      if (bench::selected(args, v))
        bench::report(tag + v, bench::time_ms([&] { launch(v, n, d_params, d_master, d_grads, d_m, d_v); }), bytes,
                      0);
  }

  bench::free_device({d_params, d_grads, d_master, d_m, d_v});
  return ok;
}

bool run(const bench::Args& args) {
  bool ok = args.small || run_size(args, kN, true);
  ok &= run_size(args, 4104, false);
  ok &= run_size(args, 1003, false);
  return ok;
}

}  // namespace

int main(int argc, char** argv) { return bench::run_main(argc, argv, {"v1", "v2"}, run); }
