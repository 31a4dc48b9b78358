// Fully connected layer through cuBLASLt (llmc/cuda/matmul.cuh) at GPT-2 124M shapes and one small shape
// with tails and misaligned matrices, each version checked against the CPU layer
// (llmc/cpu/matmul.h, llmc/cpu/gelu.h) and timed. The versions: kVersions below (or --help).
// The FP8 versions are checked against the CPU layer run on the very values the FP8 copies hold, so
// only the accumulation and the bf16 output round.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "dev/cuda/matmul_inputs.cuh"
#include "dev/cuda/versions.cuh"
#include "llmc/cpu/gelu.h"
#include "llmc/cpu/matmul.h"
#include "llmc/cuda/fp8.cuh"
#include "llmc/cuda/matmul.cuh"

using llmc::floatX;

namespace {

using namespace matmul_bench;

// bf16 outputs carry ~3 significant digits; the FP32 build holds the 1e-4 parity bar.
constexpr double kTol = std::is_same<floatX, float>::value ? 1e-4 : 1e-2;

// The bias gradient's second pass as the trainer first ran it: one thread per column adds every
// slice's partial sum in slice order, on ceil(OC / 256) blocks.
__global__ void bias_grad_serial_finish(floatX* dbias, const float* partial, int slices, int OC) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= OC) return;
  float s = 0.0f;
  for (int i = 0; i < slices; ++i) s += partial[size_t(i) * OC + c];
  dbias[c] = floatX(float(dbias[c]) + s);
}

void matmul_bias_grad_serial(floatX* dbias, float* scratch, const floatX* dout, int BT, int OC) {
  constexpr int kCols = llmc::kWarpSize * llmc::Packed128<floatX>::size;
  const dim3 grid(llmc::ceil_div(OC, kCols), llmc::bias_grad_slices(BT));
  using Rows = llmc::StoredRows<floatX>;
  llmc::launch<llmc::bias_grad_partial_kernel<floatX, Rows>>(grid, dim3(llmc::kWarpSize, llmc::kBiasWarps), 0, 0,
                                                             scratch, Rows{dout}, BT, OC, llmc::Fp8Sink{});
  llmc::launch<bias_grad_serial_finish>(llmc::ceil_div(OC, 256), 256, 0, 0, dbias, scratch, llmc::bias_grad_slices(BT),
                                        OC);
}

// One shape's reference, buffers and cuBLASLt context, and what the checks leave for the timings:
// the timed searches' contexts (each searched once, then timed with its choice) and the FP8 operands
// (absent where the build or the shape has no FP8 GEMM).
struct Data {
  const Shape& s;
  const Reference& r;
  DeviceBuffers& buf;
  llmc::BlasContext& ctx;
  std::optional<llmc::BlasContext> fwd_search{}, dweight_search{};
  std::optional<Fp8Operands> fp8{};
};

template <bool kBias>
void fwd(Data& d, int) {
  llmc::matmul_forward(d.ctx, d.buf.out, d.buf.inp, d.buf.weight, kBias ? d.buf.bias : nullptr, d.s.BT, d.s.C,
                       d.s.OC, 0);
}

// The GELU two ways: cuBLASLt's epilogue, or a plain GEMM followed by the GELU kernel.
template <bool kEpilogue>
void fwd_gelu(Data& d, int) {
  llmc::matmul_forward_gelu(d.ctx, d.buf.out, d.buf.aux, d.buf.inp, d.buf.weight, d.buf.bias, d.s.BT, d.s.C, d.s.OC,
                            kEpilogue, 0);
}

llmc::MatmulBackward plain_backward(const Data& d) {
  return {.dinp = d.buf.dinp, .dout = d.buf.dout, .weight = d.buf.weight, .BT = d.s.BT, .C = d.s.C, .OC = d.s.OC};
}

void bwd_dinp(Data& d, int) { llmc::matmul_backward_input(d.ctx, plain_backward(d), 0); }

template <bool kEpilogue>
void bwd_dinp_dgelu(Data& d, int) {
  llmc::MatmulBackward p = plain_backward(d);
  p.pre_gelu = d.buf.pre_gelu_in;
  p.dgelu_epilogue = kEpilogue;
  llmc::matmul_backward_input(d.ctx, p, 0);
}

