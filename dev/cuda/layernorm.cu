// LayerNorm forward, fused residual + LayerNorm forward, encoder + LayerNorm forward, and backward:
// versions checked against llmc/cpu/layernorm.h (and llmc/cpu/residual.h, llmc/cpu/encoder.h), then
// timed. The trainer's forward is fwd3, fused3 and enc2 (the registers kernel), bit for bit fwd2,
// fused2 and enc1 (the staged kernel), rows too wide to hold in registers too (C=1600 in fp32 and
// C=2304 here); its backward is bwd2. The versions: kVersions below (or --help).
#include <algorithm>

#include "dev/cuda/versions.cuh"
#include "llmc/cpu/encoder.h"
#include "llmc/cpu/layernorm.h"
#include "llmc/cpu/residual.h"
#include "llmc/cuda/layernorm.cuh"
#include "llmc/cuda/layernorm_forward.cuh"

using llmc::floatX;

namespace {

__global__ void layernorm_forward_naive(floatX* out, float* mean, float* rstd, const floatX* inp,
                                        const floatX* weight, const floatX* bias, int N_, int C_) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= N_) return;
  const floatX* x = inp + static_cast<long long>(row) * C_;
  float sum = 0.0f;
  for (int c = 0; c < C_; ++c) sum += float(x[c]);
  const float m = sum / C_;
  float sq = 0.0f;
  for (int c = 0; c < C_; ++c) sq += (float(x[c]) - m) * (float(x[c]) - m);
  const float s = 1.0f / sqrtf(sq / C_ + llmc::kLayerNormEpsF);
  for (int c = 0; c < C_; ++c)
    out[static_cast<long long>(row) * C_ + c] = floatX((float(x[c]) - m) * s * float(weight[c]) + float(bias[c]));
  mean[row] = m;
  rstd[row] = s;
}

__global__ void residual_naive(floatX* out, const floatX* a, const floatX* b, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = floatX(float(a[i]) + float(b[i]));
}

// out = wte[tokens[row]] + wpe[row % T] (rounded to floatX), a thread per element.
__global__ void encoder_naive(floatX* out, const int* tokens, const floatX* wte, const floatX* wpe, int N_, int T_,
                              int C_) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<long long>(N_) * C_) return;
  const int row = static_cast<int>(i / C_), c = static_cast<int>(i % C_);
  out[i] = floatX(float(wte[static_cast<long long>(tokens[row]) * C_ + c]) +
                  float(wpe[static_cast<long long>(row % T_) * C_ + c]));
}

