// FP8 casts (llmc/cuda/fp8.cuh, --fp8 1): checked against cuda_fp8.h's host conversion of the same
// floatX values at the same scale, byte for byte, then timed.
// The versions: kVersions below (or --help). `cast` and `cast_transposed` are timed.
#include <functional>
#include <iterator>
#include <tuple>

#include "dev/cuda/versions.cuh"
#include "llmc/cuda/classifier.cuh"
#include "llmc/cuda/fp8.cuh"
#include "llmc/cuda/gelu.cuh"
#include "llmc/cuda/layernorm.cuh"
#include "llmc/cuda/layernorm_forward.cuh"
#include "llmc/cuda/matmul.cuh"

using llmc::floatX;

namespace {

constexpr size_t kSmallN = size_t(2) * 50 * 4 * 96;  // a small model's: a partial last block
constexpr int kRows = 100, kChannels = 96;           // a small LayerNorm: a row tail, C = 96
// A small classifier: 1,003 real columns in 1,024, so that a vector is part real, part padding.
constexpr int kClassRows = 12, kVocab = 1003, kPaddedVocab = 1024;

// The FP8 layout of a one-layer model: each role's tensors are its linear layers' (llmc/cuda/fp8_layout.h).
const llmc::Fp8Layout& one_layer() {
  static const llmc::Fp8Layout layout = [] {
    llmc::GPT2Config config;
    config.num_layers = 1;
    return llmc::Fp8Layout(config);
  }();
  return layout;
}

// One layer's scaling state on the device, every scale 1.
float* new_state() {
  const std::vector<float> state = one_layer().initial_state();
  float* dev = nullptr;
  CUDA_CHECK(cudaMalloc(&dev, state.size() * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(dev, state.data(), state.size() * sizeof(float), cudaMemcpyHostToDevice));
  return dev;
}

float state_at(const float* state, size_t offset) {
  float v = 0.0f;
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(&v, state + offset, sizeof v, cudaMemcpyDeviceToHost));
  return v;
}

void set_state(float* state, size_t offset, float v) {
  CUDA_CHECK(cudaMemcpy(state + offset, &v, sizeof v, cudaMemcpyHostToDevice));
}

std::vector<uint8_t> bytes_from_device(const __nv_fp8_storage_t* dev, size_t n) {
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint8_t> out(n);
  CUDA_CHECK(cudaMemcpy(out.data(), dev, n, cudaMemcpyDeviceToHost));
  return out;
}

// cuda_fp8.h's host conversion of each value at `scale`, saturating.
std::vector<uint8_t> host_fp8(const std::vector<float>& x, float scale, __nv_fp8_interpretation_t format) {
  std::vector<uint8_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = __nv_cvt_float_to_fp8(x[i] * scale, __NV_SATFINITE, format);
  return out;
}

// A rows x cols matrix of bytes, transposed (cols x rows).
std::vector<uint8_t> transposed(const std::vector<uint8_t>& q, int rows, int cols) {
  std::vector<uint8_t> t(q.size());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) t[size_t(c) * rows + r] = q[size_t(r) * cols + c];
  return t;
}

float max_abs(const std::vector<float>& x) {
  float m = 0.0f;
  for (float v : x) m = std::max(m, std::fabs(v));
  return m;
}

bool check_bytes(const std::string& what, const std::vector<uint8_t>& got, const std::vector<uint8_t>& ref) {
  size_t differ = got.size() == ref.size() ? 0 : std::max(got.size(), ref.size());
  for (size_t i = 0; i < std::min(got.size(), ref.size()); ++i) differ += got[i] != ref[i];
  fmt::print("{}  {}  {} of {} bytes differ\n", differ == 0 ? "PASS" : "FAIL", what, differ, ref.size());
  return differ == 0;
}

bool check_value(const std::string& what, float got, float ref) {
  const bool ok = got == ref;
  fmt::print("{}  {}  {:.9g} (expected {:.9g})\n", ok ? "PASS" : "FAIL", what, got, ref);
  return ok;
}

// Tensor 0 of the state records: the amax its slots hold, read through the delayed update (which
// moves it into history entry 0).
float recorded_amax(float* state) {
  llmc::fp8_update_delayed(one_layer(), state, 0, 1, 0);
  return state_at(state, llmc::fp8_history_offset(0));
}