// The GELU backward kernel's input gradient, also adding its column sums to dpre_bias: by the
// bias-gradient kernels reading dinp again (LLMC_FP8_FC_BIAS_GRAD=kernels: the fc layer's own
// matmul_backward sums it), or (kFused, dbias_pre_gelu) by those kernels computing the GELU backward
// on the vectors they sum.
template <bool kFused>
llmc::MatmulBackward gelu_bias_backward(const Data& d) {
  llmc::MatmulBackward p = plain_backward(d);
  p.pre_gelu = d.buf.pre_gelu_in;
  p.bias_scratch = d.buf.bias_scratch;
  if (kFused) p.dbias_pre_gelu = d.buf.dpre_bias;
  return p;
}
template <bool kFused>
void bwd_dinp_gelu_bias(Data& d, int) {
  llmc::matmul_backward_input(d.ctx, gelu_bias_backward<kFused>(d), 0);
  if (!kFused) llmc::matmul_bias_grad(d.buf.dpre_bias, d.buf.bias_scratch, d.buf.dinp, d.s.BT, d.s.C, 0);
}

void bwd_dweight(Data& d, int) {
  llmc::lt_gemm(d.ctx, llmc::weight_grad_gemm(d.buf.dweight, d.buf.dout, d.buf.inp, d.s.BT, d.s.C, d.s.OC), 0);
}

void dbias_serial(Data& d, int) {
  matmul_bias_grad_serial(d.buf.dbias, d.buf.bias_scratch, d.buf.dout, d.s.BT, d.s.OC);
}
void dbias_kernel(Data& d, int) {
  llmc::matmul_bias_grad(d.buf.dbias, d.buf.bias_scratch, d.buf.dout, d.s.BT, d.s.OC, 0);
}
void dbias_kernel_fp8(Data& d, int) {
  llmc::matmul_bias_grad(d.buf.dbias, d.buf.bias_scratch, d.buf.dout, d.s.BT, d.s.OC, 0, d.fp8->dout_by_bias());
}

void fwd_bias_timed(Data& d, int) {
  llmc::matmul_forward(*d.fwd_search, d.buf.out, d.buf.inp, d.buf.weight, d.buf.bias, d.s.BT, d.s.C, d.s.OC, 0);
}
void bwd_dweight_timed(Data& d, int) {
  llmc::lt_gemm(*d.dweight_search, llmc::weight_grad_gemm(d.buf.dweight, d.buf.dout, d.buf.inp, d.s.BT, d.s.C, d.s.OC),
                0);
}

template <bool kFastAccum>
void fwd_bias_fp8(Data& d, int) {
  llmc::matmul_forward_fp8(d.ctx, d.buf.out, d.fp8->inp_m, d.fp8->w_m, d.buf.bias, d.s.BT, d.s.C, d.s.OC, kFastAccum,
                           0);
}
void fwd_gelu_fp8(Data& d, int) {
  llmc::matmul_forward_fp8_gelu(d.ctx, d.fp8->gelu_sink(), d.buf.aux, d.fp8->inp_m, d.fp8->w_m, d.buf.bias, d.s.BT,
                                d.s.C, d.s.OC, false, 0);
}

// The weight gradient from FP8 copies (a path the trainer does not have; docs/cuda-trainer.md,
// "FP8 matmuls", weighs it): column-major dweight_c (C x OC) += op(A) B over k = BT, where cuBLASLt's
// TN layout asks for A = inp^T stored BT x C column-major (inp's transposed E4M3 copy, op T) and
// B = dout^T stored BT x OC column-major (dout's transposed E5M2 copy). kCasts: the two transposing
// casts first, as that path would run them every micro-step.
template <bool kCasts>
void bwd_dweight_fp8(Data& d, int) {
  if (kCasts) d.fp8->cast_transposes(d.buf, d.s);
  llmc::LtGemm g{.d = d.buf.dweight, .m = d.s.C, .n = d.s.OC, .k = d.s.BT, .transpose_a = true, .lda = d.s.BT,
                 .ldb = d.s.BT, .ldd = d.s.C, .accumulate = true};
  g.fp8 = true;
  g.a8 = d.fp8->inp_tm;
  g.b8 = d.fp8->dout_tm;
  llmc::lt_gemm(d.ctx, g, 0);
}