// A warp per row, its row staged once in shared memory (global memory read once), then the mean,
// the variance (two-pass, from the staged copy) and the output. With kResidual, x = a + b (rounded
// to floatX) is also written to residual_out; otherwise x = a. The trainer's before the registers
// kernel, and for rows too wide for it until that kernel read them again in each pass.
template <bool kResidual>
__global__ void layernorm_forward_staged(floatX* out, floatX* residual_out, float* mean, float* rstd, const floatX* a,
                                         const floatX* b, const floatX* weight, const floatX* bias, int N_, int C_) {
  constexpr int S = llmc::Packed128<floatX>::size;
  const int warps = blockDim.x / llmc::kWarpSize;
  const int warp = threadIdx.x / llmc::kWarpSize;
  const int lane = threadIdx.x % llmc::kWarpSize;
  const int row = blockIdx.x * warps + warp;
  if (row >= N_) return;
  floatX* x = llmc::dynamic_shared<floatX>() + static_cast<size_t>(warp) * C_;
  const long long base = static_cast<long long>(row) * C_;
  const int vectors = C_ / S;

  float sum = 0.0f;
  for (int v = lane; v < vectors; v += llmc::kWarpSize) {
    llmc::Packed128<floatX> xv = llmc::load128cs(a + base + v * S);
    if constexpr (kResidual) {
      const llmc::Packed128<floatX> bv = llmc::load128cs(b + base + v * S);
      for (int k = 0; k < S; ++k) xv[k] = floatX(float(xv[k]) + float(bv[k]));
      llmc::store128(residual_out + base + v * S, xv);
    }
    llmc::store128(x + v * S, xv);
    for (int k = 0; k < S; ++k) sum += float(xv[k]);
  }
  const float m = llmc::warp_reduce_sum(sum) / C_;

  // Each lane re-reads only the vectors it staged itself, so no barrier is needed.
  float sq = 0.0f;
  for (int v = lane; v < vectors; v += llmc::kWarpSize) {
    const llmc::Packed128<floatX> xv = llmc::load128(x + v * S);
    for (int k = 0; k < S; ++k) {
      const float dx = float(xv[k]) - m;
      sq += dx * dx;
    }
  }
  const float s = rsqrtf(llmc::warp_reduce_sum(sq) / C_ + llmc::kLayerNormEpsF);

  for (int v = lane; v < vectors; v += llmc::kWarpSize) {
    const llmc::Packed128<floatX> xv = llmc::load128(x + v * S);
    const llmc::Packed128<floatX> w = llmc::load128(weight + v * S);
    const llmc::Packed128<floatX> bb = llmc::load128(bias + v * S);
    llmc::Packed128<floatX> o;
    for (int k = 0; k < S; ++k) o[k] = floatX((float(xv[k]) - m) * s * float(w[k]) + float(bb[k]));
    llmc::store128(out + base + v * S, o);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

__global__ void layernorm_backward_dinp_naive(floatX* dinp, const floatX* dout, const floatX* inp, const floatX* weight,
                                              const float* mean, const float* rstd, int N_, int C_) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= N_) return;
  const long long base = static_cast<long long>(row) * C_;
  const float m = mean[row], s = rstd[row];
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int c = 0; c < C_; ++c) {
    const float g = float(dout[base + c]) * float(weight[c]);
    sum_g += g;
    sum_gx += g * (float(inp[base + c]) - m) * s;
  }
  const float mean_g = sum_g / C_, mean_gx = sum_gx / C_;
  for (int c = 0; c < C_; ++c) {
    const float xhat = (float(inp[base + c]) - m) * s;
    const float g = float(dout[base + c]) * float(weight[c]);
    dinp[base + c] = floatX(float(dinp[base + c]) + s * (g - mean_g - xhat * mean_gx));
  }
}

__global__ void layernorm_backward_params_naive(floatX* dweight, floatX* dbias, const floatX* dout, const floatX* inp,
                                                const float* mean, const float* rstd, int N_, int C_) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C_) return;
  float dw = 0.0f, db = 0.0f;
  for (int row = 0; row < N_; ++row) {
    const long long i = static_cast<long long>(row) * C_ + c;
    dw += float(dout[i]) * (float(inp[i]) - mean[row]) * rstd[row];
    db += float(dout[i]);
  }
  dweight[c] = floatX(float(dweight[c]) + dw);
  dbias[c] = floatX(float(dbias[c]) + db);
}

// The inputs, the outputs and the CPU's answers at one shape. The encoder versions read N = B x T
// tokens of a vocabulary of kVocab, with T = kPositions where it divides N (else 1).
constexpr int kVocab = 50, kPositions = 4;
struct Data {
  int N, C, T;
  floatX *a, *b, *weight, *bias, *out, *residual, *dout, *dinp, *dweight, *dbias, *wte, *wpe;
  float *mean, *rstd, *scratch;
  int* tokens;
  std::vector<float> out_ref, mean_ref, rstd_ref, residual_ref, fused_out_ref, fused_mean_ref, fused_rstd_ref;
  std::vector<float> enc_residual_ref, enc_out_ref, enc_mean_ref, enc_rstd_ref;
  std::vector<float> dinp0, dweight0, dbias0, dinp_ref, dweight_ref, dbias_ref;
};