llmc::Fp8Sink sink_of(__nv_fp8_storage_t* data, float* state, int tensor, __nv_fp8_interpretation_t format) {
  return {data, state + llmc::fp8_scale_offset(tensor),
          reinterpret_cast<unsigned*>(state + llmc::fp8_amax_offset(tensor)), format};
}

__global__ void encode_kernel(__nv_fp8_storage_t* out, const float* x, const float* scale,
                              const __nv_fp8_interpretation_t* format, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = llmc::fp8_encode(x[i], scale[i], format[i]);
}

// Codes by hand. E4M3 is S.EEEE.MMM (bias 7, largest 448 = 0x7E, S.1111.111 NaN, subnormals m/8
// 2^-6); E5M2 is S.EEEEE.MM (bias 15, largest 57344 = 0x7B, subnormals m/4 2^-14).
bool check_encode() {
  struct Case {
    float x, scale;
    __nv_fp8_interpretation_t format;
    int code;  // -1: any NaN code (S.1111.111 in E4M3, S.11111.{01,10,11} in E5M2)
    const char* why;
  };
  const Case cases[] = {
      {1.0f, 1.0f, __NV_E4M3, 0x38, "1 = 0.0111.000"},
      {3.0f, 0.5f, __NV_E4M3, 0x3C, "3 x 0.5 = 1.5 = 0.0111.100"},
      {-3.0f, 1.0f, __NV_E4M3, 0xC4, "-3 = 1.1000.100"},
      {1.0625f, 1.0f, __NV_E4M3, 0x38, "1 + 1/16, halfway between 1 and 1.125: to the even 1"},
      {1.1875f, 1.0f, __NV_E4M3, 0x3A, "1 + 3/16, halfway between 1.125 and 1.25: to the even 1.25"},
      {448.0f, 1.0f, __NV_E4M3, 0x7E, "the largest"},
      {500.0f, 1.0f, __NV_E4M3, 0x7E, "past the largest: saturates"},
      {-1e6f, 1.0f, __NV_E4M3, 0xFE, "far past: saturates to -448"},
      {INFINITY, 1.0f, __NV_E4M3, 0x7E, "infinity saturates too (SATFINITE)"},
      {0x1p-9f, 1.0f, __NV_E4M3, 0x01, "the smallest subnormal"},
      {0x1.8p-10f, 1.0f, __NV_E4M3, 0x01, "0.75 of it: up to it"},
      {0x1p-10f, 1.0f, __NV_E4M3, 0x00, "half of it: to the even 0"},
      {0x1.8p-9f, 1.0f, __NV_E4M3, 0x02, "1.5 of it: halfway between 1 and 2 subnormal steps, to the even 2"},
      {NAN, 1.0f, __NV_E4M3, -1, "NaN stays NaN"},
      {1.0f, 1.0f, __NV_E5M2, 0x3C, "1 = 0.01111.00"},
      {1.125f, 1.0f, __NV_E5M2, 0x3C, "1 + 1/8, halfway between 1 and 1.25: to the even 1"},
      {1.375f, 1.0f, __NV_E5M2, 0x3E, "1 + 3/8, halfway between 1.25 and 1.5: to the even 1.5"},
      {57344.0f, 1.0f, __NV_E5M2, 0x7B, "the largest"},
      {61440.0f, 1.0f, __NV_E5M2, 0x7B, "halfway to the next binade's first value: saturates"},
      {-INFINITY, 1.0f, __NV_E5M2, 0xFB, "-infinity saturates to -57344"},
      {0x1p-16f, 1.0f, __NV_E5M2, 0x01, "the smallest subnormal"},
      {0x1p-26f, 0x1p10f, __NV_E5M2, 0x01, "scaled by 2^10 into the smallest subnormal"},
      {NAN, 1.0f, __NV_E5M2, -1, "NaN stays NaN"},
  };
  const int n = int(std::size(cases));
  std::vector<float> x(n), scale(n);
  std::vector<__nv_fp8_interpretation_t> format(n);
  for (int i = 0; i < n; ++i) {
    x[i] = cases[i].x;
    scale[i] = cases[i].scale;
    format[i] = cases[i].format;
  }
  float* d_x = bench::to_device<float>(x);
  float* d_scale = bench::to_device<float>(scale);
  __nv_fp8_interpretation_t* d_format = nullptr;
  __nv_fp8_storage_t* d_out = nullptr;
  CUDA_CHECK(cudaMalloc(&d_format, n * sizeof(__nv_fp8_interpretation_t)));
  CUDA_CHECK(cudaMemcpy(d_format, format.data(), n * sizeof(__nv_fp8_interpretation_t), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMalloc(&d_out, n));
  llmc::launch<encode_kernel>(1, 64, 0, 0, d_out, d_x, d_scale, d_format, n);
  const std::vector<uint8_t> got = bytes_from_device(d_out, size_t(n));
  bool ok = true;
  for (int i = 0; i < n; ++i) {
    const Case& c = cases[i];
    const bool e5m2 = c.format == __NV_E5M2;
    const int magnitude = got[i] & 0x7F;
    const bool nan = e5m2 ? magnitude > 0x7C : magnitude == 0x7F;
    const bool pass = c.code < 0 ? nan : got[i] == c.code;
    fmt::print("{}  encode {} {:g} x {:g}: {:#04x} (expected {}) {}\n", pass ? "PASS" : "FAIL", e5m2 ? "e5m2" : "e4m3",
               c.x, c.scale, got[i], c.code < 0 ? std::string("NaN") : fmt::format("{:#04x}", c.code), c.why);
    ok &= pass;
  }
  bench::free_device({d_x, d_scale, d_format, d_out});
  return ok;
}

bool check_cast(size_t n, const std::string& tag) {
  bool ok = true;
  // Wide enough that E4M3 at scale 64 saturates its largest values (|x| * 64 > 448 for |x| > 7).
  const auto x = bench::round_through<floatX>(bench::random_vector(n, 31, -9.0f, 9.0f));
  floatX* d_x = bench::to_device<floatX>(x);
  __nv_fp8_storage_t* d_q = nullptr;
  CUDA_CHECK(cudaMalloc(&d_q, n));
  for (const auto& [format, scale, name] : {std::tuple{__NV_E4M3, 64.0f, "e4m3"}, std::tuple{__NV_E5M2, 1024.0f, "e5m2"}}) {
    float* state = new_state();
    set_state(state, llmc::fp8_scale_offset(0), scale);
    bench::poison(d_q, n);
    llmc::fp8_cast(sink_of(d_q, state, 0, format), d_x, n, 0);
    ok &= check_bytes(fmt::format("{}cast {} at scale {}", tag, name, scale), bytes_from_device(d_q, n),
                      host_fp8(x, scale, format));
    ok &= check_value(fmt::format("{}cast {} amax", tag, name), recorded_amax(state), max_abs(x));
    bench::free_device({state});
  }
  bench::free_device({d_x, d_q});
  return ok;
}

// Scale updates on amaxes worked out by hand.
bool check_scales() {
  bool ok = true;
  // The delayed tensors of one layer: its linear layers' inputs (E4M3), then their gradients (E5M2).
  const int input = one_layer().first(llmc::Fp8Role::kInput);
  const int gradient = one_layer().first(llmc::Fp8Role::kGradient);
  struct Case {
    int tensor;
    float amax;
    float scale;  // 2^floor(log2(fp8_max / amax))
  };
  const Case cases[] = {
      {input, 3.7f, 64.0f},                 // 448 / 3.7 = 121.1: 64
      {input + 1, 448.0f, 1.0f},            // exactly the largest E4M3 value
      {input + 2, 449.0f, 0.5f},            // just past it
      {input + 3, 0.001f, 262144.0f},       // 448000: 2^18 = 262144 <= 448000 < 2^19
      {gradient, 0.001f, 33554432.0f},      // E5M2: 57344000: 2^25 = 33554432 <= it < 2^26
      {gradient + 1, 57344.0f, 1.0f},       // the largest E5M2 value
      {gradient + 2, 0.0f, 1.0f},           // nothing seen: the previous scale (1) stays
  };
  float* state = new_state();
  for (const Case& c : cases) {
    const unsigned bits = [&] {
      unsigned b;
      std::memcpy(&b, &c.amax, sizeof b);
      return b;
    }();
    CUDA_CHECK(cudaMemcpy(state + llmc::fp8_amax_offset(c.tensor) + 5 * llmc::kFp8AmaxSlotStride, &bits, sizeof bits, cudaMemcpyHostToDevice));
  }
  llmc::fp8_update_delayed(one_layer(), state, 0, 1, 0);
  for (const Case& c : cases) {
    ok &= check_value(fmt::format("scale of tensor {} at amax {}", c.tensor, c.amax),
                      state_at(state, llmc::fp8_scale_offset(c.tensor)), c.scale);
    ok &= check_value(fmt::format("scale_inv of tensor {}", c.tensor), state_at(state, llmc::fp8_scale_inv_offset(c.tensor)),
                      1.0f / c.scale);
  }
  // A history: entry 1 takes amax 7 while entry 0 still holds 3.7; the scale follows the larger.
  const float seven = 7.0f;
  CUDA_CHECK(cudaMemcpy(state + llmc::fp8_amax_offset(0), &seven, sizeof seven, cudaMemcpyHostToDevice));
  llmc::fp8_update_delayed(one_layer(), state, 1, 2, 0);
  ok &= check_value("scale after amaxes 3.7 then 7 (448 / 7 = 64)", state_at(state, llmc::fp8_scale_offset(0)), 64.0f);
  ok &= check_value("the slots are cleared for the next micro-step", state_at(state, llmc::fp8_amax_offset(0)), 0.0f);
  // Entry 0 overwritten by 100 (the ring wrapped) while entry 1 holds 7: 448 / 100 = 4.48, 4.
  const float hundred = 100.0f;
  CUDA_CHECK(cudaMemcpy(state + llmc::fp8_amax_offset(0) + (llmc::kFp8AmaxSlots - 1) * llmc::kFp8AmaxSlotStride, &hundred, sizeof hundred, cudaMemcpyHostToDevice));
  llmc::fp8_update_delayed(one_layer(), state, 0, 2, 0);
  ok &= check_value("scale after amax 100 replaces 3.7", state_at(state, llmc::fp8_scale_offset(0)), 4.0f);
  bench::free_device({state});
  return ok;
}

// The kernels that write an FP8 copy of their output: the same bytes and amax as fp8_cast of it.
bool check_fused(size_t n, const std::string& tag) {
  bool ok = true;
  const float scale = 16.0f;
  __nv_fp8_storage_t* d_q = nullptr;
  CUDA_CHECK(cudaMalloc(&d_q, std::max({n, size_t(kRows) * kChannels, size_t(kClassRows) * kPaddedVocab})));
  const auto expect = [&](const std::string& what, const floatX* d_out, size_t count,
                          const std::function<void(const llmc::Fp8Sink&)>& write, __nv_fp8_interpretation_t format) {
    float* state = new_state();
    set_state(state, llmc::fp8_scale_offset(0), scale);
    bench::poison(d_q, count);
    write(sink_of(d_q, state, 0, format));
    const std::vector<float> out = bench::from_device(d_out, count);
    ok &= check_bytes(tag + what + ": FP8 copy = the cast of its output", bytes_from_device(d_q, count),
                      host_fp8(out, scale, format));
    ok &= check_value(tag + what + ": amax", recorded_amax(state), max_abs(out));
    bench::free_device({state});
  };

  const auto inp = bench::round_through<floatX>(bench::random_vector(n, 41, -4.0f, 4.0f));
  const auto dout = bench::round_through<floatX>(bench::random_vector(n, 42));
  floatX* d_inp = bench::to_device<floatX>(inp);
  floatX* d_dout = bench::to_device<floatX>(dout);
  floatX* d_out = bench::to_device<floatX>(std::vector<float>(n, 1.0f));
  // The GELU backward that also sums the fc bias gradient (LLMC_FP8_FC_BIAS_GRAD=gelu-backward), on
  // the elements as rows of 4C: its output and bias sums bit for bit gelu_backward's and then
  // matmul_bias_grad's on that output.
  const int bias_cols = 4 * kChannels, bias_rows = int(n / size_t(bias_cols));
  const size_t bias_n = size_t(bias_rows) * bias_cols;
  float* d_bias_scratch = nullptr;
  CUDA_CHECK(cudaMalloc(&d_bias_scratch, llmc::matmul_bias_grad_scratch_floats(bias_rows, bias_cols) * sizeof(float)));
  floatX* d_separate = bench::to_device<floatX>(std::vector<float>(bias_n, 1.0f));
  floatX* d_bias_separate = bench::to_device<floatX>(std::vector<float>(bias_cols, 0.0f));
  floatX* d_bias_fused = bench::to_device<floatX>(std::vector<float>(bias_cols, 0.0f));
  expect("gelu forward", d_out, n, [&](const llmc::Fp8Sink& s) { llmc::gelu_forward(d_out, d_inp, n, 0, s); },
         __NV_E4M3);
  expect("gelu backward", d_out, n,
         [&](const llmc::Fp8Sink& s) { llmc::gelu_backward(d_out, d_inp, d_dout, n, 0, s); }, __NV_E5M2);
  llmc::gelu_backward(d_separate, d_inp, d_dout, bias_n, 0);
  llmc::matmul_bias_grad(d_bias_separate, d_bias_scratch, d_separate, bias_rows, bias_cols, 0);
  const std::string fused_name = "gelu backward with the bias sums";
  expect(fused_name, d_out, bias_n, [&](const llmc::Fp8Sink& s) {
    llmc::gelu_backward_bias_grad(d_out, d_inp, d_dout, d_bias_fused, d_bias_scratch, bias_rows, bias_cols, 0, s);
  }, __NV_E5M2);
  const bool same_out = bench::from_device(d_out, bias_n) == bench::from_device(d_separate, bias_n);
  const bool same_bias = bench::from_device(d_bias_fused, bias_cols) == bench::from_device(d_bias_separate, bias_cols);
  fmt::print("{}  {}{}: output and bias sums bit for bit gelu_backward's and matmul_bias_grad's\n",
             same_out && same_bias ? "PASS" : "FAIL", tag, fused_name);
  ok &= same_out && same_bias;
  bench::free_device({d_bias_scratch, d_separate, d_bias_separate, d_bias_fused});

  const size_t rows_c = size_t(kRows) * kChannels;
  const auto x = bench::round_through<floatX>(bench::random_vector(rows_c, 43, -3.0f, 3.0f));
  const auto y = bench::round_through<floatX>(bench::random_vector(rows_c, 44));
  const auto w = bench::round_through<floatX>(bench::random_vector(kChannels, 45, 0.5f, 1.5f));
  const auto b = bench::round_through<floatX>(bench::random_vector(kChannels, 46));
  floatX* d_x = bench::to_device<floatX>(x);
  floatX* d_y = bench::to_device<floatX>(y);
  floatX* d_w = bench::to_device<floatX>(w);
  floatX* d_b = bench::to_device<floatX>(b);
  floatX* d_ln = bench::to_device<floatX>(std::vector<float>(rows_c, 1.0f));
  floatX* d_res = bench::to_device<floatX>(std::vector<float>(rows_c, 1.0f));
  // The registers kernel, and its mode for rows too wide to hold (vectors 0: the row read again in
  // each pass), here at kChannels.
  expect("layernorm forward", d_ln, rows_c, [&](const llmc::Fp8Sink& s) {
    llmc::layernorm_forward(d_ln, nullptr, nullptr, d_x, d_w, d_b, kRows, kChannels, 0, s);
  }, __NV_E4M3);
  expect("fused residual layernorm forward", d_ln, rows_c, [&](const llmc::Fp8Sink& s) {
    llmc::fused_residual_layernorm_forward(d_res, d_ln, nullptr, nullptr, d_x, d_y, d_w, d_b, kRows, kChannels, 0, s);
  }, __NV_E4M3);
  expect("layernorm forward (rows read again)", d_ln, rows_c, [&](const llmc::Fp8Sink& s) {
    llmc::launch_layernorm_forward_registers<llmc::LayerNormSource::kInput>(
        0, 0, d_ln, nullptr, nullptr, nullptr, d_x, nullptr, nullptr, 1, d_w, d_b, kRows, kChannels, 0, s);
  }, __NV_E4M3);
  expect("fused residual layernorm forward (rows read again)", d_ln, rows_c, [&](const llmc::Fp8Sink& s) {
    llmc::launch_layernorm_forward_registers<llmc::LayerNormSource::kResidual>(
        0, 0, d_ln, d_res, nullptr, nullptr, d_x, d_y, nullptr, 1, d_w, d_b, kRows, kChannels, 0, s);
  }, __NV_E4M3);
  // The LayerNorm backward's residual gradient (LLMC_FP8_RESIDUAL_CAST=layernorm), added to what the
  // buffer held, as the trainer's is: its copy is of the sums it stores.
  float* d_mean = nullptr;
  float* d_rstd = nullptr;
  float* d_scratch = nullptr;
  const size_t scratch_floats = llmc::layernorm_backward_scratch_floats(kChannels);
  CUDA_CHECK(cudaMalloc(&d_mean, kRows * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_rstd, kRows * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_scratch, scratch_floats * sizeof(float)));
  CUDA_CHECK(cudaMemset(d_scratch, 0, scratch_floats * sizeof(float)));
  llmc::layernorm_forward(d_ln, d_mean, d_rstd, d_x, d_w, d_b, kRows, kChannels, 0);
  floatX* d_dw = bench::to_device<floatX>(std::vector<float>(kChannels, 0.0f));
  floatX* d_db = bench::to_device<floatX>(std::vector<float>(kChannels, 0.0f));
  expect("layernorm backward", d_res, rows_c, [&](const llmc::Fp8Sink& s) {
    llmc::layernorm_backward(d_res, d_dw, d_db, d_scratch, d_y, d_x, d_w, d_mean, d_rstd, kRows, kChannels, 0, s);
  }, __NV_E5M2);
  // The fused classifier's gradient pass (LLMC_FP8_LM_HEAD=on): its copy is of the dlogits it stores
  // over the logits, the padding's zeros included.
  const size_t logit_count = size_t(kClassRows) * kPaddedVocab;
  const auto logits = bench::round_through<floatX>(bench::random_vector(logit_count, 47, -4.0f, 4.0f));
  floatX* d_logits = bench::to_device<floatX>(logits);
  int* d_targets = bench::to_device_ints(bench::random_ints(kClassRows, kVocab, 48));
  float* d_losses = bench::to_device<float>(std::vector<float>(kClassRows, 0.0f));
  expect("fused classifier", d_logits, logit_count, [&](const llmc::Fp8Sink& s) {
    bench::upload(d_logits, logits);
    llmc::fused_classifier(d_logits, d_losses, d_targets, kClassRows, kVocab, kPaddedVocab, 1.0f / kClassRows, true, 0,
                           s);
  }, __NV_E5M2);
  bench::free_device({d_inp, d_dout, d_out, d_q, d_x, d_y, d_w, d_b, d_ln, d_res, d_mean, d_rstd, d_scratch, d_dw, d_db,
                      d_logits, d_targets, d_losses});
  return ok;
}

bool check_weight() {
  bool ok = true;
  // Two weights cast together, as the trainer casts a model's (one launch sets every scale): 3C x C
  // at C = 96 (tiles with tails in neither direction), and 40 x 72 (both cut inside a 32 x 32 tile).
  // Values within +-0.2 and one outlier each, which sets its weight's scale by hand:
  // 2^floor(log2(448 / m)): -0.30078125 (-0.3 in bf16) gives 2^floor(log2(1489.5)) = 1024, 5 gives
  // 2^floor(log2(89.6)) = 64.
  struct Weight {
    int rows, cols;
    float outlier, scale;
    std::vector<float> w;
    floatX* d_w = nullptr;
    __nv_fp8_storage_t *d_w8 = nullptr, *d_wt8 = nullptr;
  };
  std::vector<Weight> weights = {{288, 96, -0.3f, 1024.0f, {}}, {40, 72, 5.0f, 64.0f, {}}};
  std::vector<llmc::Fp8WeightCast> casts;
  // The weight tensors of one layer are consecutive in the state: qkv's, then attproj's.
  const int first = one_layer().tensor(llmc::Fp8Role::kWeight, llmc::LinearLayer::kQkv, 0);
  for (size_t k = 0; k < weights.size(); ++k) {
    Weight& x = weights[k];
    const size_t n = size_t(x.rows) * x.cols;
    x.w = bench::round_through<floatX>(bench::random_vector(n, 51 + k, -0.2f, 0.2f));
    x.w[n / 3] = float(floatX(x.outlier));
    x.d_w = bench::to_device<floatX>(x.w);
    CUDA_CHECK(cudaMalloc(&x.d_w8, n));
    CUDA_CHECK(cudaMalloc(&x.d_wt8, n));
    bench::poison(x.d_w8, n);
    bench::poison(x.d_wt8, n);
    casts.push_back({x.d_w, x.rows, x.cols, first + int(k), x.d_w8, x.d_wt8});
  }
  float* state = new_state();
  llmc::fp8_cast_weights(casts, state, first, int(casts.size()), 0);
  for (size_t k = 0; k < weights.size(); ++k) {
    const Weight& x = weights[k];
    const size_t n = size_t(x.rows) * x.cols;
    ok &= check_value(fmt::format("weight {}x{} scale (amax {:.6f})", x.rows, x.cols, max_abs(x.w)),
                      state_at(state, llmc::fp8_scale_offset(first + int(k))), x.scale);
    const std::vector<uint8_t> ref = host_fp8(x.w, x.scale, __NV_E4M3);
    ok &= check_bytes(fmt::format("weight {}x{} E4M3 copy", x.rows, x.cols), bytes_from_device(x.d_w8, n), ref);
    ok &= check_bytes(fmt::format("weight {}x{} transposed E4M3 copy", x.rows, x.cols), bytes_from_device(x.d_wt8, n),
                      transposed(ref, x.rows, x.cols));
    bench::free_device({x.d_w, x.d_w8, x.d_wt8});
  }
  bench::free_device({state});
  return ok;
}

// The transposing cast on an activation (`cast_transposed`): rows of GPT-2 124M's C = 768 channels.
constexpr int kActivationCols = 768;

// The transposing cast of n values (the first whole rows of `cols`) at tensor 0's scale: rows x cols
// into q (null: only the transpose), and its transpose into qt.
void cast_transposed_launch(__nv_fp8_storage_t* q, __nv_fp8_storage_t* qt, const floatX* x, const float* state,
                            size_t n, int cols, __nv_fp8_interpretation_t format) {
  llmc::fp8_cast_transposed(q, qt, x, state + llmc::fp8_scale_offset(0), int(n / size_t(cols)), cols, format, 0);
}

// An activation's E4M3 copy as it is and transposed, and an output gradient's E5M2 transpose alone
// (what a weight-gradient GEMM would need of each beside the copies their producers write), byte
// for byte the host's.
bool check_cast_transposed(size_t n, int cols, const std::string& tag) {
  const int rows = int(n / size_t(cols));
  const size_t m = size_t(rows) * cols;
  const auto x = bench::round_through<floatX>(bench::random_vector(m, 33, -9.0f, 9.0f));
  floatX* d_x = bench::to_device<floatX>(x);
  __nv_fp8_storage_t *d_q = nullptr, *d_qt = nullptr;
  CUDA_CHECK(cudaMalloc(&d_q, m));
  CUDA_CHECK(cudaMalloc(&d_qt, m));
  float* state = new_state();
  bool ok = true;
  const std::tuple<__nv_fp8_interpretation_t, float, bool> cases[] = {{__NV_E4M3, 32.0f, true},
                                                                       {__NV_E5M2, 4096.0f, false}};
  for (const auto& [format, scale, plain] : cases) {
    const std::string what = fmt::format("{}cast_transposed {}x{} {}", tag, rows, cols,
                                         format == __NV_E4M3 ? "E4M3" : "E5M2");
    if (plain) bench::poison(d_q, m);
    bench::poison(d_qt, m);
    set_state(state, llmc::fp8_scale_offset(0), scale);
    cast_transposed_launch(plain ? d_q : nullptr, d_qt, d_x, state, m, cols, format);
    const std::vector<uint8_t> ref = host_fp8(x, scale, format);
    if (plain) ok &= check_bytes(what + " copy", bytes_from_device(d_q, m), ref);
    ok &= check_bytes(what + " transposed", bytes_from_device(d_qt, m), transposed(ref, rows, cols));
  }
  bench::free_device({d_x, d_q, d_qt, state});
  return ok;
}

// The sizes the checks run at, and the buffers `cast` and `cast_transposed` are timed on (set only
// when one is).
struct Data {
  size_t n;
  bool small, shape_given;
  floatX* x = nullptr;
  __nv_fp8_storage_t *q = nullptr, *qt = nullptr;
  float* state = nullptr;
};

using Version = bench::Version<Data>;

// The checks name their own lines (the version's name first, a size where there are two).
bool check_encode_version(Data&, const Version&, const std::string&, int) { return check_encode(); }
bool check_scales_version(Data&, const Version&, const std::string&, int) { return check_scales(); }
bool check_weight_version(Data&, const Version&, const std::string&, int) { return check_weight(); }
bool check_fused_version(Data& d, const Version&, const std::string&, int) {
  return check_fused(d.small ? kSmallN : d.n, "");
}
bool check_cast_version(Data& d, const Version&, const std::string&, int) {
  bool ok = true;
  if (!d.small) ok &= check_cast(d.n, "");
  if (!d.shape_given) ok &= check_cast(kSmallN, fmt::format("n={} ", kSmallN));
  return ok;
}

bool check_cast_transposed_version(Data& d, const Version&, const std::string&, int) {
  bool ok = true;
  if (!d.small) ok &= check_cast_transposed(d.n, kActivationCols, "");
  if (!d.shape_given) ok &= check_cast_transposed(kSmallN, kChannels, fmt::format("n={} ", kSmallN));
  return ok;
}

void cast_e4m3(Data& d, int) { llmc::fp8_cast(sink_of(d.q, d.state, 0, __NV_E4M3), d.x, d.n, 0); }
void cast_transposed(Data& d, int) {
  cast_transposed_launch(d.q, d.qt, d.x, d.state, d.n, kActivationCols, __NV_E4M3);
}

// A cast reads n floatX and writes n bytes; the transposing one writes 2n.
bench::Cost cast_cost(const Data& d) { return {double(d.n) * (sizeof(floatX) + 1)}; }
bench::Cost cast_transposed_cost(const Data& d) {
  return {double(d.n / kActivationCols * kActivationCols) * (sizeof(floatX) + 2)};
}

const std::vector<Version> kVersions = {
    {"encode",
     "fp8_encode on the device (the GPU's conversion instruction; on the emulated GPU, cuda_fp8.h's host code) "
     "against codes worked out by hand from the OCP FP8 formats: rounding to nearest even, subnormals, saturation "
     "of large values and infinities, NaN",
     {}, nullptr, check_encode_version, nullptr},
    {"cast",
     "fp8_cast: E4M3 and E5M2 copies and the amax each records (values past the format's range saturate; the amax "
     "is the largest |x|, whatever the scale)",
     {}, cast_e4m3, check_cast_version, cast_cost},
    {"scale", "the scale updates on amaxes worked out by hand: 2^floor(log2(fp8_max / amax))", {}, nullptr,
     check_scales_version, nullptr},
    {"fused",
     "the FP8 copies the LayerNorm forward and backward, the GELU forward and backward (also with the fc bias "
     "sums) and the fused classifier's gradient pass write: the same bytes and amax as fp8_cast of the floatX "
     "output they store",
     {}, nullptr, check_fused_version, nullptr},
    {"weight",
     "fp8_cast_weights: two weights' amaxes, their scales in one launch, their E4M3 copies and their transposes", {},
     nullptr, check_weight_version, nullptr},
    {"cast_transposed",
     "the weights' transposing cast (fp8_cast_transposed) on an activation, rows of 768 (B*T x C): its E4M3 copy "
     "as it is and transposed, and an E5M2 transpose alone; what an FP8 weight-gradient GEMM needs of each operand "
     "every micro-step (timed in E4M3 with both copies, to decide whether that path pays, docs/cuda-trainer.md)",
     {}, cast_transposed, check_cast_transposed_version, cast_transposed_cost},
};

bool run(const bench::Args& args) {
  Data d{size_t(args.dim("-N")), args.small, args.shape_given};
  const bool ok = bench::check_versions(args, kVersions, d, "");
  const bool timed = bench::selected(args, "cast") || bench::selected(args, "cast_transposed");
  if (!args.small && !args.check_only && ok && timed) {
    d.x = bench::to_device<floatX>(bench::random_vector(d.n, 61));
    CUDA_CHECK(cudaMalloc(&d.q, d.n));
    CUDA_CHECK(cudaMalloc(&d.qt, d.n));
    d.state = new_state();
    bench::time_versions(args, kVersions, d, "", " e4m3");
    bench::free_device({d.x, d.q, d.qt, d.state});
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  // The fc activations of GPT-2 124M at B=8, T=1024, in whole 16-byte vectors.
  const std::vector<bench::Dim> shape = {
      {"-N", "elements", static_cast<long long>(size_t(8) * 1024 * 4 * 768), llmc::Packed128<floatX>::size}};
  return bench::run_main(argc, argv, shape, bench::infos(kVersions), run);
}
