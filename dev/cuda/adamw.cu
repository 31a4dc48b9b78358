// AdamW with fp32 master weights, rounded to nearest into floatX: versions checked against
// llmc/cpu/adamw.h over a GPT-2 124M-sized parameter buffer, then timed; also checked over 4,104
// parameters (a partial last block) and 1,003 (not whole vectors: its last slice goes by elements).
// v1, an element per thread over the buffer as one tensor that decays, is the baseline. The
// trainer's multi-tensor kernel (v4, every load of a thread before its first store) runs over the
// parameters cut into slices, some that decay and some that do not, some misaligned (by elements):
// checked against the CPU on each slice, its floatX parameters the master rounded to nearest, and
// bit for bit over a second launch; v5, v4 recording the largest |parameter written| of each W
// into FP8 amax slots (LLMC_FP8_WEIGHT_AMAX=adamw): the first slice as Ws of a third (or a half) of
// it, a block's vectors over several Ws (an atomic a thread), the third slice, element by element,
// as one W (an atomic a block); the same way, bit for bit v4, and each W's amax the largest
// |floatX parameter| of its values, exactly. (v3, each half of a thread's state loaded in turn,
// a GPU measured 15% slower than v4: docs/gpu-runs.md, 2026-11-28.)
// The versions: kVersions below (or --help).
#include <algorithm>
#include <cmath>

#include "dev/cuda/versions.cuh"
#include "llmc/cpu/adamw.h"
#include "llmc/cuda/adamw.cuh"
#include "llmc/optim/registry.h"

using llmc::floatX;

namespace {

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

// The slices v4 cuts n parameters into: [0, b1) decays, [b1, b1 + 5) does not (5 elements: scalar),
// [b1 + 5, b3) decays (misaligned start: scalar), [b3, n) does not; b1 and b3 multiples of 8 near
// n/3 and 2n/3. Each as optimizer_slice makes it: params and grads at its first element, master and
// the state tensors at the same place (the whole buffer is the owned range).
template <class Real>
std::vector<llmc::OptimizerSlice<Real>> cut(size_t n, Real* params, float* master, const Real* grads,
                                            float* const* state) {
  const size_t b1 = n / 3 / 8 * 8, b3 = 2 * n / 3 / 8 * 8;
  const std::vector<size_t> bounds = {0, b1, b1 + 5, b3, n};
  std::vector<llmc::OptimizerSlice<Real>> out;
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    llmc::OptimizerSlice<Real> s = slice(bounds[i + 1] - bounds[i], params + bounds[i],
                                         master ? master + bounds[i] : nullptr, grads + bounds[i], state);
    s.state_offset = bounds[i];
    s.weight_decay = i % 2 == 0 ? kStep.weight_decay : 0.0f;
    out.push_back(s);
  }
  return out;
}

// The parameters, gradients and optimizer state of n parameters, and the CPU's answers: over one
// tensor that decays (v1) and over the slices of v4 and v5 (sliced_*).
struct Data {
  size_t n;
  floatX *params, *grads;
  float *master, *m, *v;
  float* fp8_state;  // v5's amax slots: kAmaxTensors tensors of the FP8 scaling state
  std::vector<float> params0, m0, v0, params_ref, m_ref, v_ref;
  std::vector<float> sliced_params_ref, sliced_m_ref, sliced_v_ref;
};

// An element per thread, any n and alignment: the per-element code (llmc::adamw_element) that the
// multi-tensor kernel runs on a slice that does not go by vectors, over one tensor.
__global__ void adamw_scalar_kernel(floatX* params, float* master, const floatX* grads, float* m, float* v, size_t n,
                                    llmc::AdamWArgs a) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) llmc::adamw_element(params, master, grads, m, v, i, a);
}

void v1(Data& d, int block) {
  block = block ? block : 256;
  const llmc::AdamWArgs a = llmc::adamw_args(kStep, kHyper, kStep.weight_decay);
  llmc::launch<adamw_scalar_kernel>(llmc::ceil_div(static_cast<long long>(d.n), block), block, 0, 0, d.params,
                                    d.master, d.grads, d.m, d.v, d.n, a);
}

// The slices of v4 and v5 in the device buffers.
std::vector<llmc::OptimizerSlice<floatX>> device_slices(Data& d, float* const* state) {
  return cut(d.n, d.params, d.master, d.grads, state);
}

void multi_tensor(Data& d, int) {
  float* const state[] = {d.m, d.v};
  const auto slices = device_slices(d, state);
  llmc::adamw_update_slices(slice(d.n, d.params, d.master, d.grads, state), slices.data(), int(slices.size()), kStep,
                            kHyper, 0);
}