// The staged kernel on x = a (or a + b with kResidual) at `block` threads; block 0: as many warps as
// the default shared memory holds rows, up to 8 (as the trainer launched it).
template <bool kResidual>
void launch_staged(const Data& d, const floatX* a, int block) {
  const int row_bytes = d.C * static_cast<int>(sizeof(floatX));
  const int warps = block ? block / llmc::kWarpSize : std::clamp(llmc::kLayerNormSharedBudget / row_bytes, 1, 8);
  const size_t shared = static_cast<size_t>(warps) * row_bytes;
  if (shared > static_cast<size_t>(llmc::kLayerNormSharedBudget))
    throw std::invalid_argument(fmt::format("layernorm: {} warps of C={} need {} bytes of shared memory, over {}",
                                            warps, d.C, shared, llmc::kLayerNormSharedBudget));
  llmc::launch<layernorm_forward_staged<kResidual>>(llmc::ceil_div(d.N, warps), warps * llmc::kWarpSize, shared, 0,
                                                    d.out, kResidual ? d.residual : nullptr, d.mean, d.rstd, a,
                                                    kResidual ? d.b : nullptr, d.weight, d.bias, d.N, d.C);
}

void fwd1(Data& d, int block) {
  block = block ? block : 128;
  llmc::launch<layernorm_forward_naive>(llmc::ceil_div(d.N, block), block, 0, 0, d.out, d.mean, d.rstd, d.a, d.weight,
                                        d.bias, d.N, d.C);
}

void fwd2(Data& d, int block) { launch_staged<false>(d, d.a, block); }

// The registers kernel (llmc/cuda/layernorm_forward.cuh) at `block` threads, a warp per row.
template <llmc::LayerNormSource kSource>
void launch_registers_kernel(const Data& d, int block) {
  const int vectors = llmc::layernorm_register_vectors(d.C);
  const bool input = kSource == llmc::LayerNormSource::kInput, embedding = kSource == llmc::LayerNormSource::kEmbedding;
  llmc::launch_layernorm_forward_registers<kSource>(
      vectors, block / llmc::kWarpSize, d.out, input ? nullptr : d.residual, d.mean, d.rstd, embedding ? d.wte : d.a,
      input ? nullptr : embedding ? d.wpe : d.b, embedding ? d.tokens : nullptr, embedding ? d.T : 1, d.weight,
      d.bias, d.N, d.C, 0, llmc::Fp8Sink{});
}

void fwd3(Data& d, int block) {
  if (block == 0)
    llmc::layernorm_forward(d.out, d.mean, d.rstd, d.a, d.weight, d.bias, d.N, d.C, 0);
  else
    launch_registers_kernel<llmc::LayerNormSource::kInput>(d, block);
}

void fused3(Data& d, int block) {
  if (block == 0)
    llmc::fused_residual_layernorm_forward(d.residual, d.out, d.mean, d.rstd, d.a, d.b, d.weight, d.bias, d.N, d.C, 0);
  else
    launch_registers_kernel<llmc::LayerNormSource::kResidual>(d, block);
}

// The encoder forward, then the staged kernel on its output (enc1); as the trainer runs them (enc2,
// block 0).
void enc1(Data& d, int) {
  llmc::launch<encoder_naive>(llmc::ceil_div(static_cast<long long>(d.N) * d.C, 256), 256, 0, 0, d.residual, d.tokens,
                              d.wte, d.wpe, d.N, d.T, d.C);
  launch_staged<false>(d, d.residual, 0);
}

void enc2(Data& d, int block) {
  if (block == 0)
    llmc::encoder_layernorm_forward(d.residual, d.out, d.mean, d.rstd, d.tokens, d.wte, d.wpe, d.weight, d.bias,
                                    d.N / d.T, d.T, d.C, 0);
  else
    launch_registers_kernel<llmc::LayerNormSource::kEmbedding>(d, block);
}