void bwd_dinp_fp8(Data& d, int) {
  llmc::MatmulBackward p{.dinp = d.buf.dinp, .BT = d.s.BT, .C = d.s.C, .OC = d.s.OC};
  p.dout8 = d.fp8->dout_m;
  p.weight_t8 = d.fp8->wt_m;
  llmc::matmul_backward_input(d.ctx, p, 0);
}

// Bytes: each operand read once and the output written once (in floatX; FP8 operands a byte an
// element), with the passes over the output an unfused GELU adds; FLOPs: the GEMM's 2*BT*C*OC.
constexpr double kE = sizeof(floatX);
double gemm_flops(const Data& d) { return 2.0 * d.s.BT * d.s.C * d.s.OC; }
bench::Cost forward_cost(const Data& d) { return {kE * (d.s.n_in() + d.s.n_w() + d.s.n_out()), gemm_flops(d)}; }
template <bool kEpilogue>
bench::Cost fwd_gelu_cost(const Data& d) {
  return {forward_cost(d).bytes + kE * d.s.n_out() * (kEpilogue ? 1 : 3), gemm_flops(d)};
}
bench::Cost dinp_cost(const Data& d) { return {kE * (d.s.n_out() + d.s.n_w() + d.s.n_in()), gemm_flops(d)}; }
template <bool kEpilogue>
bench::Cost dgelu_cost(const Data& d) {
  return {dinp_cost(d).bytes + kE * d.s.n_in() * (kEpilogue ? 1 : 3), gemm_flops(d)};
}
bench::Cost dgelu_bias_cost(const Data& d) {
  return {dgelu_cost<false>(d).bytes + kE * (d.s.n_in() + 3.0 * d.s.C), gemm_flops(d)};
}
bench::Cost dweight_cost(const Data& d) { return {kE * (d.s.n_out() + d.s.n_in() + 2 * d.s.n_w()), gemm_flops(d)}; }
bench::Cost dbias_cost(const Data& d) { return {kE * (d.s.n_out() + 2.0 * d.s.OC), 0.0}; }
bench::Cost dbias_fp8_cost(const Data& d) { return {dbias_cost(d).bytes + double(d.s.n_out()), 0.0}; }
bench::Cost fwd_fp8_cost(const Data& d) { return {double(d.s.n_in() + d.s.n_w()) + kE * d.s.n_out(), gemm_flops(d)}; }
bench::Cost fwd_gelu_fp8_cost(const Data& d) {
  return {double(d.s.n_in() + d.s.n_w()) + (1 + kE) * d.s.n_out(), gemm_flops(d)};
}
bench::Cost dinp_fp8_cost(const Data& d) { return {double(d.s.n_out() + d.s.n_w()) + kE * d.s.n_in(), gemm_flops(d)}; }
// The casts read inp and dout in floatX and write their FP8 transposes, which the GEMM reads.
template <bool kCasts>
bench::Cost dweight_fp8_cost(const Data& d) {
  const double operands = double(d.s.n_in() + d.s.n_out());
  return {operands * (kCasts ? 2 + kE : 1) + 2 * kE * d.s.n_w(), gemm_flops(d)};
}

using Version = bench::Version<Data>;

// Lines are named version first, then the shape (`tag`); an accumulating output's, with what it is
// and "(+=)" between the two.
std::string accumulated(const Version& v, const Data& d, const std::string& what) {
  return fmt::format("{}{} (+=) {}", v.name, what, d.s.name);
}

// The versions with one overwritten output: launched once into the poisoned output, checked.
bool check_out(Data& d, const Version& v, const std::string& tag, int block) {
  bench::poison(d.buf.out, d.s.n_out() * sizeof(floatX));
  v.launch(d, block);
  return bench::check(tag, bench::from_device(d.buf.out, d.s.n_out()), v.name == "fwd" ? d.r.out_nobias : d.r.out_bias,
                      kTol);
}