// v5's Ws: the first slice's (a third of it, or a half) at tensors 0.., the third slice's (one)
// at tensor 3. Returns each slice's sink.
constexpr int kAmaxTensors = 4;
std::vector<llmc::Fp8WeightAmaxSink> amax_sinks(Data& d, const std::vector<llmc::OptimizerSlice<floatX>>& slices) {
  std::vector<llmc::Fp8WeightAmaxSink> sinks(slices.size());
  const size_t first = slices[0].n;
  sinks[0] = {reinterpret_cast<unsigned*>(d.fp8_state + llmc::fp8_amax_offset(0)),
              first % 3 == 0 ? first / 3 : first / 2};
  sinks[2] = {reinterpret_cast<unsigned*>(d.fp8_state + llmc::fp8_amax_offset(3)), slices[2].n};
  return sinks;
}

void multi_tensor_amax(Data& d, int) {
  float* const state[] = {d.m, d.v};
  const auto slices = device_slices(d, state);
  const auto sinks = amax_sinks(d, slices);
  llmc::adamw_update_slices(slice(d.n, d.params, d.master, d.grads, state), slices.data(), int(slices.size()), kStep,
                            kHyper, 0, sinks.data());
}

// Per parameter: the gradient read, m, v and the master weight read and written, the floatX
// parameter written.
bench::Cost cost(const Data& d) { return {d.n * (2.0 * sizeof(floatX) + 6.0 * sizeof(float))}; }

using Version = bench::Version<Data>;

// The state as before the step; the floatX parameters poisoned; v5's amax slots 0.
void reset(Data& d) {
  bench::upload(d.master, d.params0);
  bench::upload(d.m, d.m0);
  bench::upload(d.v, d.v0);
  bench::poison(d.params, d.n * sizeof(floatX));
  CUDA_CHECK(cudaMemset(d.fp8_state, 0, kAmaxTensors * llmc::kFp8FloatsPerTensor * sizeof(float)));
}

// The floatX parameters are the new master values rounded to nearest.
bool check_rounded(const std::string& tag, const std::vector<float>& master, const std::vector<float>& params_low) {
  std::vector<float> rounded(master.size());
  for (size_t i = 0; i < master.size(); ++i) rounded[i] = float(floatX(master[i]));
  return bench::check_identical(tag + " params = master rounded to nearest", params_low, rounded);
}

// master, m, v and the floatX parameters against the CPU; the parameters are the new master values
// rounded to nearest; a second step from the same state gives the same bits.
bool check(Data& d, const Version& v, const std::string& tag, int block) {
  const size_t n = d.n;
  reset(d);
  v.launch(d, block);
  const auto master = bench::from_device(d.master, n);
  const auto params_low = bench::from_device(d.params, n);
  bool ok = bench::check(tag + " master", master, d.params_ref, 1e-5);
  ok &= bench::check(tag + " m", bench::from_device(d.m, n), d.m_ref, 1e-5);
  ok &= bench::check(tag + " v", bench::from_device(d.v, n), d.v_ref, 1e-5);
  ok &= bench::check(tag + " params (floatX)", params_low, d.params_ref, 1e-2);
  ok &= check_rounded(tag, master, params_low);
  reset(d);
  v.launch(d, block);
  ok &= bench::check_identical(tag + " params (floatX)", bench::from_device(d.params, n), params_low);
  return ok;
}

// master, m, v and the floatX parameters after one launch from the state before the step.
std::vector<std::vector<float>> step_outputs(Data& d, const std::function<void(Data&)>& launch) {
  reset(d);
  launch(d);
  return {bench::from_device(d.master, d.n), bench::from_device(d.m, d.n), bench::from_device(d.v, d.n),
          bench::from_device(d.params, d.n)};
}

// Against the CPU on each slice; the floatX parameters the new master values rounded to nearest;
// then every output bit for bit v4's, the trainer's (for v4 itself: a second launch).
bool check_slices(Data& d, const Version& v, const std::string& tag, int block) {
  const auto got = step_outputs(d, [&](Data& data) { v.launch(data, block); });
  bool ok = bench::check(tag + " master", got[0], d.sliced_params_ref, 1e-5);
  ok &= bench::check(tag + " m", got[1], d.sliced_m_ref, 1e-5);
  ok &= bench::check(tag + " v", got[2], d.sliced_v_ref, 1e-5);
  ok &= bench::check(tag + " params (floatX)", got[3], d.sliced_params_ref, 1e-2);
  ok &= check_rounded(tag, got[0], got[3]);
  const auto trainer = step_outputs(d, [](Data& data) { multi_tensor(data, 0); });
  const char* names[] = {" master", " m", " v", " params (floatX)"};
  for (int i = 0; i < 4; ++i) ok &= bench::check_identical(tag + names[i] + " = v4's", got[i], trainer[i]);
  return ok;
}