// `block`: the residual kernel's threads per block.
void fused1(Data& d, int block) {
  block = block ? block : 256;
  const size_t NC = static_cast<size_t>(d.N) * d.C;
  llmc::launch<residual_naive>(llmc::ceil_div(static_cast<long long>(NC), block), block, 0, 0, d.residual, d.a, d.b,
                               NC);
  launch_staged<false>(d, d.residual, 0);
}

void fused2(Data& d, int block) { launch_staged<true>(d, d.a, block); }

// `block`: threads per block of both kernels (rows for dinp, channels for dweight/dbias).
void bwd1(Data& d, int block) {
  block = block ? block : 128;
  llmc::launch<layernorm_backward_dinp_naive>(llmc::ceil_div(d.N, block), block, 0, 0, d.dinp, d.dout, d.a, d.weight,
                                              d.mean, d.rstd, d.N, d.C);
  llmc::launch<layernorm_backward_params_naive>(llmc::ceil_div(d.C, block), block, 0, 0, d.dweight, d.dbias, d.dout,
                                                d.a, d.mean, d.rstd, d.N, d.C);
}

// The backward's grid is fixed by (N, C), for bit-reproducible sums: no block-size parameter.
void bwd2(Data& d, int) {
  llmc::layernorm_backward(d.dinp, d.dweight, d.dbias, d.scratch, d.dout, d.a, d.weight, d.mean, d.rstd, d.N, d.C, 0);
}

// Bytes each version must move, N rows of C channels in floatX: the forward reads inp and writes
// out; the fused forward also reads b and writes the residual stream; the backward reads dout, inp
// and dinp and writes dinp. Each also reads or writes the N means and rstds (weights: C, left out).
double rows_bytes(const Data& d, int row_arrays) {
  return row_arrays * static_cast<double>(d.N) * d.C * sizeof(floatX) + 2.0 * d.N * sizeof(float);
}
bench::Cost forward_cost(const Data& d) { return {rows_bytes(d, 2)}; }
bench::Cost fused_cost(const Data& d) { return {rows_bytes(d, 4)}; }
bench::Cost backward_cost(const Data& d) { return {rows_bytes(d, 4)}; }
// The encoder and layer 0's LayerNorm: a wte row read per row (the vocabulary is small here, so
// mostly from cache: counted once per row, as at GPT-2's), the residual and the output written.
bench::Cost encoder_cost(const Data& d) { return {rows_bytes(d, 3)}; }

using Version = bench::Version<Data>;

// Outputs poisoned, one run of `launch`: out, mean, rstd and the residual stream (poison where the
// version does not write it).
std::vector<std::vector<float>> forward_outputs(Data& d, const std::function<void(Data&, int)>& launch, int block) {
  const size_t NC = static_cast<size_t>(d.N) * d.C;
  bench::poison(d.out, NC * sizeof(floatX));
  bench::poison(d.residual, NC * sizeof(floatX));
  bench::poison(d.mean, d.N * sizeof(float));
  bench::poison(d.rstd, d.N * sizeof(float));
  launch(d, block);
  return {bench::from_device(d.out, NC), bench::from_device(d.mean, d.N), bench::from_device(d.rstd, d.N),
          bench::from_device(d.residual, NC)};
}

// What the forward versions produce: x = a, a + b (fused) or the encoder's sum (encoder).
enum class ForwardKind { kPlain, kFused, kEncoder };