bool check_gelu(Data& d, const Version& v, const std::string& tag, int block) {
  bench::poison(d.buf.out, d.s.n_out() * sizeof(floatX));
  bench::poison(d.buf.aux, d.s.n_out() * sizeof(floatX));
  v.launch(d, block);
  bool ok = bench::check(tag + " out", bench::from_device(d.buf.out, d.s.n_out()), d.r.out_gelu, kTol);
  ok &= bench::check(tag + " pre-activation", bench::from_device(d.buf.aux, d.s.n_out()), d.r.out_bias, kTol);
  return ok;
}

bool check_dinp(Data& d, const Version& v, const std::string& tag, int block) {
  bench::poison(d.buf.dinp, d.s.n_in() * sizeof(floatX));
  v.launch(d, block);
  return bench::check(tag, bench::from_device(d.buf.dinp, d.s.n_in()), v.name == "bwd_dinp" ? d.r.dinp : d.r.dinp_dgelu,
                      kTol);
}

// dinp, and the bias gradient it added its column sums to, from the initial one.
bool check_dinp_bias(Data& d, const Version& v, const std::string& tag, int block) {
  bench::poison(d.buf.dinp, d.s.n_in() * sizeof(floatX));
  bench::upload(d.buf.dpre_bias, d.r.dpre_bias0);
  v.launch(d, block);
  bool ok = bench::check(tag + " dinp", bench::from_device(d.buf.dinp, d.s.n_in()), d.r.dinp_dgelu, kTol);
  ok &= bench::check(accumulated(v, d, " dbias of the GELU's layer"), bench::from_device(d.buf.dpre_bias, d.s.C),
                     d.r.dpre_bias, kTol);
  return ok;
}

// check_dinp_bias; and dbias_pre_gelu where the DGELU epilogue would run, which cannot sum it,
// refused before anything runs.
bool check_dinp_gelu_fused_bias(Data& d, const Version& v, const std::string& tag, int block) {
  const bool ok = check_dinp_bias(d, v, tag, block);
  llmc::MatmulBackward p = gelu_bias_backward<true>(d);
  p.dgelu_epilogue = true;
  bool refused = false;
  try {
    llmc::matmul_backward_input(d.ctx, p, 0);
  } catch (const std::invalid_argument&) {
    refused = true;
  }
  fmt::print("{}  {}  with the DGELU epilogue: refused\n", refused ? "PASS" : "FAIL", tag);
  return ok && refused;
}

// The accumulating weight gradient: reset to the random initial gradient, checked after one launch
// (the timings then keep accumulating into it).
bool check_dweight(Data& d, const Version& v, const std::string&, int block) {
  bench::upload(d.buf.dweight, d.r.dweight0);
  v.launch(d, block);
  return bench::check(accumulated(v, d, ""), bench::from_device(d.buf.dweight, d.s.n_w()), d.r.dweight, kTol);
}

// A search of one GEMM chose one algorithm, and stays with it: a second launch searches no more.
bool check_searched(const std::string& tag, const llmc::BlasContext& searched) {
  const bool one = searched.searched().algos.size() == 1 && searched.cached_algorithms() == 1;
  fmt::print("{}  {}  the search chose one algorithm for its one shape\n", one ? "PASS" : "FAIL", tag);
  return one;
}

// The timed search, as the trainer's tuning pass runs it: the first launch times every candidate on
// the real buffers and runs the fastest last, so an overwriting GEMM's output is the chosen
// algorithm's; a second launch must search no more.
bool check_fwd_bias_timed(Data& d, const Version& v, const std::string& tag, int block) {
  d.fwd_search.emplace(d.ctx.workspace(), d.ctx.workspace_bytes());
  d.fwd_search->begin_search();
  bool ok = check_out(d, v, tag, block);
  v.launch(d, block);
  return check_searched(tag, *d.fwd_search) && ok;
}