// check_slices, then each W's amax (the largest of its slots) against the largest |floatX
// parameter| of its values, exactly.
bool check_amax(Data& d, const Version& v, const std::string& tag, int block) {
  bool ok = check_slices(d, v, tag, block);
  reset(d);
  v.launch(d, block);
  float* const state[] = {d.m, d.v};
  const auto slices = device_slices(d, state);
  const auto sinks = amax_sinks(d, slices);
  const auto params = bench::from_device(d.params, d.n);
  const auto fp8_state = bench::from_device(d.fp8_state, kAmaxTensors * llmc::kFp8FloatsPerTensor);
  std::vector<float> got, want;
  for (size_t s = 0; s < slices.size(); ++s) {
    if (!sinks[s].slots) continue;
    const size_t first_tensor = (reinterpret_cast<float*>(sinks[s].slots) - d.fp8_state) / llmc::kFp8FloatsPerTensor;
    const size_t at = size_t(slices[s].params - d.params);
    for (size_t w = 0; w < slices[s].n / sinks[s].values; ++w) {
      float largest = 0.0f, recorded = 0.0f;
      for (size_t k = 0; k < sinks[s].values; ++k)
        largest = std::max(largest, std::fabs(params[at + w * sinks[s].values + k]));
      for (int slot = 0; slot < llmc::kFp8AmaxSlots; ++slot)
        recorded = std::max(recorded, fp8_state[llmc::fp8_amax_offset(int(first_tensor + w)) +
                                                slot * llmc::kFp8AmaxSlotStride]);
      got.push_back(recorded);
      want.push_back(largest);
    }
  }
  ok &= bench::check_identical(fmt::format("{} amax of {} Ws = the largest |param| of each", tag, got.size()), got,
                               want);
  return ok;
}

const std::vector<Version> kVersions = {
    {"v1", "an element per thread over one tensor (llmc::adamw_element, the multi-tensor kernel's odd-size path)",
     {256, 128, 512, 1024}, v1, check, cost},
    {"v4",
     "llmc/cuda/adamw.cuh multi-tensor kernel, the trainer's: every slice in one launch, a table of slices by value, "
     "16 bytes of params/grads and of each fp32 state per thread, every load of a thread before its first store",
     {}, multi_tensor, check_slices, cost},
    {"v5",
     "v4 recording each W's amax for its FP8 scale (LLMC_FP8_WEIGHT_AMAX=adamw): an atomic a block within one W, "
     "else a thread",
     {}, multi_tensor_amax, check_amax, cost},
};

bool run_size(const bench::Args& args, size_t n, bool timed) {
  Data d{};
  d.n = n;
  d.params0 = bench::round_through<floatX>(bench::random_vector(n, 41));
  const auto grads = bench::round_through<floatX>(bench::random_vector(n, 42));
  d.m0 = bench::random_vector(n, 43, -0.1f, 0.1f);
  d.v0 = bench::random_vector(n, 44, 1e-4f, 1e-2f);
  d.params_ref = d.params0;
  d.m_ref = d.m0;
  d.v_ref = d.v0;
  float* const state_ref[] = {d.m_ref.data(), d.v_ref.data()};
  llmc::adamw_update(slice<float>(n, d.params_ref.data(), nullptr, grads.data(), state_ref), kStep, kHyper);
  d.sliced_params_ref = d.params0;
  d.sliced_m_ref = d.m0;
  d.sliced_v_ref = d.v0;
  float* const sliced_state[] = {d.sliced_m_ref.data(), d.sliced_v_ref.data()};
  for (const auto& s : cut<float>(n, d.sliced_params_ref.data(), nullptr, grads.data(), sliced_state))
    llmc::adamw_update(s, kStep, kHyper);

  d.params = bench::to_device<floatX>(d.params0);
  d.grads = bench::to_device<floatX>(grads);
  d.master = bench::to_device<float>(d.params0);
  d.m = bench::to_device<float>(d.m0);
  d.v = bench::to_device<float>(d.v0);
  d.fp8_state = bench::to_device<float>(std::vector<float>(kAmaxTensors * llmc::kFp8FloatsPerTensor));
  const bool ok = bench::run_versions(args, kVersions, d, fmt::format("adamw n={} ", n), timed);
  bench::free_device({d.params, d.grads, d.master, d.m, d.v, d.fp8_state});
  return ok;
}

bool run(const bench::Args& args) {
  bool ok = args.small || run_size(args, size_t(args.dim("-N")), true);
  if (args.shape_given) return ok;  // a shape of one's own: that shape alone
  ok &= run_size(args, 4104, false);
  ok &= run_size(args, 1003, false);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  // GPT-2 124M with the vocabulary padded to 50304.
  const std::vector<bench::Dim> shape = {{"-N", "parameters", 124475904}};
  return bench::run_main(argc, argv, shape, bench::infos(kVersions), run);
}