// The version run once against the CPU: out, mean and rstd (and the residual stream where written);
// with `same_as`, also bit for bit against that version's outputs (the registers kernel sums as
// the staged one does, rows it holds and rows it reads again alike).
bool check_forward_outputs(Data& d, const Version& v, const std::string& tag, int block, ForwardKind kind,
                           void (*same_as)(Data&, int) = nullptr) {
  const auto got = forward_outputs(d, v.launch, block);
  const bool fused = kind == ForwardKind::kFused, encoder = kind == ForwardKind::kEncoder;
  bool ok = bench::check(tag + " out", got[0], fused ? d.fused_out_ref : encoder ? d.enc_out_ref : d.out_ref, 1e-2);
  ok &= bench::check(tag + " mean", got[1], fused ? d.fused_mean_ref : encoder ? d.enc_mean_ref : d.mean_ref, 1e-5);
  ok &= bench::check(tag + " rstd", got[2], fused ? d.fused_rstd_ref : encoder ? d.enc_rstd_ref : d.rstd_ref, 1e-5);
  if (kind != ForwardKind::kPlain)
    ok &= bench::check(tag + " residual", got[3], fused ? d.residual_ref : d.enc_residual_ref, 1e-5);
  if (same_as) {
    const auto staged = forward_outputs(d, same_as, 0);
    const char* names[] = {" out", " mean", " rstd", " residual"};
    for (int i = 0; i < (kind == ForwardKind::kPlain ? 3 : 4); ++i)
      ok &= bench::check_identical(tag + names[i] + " = the staged kernel's", got[i], staged[i]);
  }
  return ok;
}
bool check_forward(Data& d, const Version& v, const std::string& tag, int block) {
  return check_forward_outputs(d, v, tag, block, ForwardKind::kPlain);
}
bool check_fused(Data& d, const Version& v, const std::string& tag, int block) {
  return check_forward_outputs(d, v, tag, block, ForwardKind::kFused);
}
bool check_fwd3(Data& d, const Version& v, const std::string& tag, int block) {
  return check_forward_outputs(d, v, tag, block, ForwardKind::kPlain, fwd2);
}
bool check_fused3(Data& d, const Version& v, const std::string& tag, int block) {
  return check_forward_outputs(d, v, tag, block, ForwardKind::kFused, fused2);
}
bool check_enc1(Data& d, const Version& v, const std::string& tag, int block) {
  return check_forward_outputs(d, v, tag, block, ForwardKind::kEncoder);
}
bool check_enc2(Data& d, const Version& v, const std::string& tag, int block) {
  return check_forward_outputs(d, v, tag, block, ForwardKind::kEncoder, enc1);
}
// dinp, dweight and dbias of one run of `launch` from the same accumulators.
std::vector<std::vector<float>> backward_outputs(Data& d, const std::function<void(Data&, int)>& launch, int block) {
  bench::upload(d.dinp, d.dinp0);
  bench::upload(d.dweight, d.dweight0);
  bench::upload(d.dbias, d.dbias0);
  launch(d, block);
  return {bench::from_device(d.dinp, static_cast<size_t>(d.N) * d.C), bench::from_device(d.dweight, d.C),
          bench::from_device(d.dbias, d.C)};
}

// Against the CPU, then dweight bitwise equal over a second run.
bool check_backward(Data& d, const Version& v, const std::string& tag, int block) {
  bench::upload(d.mean, d.mean_ref);
  bench::upload(d.rstd, d.rstd_ref);
  const auto first = backward_outputs(d, v.launch, block);
  bool ok = bench::check(tag + " dinp", first[0], d.dinp_ref, 1e-2);
  ok &= bench::check(tag + " dweight", first[1], d.dweight_ref, 1e-2);
  ok &= bench::check(tag + " dbias", first[2], d.dbias_ref, 1e-2);
  ok &= bench::check_identical(tag + " dweight", backward_outputs(d, v.launch, block)[1], first[1]);
  return ok;
}