// An accumulating GEMM has added 2 x candidates + 1 times during the search, so it is reset and run
// again with the algorithm chosen.
bool check_bwd_dweight_timed(Data& d, const Version& v, const std::string& tag, int block) {
  d.dweight_search.emplace(d.ctx.workspace(), d.ctx.workspace_bytes());
  d.dweight_search->begin_search();
  v.launch(d, block);
  d.dweight_search->end_search();
  const bool ok = check_dweight(d, v, tag, block);
  return check_searched(tag, *d.dweight_search) && ok;
}

// The two deterministic kernel paths: checked, then run again from the same start for the same bits.
bool check_dbias(Data& d, const Version& v, const std::string& tag, int block) {
  bench::upload(d.buf.dbias, d.r.dbias0);
  v.launch(d, block);
  const std::vector<float> first = bench::from_device(d.buf.dbias, d.s.OC);
  bool ok = bench::check(tag + " (+=)", first, d.r.dbias, kTol);
  bench::upload(d.buf.dbias, d.r.dbias0);
  v.launch(d, block);
  const bool same = bench::from_device(d.buf.dbias, d.s.OC) == first;
  fmt::print("{}  {}  bitwise identical on a second run\n", same ? "PASS" : "FAIL", tag);
  return ok && same;
}

// The bias-gradient kernels writing dout's E5M2 copy (LLMC_FP8_DQKV_CAST=bias-grad): dbias as
// dbias_kernel's, the copy byte for byte fp8_cast's (the FP8 operands' dout8), the amax max |dout|.
bool check_dbias_fp8(Data& d, const Version& v, const std::string& tag, int block) {
  if (!d.fp8) return true;
  CUDA_CHECK(cudaMemset(d.fp8->state + llmc::fp8_amax_offset(d.fp8->gradient), 0,
                        llmc::kFp8AmaxSlots * llmc::kFp8AmaxSlotStride * sizeof(float)));
  bench::poison(d.fp8->dout8_by_bias, d.s.n_out());
  bool ok = check_dbias(d, v, tag, block);
  std::vector<uint8_t> by_bias(d.s.n_out()), by_cast(d.s.n_out());
  CUDA_CHECK(cudaMemcpy(by_bias.data(), d.fp8->dout8_by_bias, by_bias.size(), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(by_cast.data(), d.fp8->dout8, by_cast.size(), cudaMemcpyDeviceToHost));
  size_t differ = 0;
  for (size_t i = 0; i < by_bias.size(); ++i) differ += by_bias[i] != by_cast[i];
  fmt::print("{}  {}  E5M2 copy: {} of {} bytes differ from fp8_cast's\n", differ == 0 ? "PASS" : "FAIL", tag, differ,
             by_bias.size());
  float amax = 0.0f;
  for (float x : d.r.dout) amax = std::max(amax, std::fabs(x));
  const float recorded = d.fp8->amax(d.fp8->gradient);
  fmt::print("{}  {}  amax {:.9g} (expected {:.9g})\n", recorded == amax ? "PASS" : "FAIL", tag, recorded, amax);
  return ok && differ == 0 && recorded == amax;
}

// The FP8 GEMMs against the CPU layer run on the very values the FP8 copies hold, so only the
// accumulation and the output's rounding differ. Where there are no FP8 operands, run() has said so.
bool check_fwd_fp8(Data& d, const Version& v, const std::string& tag, int block) {
  if (!d.fp8) return true;
  std::vector<float> ref(d.s.n_out());
  llmc::matmul_forward(ref.data(), d.fp8->inp.data(), d.fp8->w.data(), d.r.bias.data(), d.s.BT, d.s.C, d.s.OC);
  bench::poison(d.buf.out, d.s.n_out() * sizeof(floatX));
  v.launch(d, block);
  return bench::check(tag, bench::from_device(d.buf.out, d.s.n_out()), ref, kTol);
}

bool check_dinp_fp8(Data& d, const Version& v, const std::string& tag, int block) {
  if (!d.fp8) return true;
  std::vector<float> ref(d.s.n_in()), dweight(d.s.n_w(), 0.0f), dbias(size_t(d.s.OC), 0.0f);
  llmc::matmul_backward(ref.data(), dweight.data(), dbias.data(), d.fp8->dout.data(), d.r.inp.data(),
                        d.fp8->w.data(), d.s.BT, d.s.C, d.s.OC);
  bench::poison(d.buf.dinp, d.s.n_in() * sizeof(floatX));
  v.launch(d, block);
  return bench::check(tag, bench::from_device(d.buf.dinp, d.s.n_in()), ref, kTol);
}

// LLMC_FP8_GELU=epilogue: the E4M3 GELU of the FP8 product plus the bias, decoded (within E4M3's
// rounding, 2^-4 of each value), its amax (unscaled) and the bf16 pre-activation in the aux.
bool check_fwd_gelu_fp8(Data& d, const Version& v, const std::string& tag, int block) {
  if (!d.fp8) return true;
  std::vector<float> pre(d.s.n_out()), gelu(d.s.n_out());
  llmc::matmul_forward(pre.data(), d.fp8->inp.data(), d.fp8->w.data(), d.r.bias.data(), d.s.BT, d.s.C, d.s.OC);
  llmc::gelu_forward(gelu.data(), pre.data(), pre.size());
  CUDA_CHECK(cudaMemset(d.fp8->state + llmc::fp8_amax_offset(d.fp8->gelu), 0,
                        llmc::kFp8AmaxSlots * llmc::kFp8AmaxSlotStride * sizeof(float)));
  bench::poison(d.buf.aux, d.s.n_out() * sizeof(floatX));
  v.launch(d, block);
  std::vector<uint8_t> codes(d.s.n_out());
  CUDA_CHECK(cudaMemcpy(codes.data(), d.fp8->gelu8, codes.size(), cudaMemcpyDeviceToHost));
  std::vector<float> decoded(codes.size());
  for (size_t i = 0; i < codes.size(); ++i)
    decoded[i] = __half2float(__half(__nv_cvt_fp8_to_halfraw(codes[i], __NV_E4M3))) / Fp8Operands::kGeluScale;
  bool ok = bench::check(tag + " E4M3 gelu", decoded, gelu, 0.07);
  ok &= bench::check(tag + " aux", bench::from_device(d.buf.aux, d.s.n_out()), pre, kTol);
  const float amax = d.fp8->amax(d.fp8->gelu), want = *std::max_element(gelu.begin(), gelu.end());
  const bool amax_ok = std::fabs(amax - want) <= 1e-2 * want;
  fmt::print("{}  {} amax {:.6f} vs cpu {:.6f}\n", amax_ok ? "PASS" : "FAIL", tag, amax, want);
  return ok && amax_ok;
}

// The FP8 weight gradient: from dweight0, against the CPU layer on the values the FP8 copies hold.
// The transposes are poisoned first where the version casts them (kCasts), so that its casts must write them.
// cuBLASLt takes FP8 operands with leading dimensions of 16 only, here B*T.
bool has_fp8_dweight(const Data& d) { return d.fp8.has_value() && d.s.BT % 16 == 0; }

template <bool kCasts>
bool check_dweight_fp8(Data& d, const Version& v, const std::string& tag, int block) {
  if (!d.fp8) return true;
  if (!has_fp8_dweight(d)) {
    fmt::print("UNSUPPORTED  {}  FP8 operands of B*T rows need B*T a multiple of 16\n", tag);
    return true;
  }
  std::vector<float> dinp(d.s.n_in()), dweight = d.r.dweight0, dbias(size_t(d.s.OC), 0.0f);
  llmc::matmul_backward(dinp.data(), dweight.data(), dbias.data(), d.fp8->dout.data(), d.fp8->inp.data(),
                        d.r.weight.data(), d.s.BT, d.s.C, d.s.OC);
  if (kCasts) {
    bench::poison(d.fp8->inp_t8, d.s.n_in());
    bench::poison(d.fp8->dout_t8, d.s.n_out());
  }
  bench::upload(d.buf.dweight, d.r.dweight0);
  v.launch(d, block);
  return bench::check(accumulated(v, d, ""), bench::from_device(d.buf.dweight, d.s.n_w()), dweight, kTol);
}

bool has_fp8(const Data& d) { return d.fp8.has_value(); }

const std::vector<Version> kVersions = {
    {"fwd", "no epilogue", {}, fwd<false>, check_out, forward_cost},
    {"fwd_bias", "bias epilogue", {}, fwd<true>, check_out, forward_cost},
    {"fwd_gelu", "bias + GELU epilogue, the pre-activation as aux (LLMC_GELU=epilogues)", {}, fwd_gelu<true>,
     check_gelu, fwd_gelu_cost<true>},
    {"fwd_gelu_kernel", "bias epilogue, then the GELU kernel (LLMC_GELU=kernels)", {}, fwd_gelu<false>, check_gelu,
     fwd_gelu_cost<false>},
    {"bwd_dinp", "the input gradient", {}, bwd_dinp, check_dinp, dinp_cost},
    {"bwd_dinp_dgelu", "the input gradient with the DGELU epilogue", {}, bwd_dinp_dgelu<true>, check_dinp,
     dgelu_cost<true>},
    {"bwd_dinp_gelu_kernel", "the input gradient, then the GELU backward kernel", {}, bwd_dinp_dgelu<false>,
     check_dinp, dgelu_cost<false>},
    {"bwd_dinp_gelu_kernel_bgrad",
     "bwd_dinp_gelu_kernel, then the bias-gradient kernels on dinp: the fc bias gradient as "
     "LLMC_FP8_FC_BIAS_GRAD=kernels sums it",
     {}, bwd_dinp_gelu_bias<false>, check_dinp_bias, dgelu_bias_cost},
    {"bwd_dinp_gelu_fused_bgrad",
     "bwd_dinp_gelu_kernel_bgrad in one pass: the bias-gradient kernels run the GELU backward on the vectors they "
     "sum (LLMC_FP8_FC_BIAS_GRAD=gelu-backward)",
     {}, bwd_dinp_gelu_bias<true>, check_dinp_gelu_fused_bias, dgelu_cost<false>},
    {"bwd_dweight", "the weight gradient, accumulating", {}, bwd_dweight, check_dweight, dweight_cost},
    {"dbias_serial",
     "the slice kernel, then a thread per column adding every slice in turn (the trainer's earlier second pass)", {},
     dbias_serial, check_dbias, dbias_cost},
    {"dbias_kernel", "llmc/cuda/matmul.cuh: slices summed by 32 warps per 32 columns, deterministic", {},
     dbias_kernel, check_dbias, dbias_cost},
    {"dbias_kernel_fp8", "dbias_kernel also writing dout's E5M2 copy as it reads it (LLMC_FP8_DQKV_CAST=bias-grad)",
     {}, dbias_kernel_fp8, check_dbias_fp8, dbias_fp8_cost, has_fp8},
    {"fwd_bias_timed", "fwd_bias with the timed search's algorithm (LLMC_GEMM_SEARCH=timed)", {}, fwd_bias_timed,
     check_fwd_bias_timed, forward_cost},
    {"bwd_dweight_timed", "bwd_dweight with the timed search's algorithm (LLMC_GEMM_SEARCH=timed)", {},
     bwd_dweight_timed, check_bwd_dweight_timed, dweight_cost},
    {"fwd_bias_fp8", "--fp8 1: operands cast to E4M3 by the trainer's kernels, cuBLASLt's FP8 GEMM (bf16 build)", {},
     fwd_bias_fp8<false>, check_fwd_fp8, fwd_fp8_cost, has_fp8},
    {"fwd_bias_fp8_fast", "fwd_bias_fp8 with cuBLASLt's fast accumulation (LLMC_FP8_FAST_ACCUM=forward)", {},
     fwd_bias_fp8<true>, check_fwd_fp8, fwd_fp8_cost, has_fp8},
    {"fwd_gelu_fp8", "--fp8 1, LLMC_FP8_GELU=epilogue: GELU_AUX_BIAS, the GELU's E4M3 copy as D, bf16 aux", {},
     fwd_gelu_fp8, check_fwd_gelu_fp8, fwd_gelu_fp8_cost, has_fp8},
    {"bwd_dinp_fp8", "--fp8 1: dout in E5M2, the weight's transposed E4M3 copy, FP8 GEMM (bf16 build)", {},
     bwd_dinp_fp8, check_dinp_fp8, dinp_fp8_cost, has_fp8},
    {"bwd_dweight_fp8",
     "the weight gradient as an FP8 GEMM of inp's transposed E4M3 copy and dout's transposed E5M2 one, accumulating "
     "(not in the trainer: measured against bwd_dweight to weigh that path; bf16 build)",
     {}, bwd_dweight_fp8<false>, check_dweight_fp8<false>, dweight_fp8_cost<false>, has_fp8_dweight},
    {"bwd_dweight_fp8_casts", "bwd_dweight_fp8 with the two transposing casts from inp and dout it needs first", {},
     bwd_dweight_fp8<true>, check_dweight_fp8<true>, dweight_fp8_cost<true>, has_fp8_dweight},
};

// Checks, then (unless --check, and where every check passed) times every selected version at s.
bool run_shape(const bench::Args& args, llmc::BlasContext& ctx, const Shape& s, uint64_t seed) {
  fmt::print("== {}: BT={} C={} OC={}\n", s.name, s.BT, s.C, s.OC);
  const Reference r = make_reference(s, seed);
  DeviceBuffers buf(s, r);
  Data d{s, r, buf, ctx};
  // The versions that read the FP8 operands are those with "fp8" in their names.
  if (std::any_of(kVersions.begin(), kVersions.end(), [&](const Version& v) {
        return v.name.find("fp8") != std::string::npos && bench::selected(args, v.name);
      })) {
    // FP8 needs bf16 activations and leading dimensions that are multiples of 16.
    if (std::is_same<floatX, __nv_bfloat16>::value && s.C % 16 == 0 && s.OC % 16 == 0)
      d.fp8.emplace(s, r, buf);
    else
      fmt::print("UNSUPPORTED  fp8 {}  FP8 GEMMs need the bf16 build and C, OC multiples of 16\n", s.name);
  }
  return bench::run_versions(args, kVersions, d, "", true, " " + std::string(s.name));
}

bool run(const bench::Args& args) {
  const size_t workspace_bytes = size_t(32) << 20;
  void* workspace = nullptr;
  CUDA_CHECK(cudaMalloc(&workspace, workspace_bytes));
  llmc::BlasContext ctx(workspace, workspace_bytes);
  // A layer's four GEMMs at B*T rows of C channels: qkv, attproj, fc, fcproj.
  const int BT = int(args.dim("-BT")), C = int(args.dim("-C"));
  const Shape shapes[] = {{"qkv", BT, C, 3 * C},
                          {"attproj", BT, C, C},
                          {"fc", BT, C, 4 * C},
                          {"fcproj", BT, 4 * C, C},
                          // Tails everywhere: BT not a multiple of the bias kernel's 64-row slices,
                          // OC not a multiple of its 256 columns, matrices not 256-byte aligned.
                          // OC = 272 = 17 x 16 and BT = 208 = 13 x 16: the least FP8 takes
                          // (leading dimensions of 16).
                          {"odd", 208, 96, 272, 8}};
  uint64_t seed = 1000;
  bool ok = true;
  // --small: the odd shape alone; a shape of one's own: the four GEMMs alone.
  for (const Shape& s : shapes)
    if (s.offset != 0 ? !args.shape_given : !args.small) ok &= run_shape(args, ctx, s, seed += 100);
  fmt::print("cached cuBLASLt algorithms: {}\n", ctx.cached_algorithms());
  CUDA_CHECK(cudaFree(workspace));
  fmt::print("{}\n", ok ? "all checks passed" : "SOME CHECKS FAILED");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  // GPT-2 124M at B*T = 8*1024; channels in whole 16-byte vectors.
  const std::vector<bench::Dim> shape = {{"-BT", "rows (B*T)", 8 * 1024},
                                         {"-C", "channels", 768, llmc::Packed128<floatX>::size}};
  return bench::run_main(argc, argv, shape, bench::infos(kVersions), run);
}