const std::vector<Version> kVersions = {
    {"fwd1", "one thread per row, scalar loads", {128, 32, 64, 256, 512}, fwd1, check_forward, forward_cost},
    {"fwd2", "a warp per row, row staged in shared memory, 16-byte vectors (the trainer's before fwd3)",
     {0, 32, 64, 128, 256}, fwd2, check_forward, forward_cost},
    {"fused1", "a residual-add kernel, then fwd2 (two launches, the residual stream read back)",
     {256, 128, 512, 1024}, fused1, check_fused, fused_cost},
    {"fused2", "the residual add fused into fwd2's kernel (the trainer's before fused3)", {0, 32, 64, 128, 256}, fused2,
     check_fused, fused_cost},
    {"bwd1", "a thread per row for dinp, a thread per channel for dweight/dbias", {128, 32, 64, 256, 512}, bwd1,
     check_backward, backward_cost},
    {"bwd2", "llmc/cuda/layernorm.cuh: a warp per row, fixed-order block partials added by a second kernel", {}, bwd2,
     check_backward, backward_cost},
    {"fwd3",
     "llmc/cuda/layernorm_forward.cuh: a warp per row held in registers, every load in flight before the sums, or "
     "read again in each pass for rows too wide; fwd2's bits (block 0: the trainer's call)",
     {0, 32, 64, 128, 256}, fwd3, check_fwd3, forward_cost},
    {"fused3", "fwd3 with the residual add; fused2's bits", {0, 32, 64, 128, 256}, fused3, check_fused3, fused_cost},
    {"enc1", "the encoder forward, then fwd2 on its output: two launches (the trainer's layer 0 before enc2)", {}, enc1,
     check_enc1, encoder_cost},
    {"enc2", "fwd3 with the encoder's wte + wpe add (layer 0): one launch; enc1's bits", {0, 32, 64, 128, 256}, enc2,
     check_enc2, encoder_cost},
};

// Checks (and, when `timed`, times) every selected version of `versions` on N rows of C channels.
bool run_shape(const bench::Args& args, int N, int C, bool timed, const std::vector<Version>& versions = kVersions) {
  const size_t NC = static_cast<size_t>(N) * C;
  Data d{};
  d.N = N;
  d.C = C;
  d.T = N % kPositions == 0 ? kPositions : 1;
  // Inputs off-centre so that the row means are well away from zero (their relative error is checked).
  const auto a = bench::round_through<floatX>(bench::random_vector(NC, 11, -1.0f, 1.5f));
  const auto b = bench::round_through<floatX>(bench::random_vector(NC, 12));
  const auto weight = bench::round_through<floatX>(bench::random_vector(C, 13, 0.5f, 1.5f));
  const auto bias = bench::round_through<floatX>(bench::random_vector(C, 14));
  const auto dout = bench::round_through<floatX>(bench::random_vector(NC, 15));
  d.dinp0 = bench::round_through<floatX>(bench::random_vector(NC, 16));
  d.dweight0 = bench::round_through<floatX>(bench::random_vector(C, 17));
  d.dbias0 = bench::round_through<floatX>(bench::random_vector(C, 18));

  d.out_ref.resize(NC);
  d.mean_ref.resize(N);
  d.rstd_ref.resize(N);
  llmc::layernorm_forward(d.out_ref.data(), d.mean_ref.data(), d.rstd_ref.data(), a.data(), weight.data(), bias.data(),
                          N, C);
  d.residual_ref.resize(NC);
  llmc::residual_forward(d.residual_ref.data(), a.data(), b.data(), NC);
  d.residual_ref = bench::round_through<floatX>(d.residual_ref);  // the GPU stores the residual stream in floatX
  d.fused_out_ref.resize(NC);
  d.fused_mean_ref.resize(N);
  d.fused_rstd_ref.resize(N);
  llmc::layernorm_forward(d.fused_out_ref.data(), d.fused_mean_ref.data(), d.fused_rstd_ref.data(),
                          d.residual_ref.data(), weight.data(), bias.data(), N, C);
  const auto tokens = bench::random_ints(N, kVocab, 19);
  const auto wte = bench::round_through<floatX>(bench::random_vector(size_t(kVocab) * C, 20, -1.0f, 1.5f));
  const auto wpe = bench::round_through<floatX>(bench::random_vector(size_t(d.T) * C, 21));
  d.enc_residual_ref.resize(NC);
  llmc::encoder_forward(d.enc_residual_ref.data(), tokens.data(), wte.data(), wpe.data(), N / d.T, d.T, C);
  d.enc_residual_ref = bench::round_through<floatX>(d.enc_residual_ref);
  d.enc_out_ref.resize(NC);
  d.enc_mean_ref.resize(N);
  d.enc_rstd_ref.resize(N);
  llmc::layernorm_forward(d.enc_out_ref.data(), d.enc_mean_ref.data(), d.enc_rstd_ref.data(),
                          d.enc_residual_ref.data(), weight.data(), bias.data(), N, C);
  d.dinp_ref = d.dinp0;
  d.dweight_ref = d.dweight0;
  d.dbias_ref = d.dbias0;
  llmc::layernorm_backward(d.dinp_ref.data(), d.dweight_ref.data(), d.dbias_ref.data(), dout.data(), a.data(),
                           weight.data(), d.mean_ref.data(), d.rstd_ref.data(), N, C);

  d.a = bench::to_device<floatX>(a);
  d.b = bench::to_device<floatX>(b);
  d.weight = bench::to_device<floatX>(weight);
  d.bias = bench::to_device<floatX>(bias);
  d.out = bench::to_device<floatX>(std::vector<float>(NC, 1.0f));
  d.residual = bench::to_device<floatX>(std::vector<float>(NC, 1.0f));
  d.dout = bench::to_device<floatX>(dout);
  d.dinp = bench::to_device<floatX>(d.dinp0);
  d.dweight = bench::to_device<floatX>(d.dweight0);
  d.dbias = bench::to_device<floatX>(d.dbias0);
  d.wte = bench::to_device<floatX>(wte);
  d.wpe = bench::to_device<floatX>(wpe);
  d.tokens = bench::to_device_ints(tokens);
  d.mean = bench::to_device<float>(std::vector<float>(N, 1.0f));
  d.rstd = bench::to_device<float>(std::vector<float>(N, 1.0f));
  // Partial sums poisoned as uninitialised memory.
  d.scratch = bench::to_device<float>(std::vector<float>(llmc::layernorm_backward_scratch_floats(C), 1.0f));

  const bool ok = bench::run_versions(args, versions, d, fmt::format("layernorm N={} C={} ", N, C), timed);
  bench::free_device({d.a, d.b, d.weight, d.bias, d.out, d.residual, d.dout, d.dinp, d.dweight, d.dbias, d.wte, d.wpe,
                      d.mean, d.rstd, d.scratch, d.tokens});
  return ok;
}

bool run(const bench::Args& args) {
  bool ok = args.small || run_shape(args, int(args.dim("-N")), int(args.dim("-C")), true);
  if (args.shape_given) return ok;  // a shape of one's own: that shape alone
  // Rows that leave lanes idle (12 vectors for 32 lanes) or wrap with a tail (200 vectors), and N
  // not a multiple of the rows per block (50 rows: nor of the backward's 3 warps a block at C=1600).
  ok &= run_shape(args, 300, 96, false);
  ok &= run_shape(args, 50, 1600, false);
  // Rows too wide for the registers in either precision (fwd3 reads them again in each pass).
  ok &= run_shape(args, 24, 2304, false);
  // GPT-2 124M's channels on a few rows: at C=768 the backward's per-warp sums fill the default
  // 48 KiB of shared memory exactly, so a kernel with any static shared memory on top cannot launch.
  ok &= run_shape(args, 40, 768, false);
  // More rows than the backward's grid has warps (512 blocks of 8): warps that take a second row
  // (the per-warp sums over rows). The backward versions only: the forward ones take a row per
  // thread or per warp whatever N is, with no cap on their grids, so the shapes above reach
  // everything they do.
  std::vector<Version> backward;
  for (const Version& v : kVersions)
    if (v.name.rfind("bwd", 0) == 0) backward.push_back(v);
  ok &= run_shape(args, 4500, 32, false, backward);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  // GPT-2 124M at B=8, T=1024; channels in whole 16-byte vectors.
  const std::vector<bench::Dim> shape = {{"-N", "rows (B*T)", 8 * 1024},
                                         {"-C", "channels", 768, llmc::Packed128<floatX>::size}};
  return bench::run_main(argc, argv, shape, bench::infos(kVersions), run);
}
