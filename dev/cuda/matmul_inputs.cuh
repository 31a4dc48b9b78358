// dev/cuda/matmul.cu's data: a shape, the CPU layer's results on its inputs, the device buffers,
// and the FP8 operands of --fp8 1 cast by the trainer's kernels.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "dev/cuda/versions.cuh"
#include "llmc/cpu/gelu.h"
#include "llmc/cpu/matmul.h"
#include "llmc/cuda/fp8.cuh"
#include "llmc/cuda/fp8_layout.h"
#include "llmc/cuda/matmul.cuh"

namespace matmul_bench {

using llmc::floatX;

struct Shape {
  const char* name;
  int BT, C, OC;
  // Elements between each device buffer's 256-byte-aligned allocation and the matrix: 8 puts the
  // matrices 16 (bf16) bytes past the boundary, as the per-layer tensors of a small model may be.
  int offset = 0;
  size_t n_in() const { return size_t(BT) * C; }
  size_t n_out() const { return size_t(BT) * OC; }
  size_t n_w() const { return size_t(OC) * C; }
};

// CPU results for one shape, computed once and shared by every version.
struct Reference {
  std::vector<float> inp, weight, bias, dout, pre_gelu_in, dweight0, dbias0;
  std::vector<float> out_nobias, out_bias, out_gelu, dinp, dinp_dgelu, dweight, dbias;
  // The bias gradient (C) of the layer whose output the GELU took (the fc layer's): before, and plus
  // the column sums of dinp_dgelu.
  std::vector<float> dpre_bias0, dpre_bias;
};

inline Reference make_reference(const Shape& s, uint64_t seed) {
  Reference r;
  const size_t n_in = size_t(s.BT) * s.C, n_out = size_t(s.BT) * s.OC, n_w = size_t(s.OC) * s.C;
  // Rounded through floatX so the CPU sees exactly the GPU's inputs.
  r.inp = bench::round_through<floatX>(bench::random_vector(n_in, seed + 1));
  r.weight = bench::round_through<floatX>(bench::random_vector(n_w, seed + 2, -0.05f, 0.05f));
  r.bias = bench::round_through<floatX>(bench::random_vector(s.OC, seed + 3));
  r.dout = bench::round_through<floatX>(bench::random_vector(n_out, seed + 4));
  r.pre_gelu_in = bench::round_through<floatX>(bench::random_vector(n_in, seed + 5, -3.f, 3.f));
  r.dweight0 = bench::round_through<floatX>(bench::random_vector(n_w, seed + 6));
  r.dbias0 = bench::round_through<floatX>(bench::random_vector(s.OC, seed + 7));

  r.out_nobias.resize(n_out);
  llmc::matmul_forward(r.out_nobias.data(), r.inp.data(), r.weight.data(), nullptr, s.BT, s.C, s.OC);
  r.out_bias.resize(n_out);
  llmc::matmul_forward(r.out_bias.data(), r.inp.data(), r.weight.data(), r.bias.data(), s.BT, s.C, s.OC);
  r.out_gelu.resize(n_out);
  llmc::gelu_forward(r.out_gelu.data(), r.out_bias.data(), n_out);

  r.dinp.resize(n_in);
  r.dweight = r.dweight0;
  r.dbias = r.dbias0;
  llmc::matmul_backward(r.dinp.data(), r.dweight.data(), r.dbias.data(), r.dout.data(), r.inp.data(),
                        r.weight.data(), s.BT, s.C, s.OC);
  r.dinp_dgelu.resize(n_in);
  llmc::gelu_backward(r.dinp_dgelu.data(), r.pre_gelu_in.data(), r.dinp.data(), n_in);
  r.dpre_bias0 = bench::round_through<floatX>(bench::random_vector(s.C, seed + 8));
  std::vector<double> column_sums(size_t(s.C), 0.0);
  for (size_t i = 0; i < n_in; ++i) column_sums[i % s.C] += r.dinp_dgelu[i];
  r.dpre_bias = r.dpre_bias0;
  for (int c = 0; c < s.C; ++c) r.dpre_bias[c] += float(column_sums[c]);
  return r;
}

// Device copies of one shape's inputs and outputs.
struct DeviceBuffers {
  floatX *inp, *weight, *bias, *dout, *pre_gelu_in, *out, *aux, *dinp, *dweight, *dbias, *dpre_bias;
  float* bias_scratch;
  std::vector<void*> allocations;

  explicit DeviceBuffers(const Shape& s, const Reference& r) {
    const size_t n_in = size_t(s.BT) * s.C, n_out = size_t(s.BT) * s.OC;
    inp = place(r.inp, s.offset);
    weight = place(r.weight, s.offset);
    bias = place(r.bias, s.offset);
    dout = place(r.dout, s.offset);
    pre_gelu_in = place(r.pre_gelu_in, s.offset);
    dweight = place(r.dweight0, s.offset);
    dbias = place(r.dbias0, s.offset);
    dpre_bias = place(r.dpre_bias0, s.offset);
    out = place(std::vector<float>(n_out, 1.0f), s.offset);
    aux = place(std::vector<float>(n_out, 1.0f), s.offset);
    dinp = place(std::vector<float>(n_in, 1.0f), s.offset);
    // dout's bias gradient, or (dpre_bias) dinp's.
    CUDA_CHECK(cudaMalloc(&bias_scratch,
                          llmc::matmul_bias_grad_scratch_floats(s.BT, std::max(s.C, s.OC)) * sizeof(float)));
    allocations.push_back(bias_scratch);
  }
  ~DeviceBuffers() {
    for (void* p : allocations) cudaFree(p);
  }

  // `host` in floatX, `offset` elements into a fresh allocation.
  floatX* place(const std::vector<float>& host, int offset) {
    std::vector<float> padded(size_t(offset), 1.0f);
    padded.insert(padded.end(), host.begin(), host.end());
    floatX* base = bench::to_device<floatX>(padded);
    allocations.push_back(base);
    return base + offset;
  }
};

// The value an FP8 code stands for, divided by the scale it was cast at (cuda_fp8.h's host decode).
inline std::vector<float> fp8_values(const std::vector<float>& x, float scale, __nv_fp8_interpretation_t format) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const __nv_fp8_storage_t q = __nv_cvt_float_to_fp8(x[i] * scale, __NV_SATFINITE, format);
    out[i] = __half2float(__half(__nv_cvt_fp8_to_halfraw(q, format))) / scale;
  }
  return out;
}

// The FP8 operands of --fp8 1 on one shape's inputs: activations and weights E4M3, the output
// gradient E5M2, at powers of two that fit the inputs' ranges (|inp|, |dout| < 1: 2^8 and 2^15; the
// weight's own, from its amax), cast by the trainer's kernels; and the values those copies hold.
// Also inp's and dout's transposes (C x BT, OC x BT), what an FP8 weight-gradient GEMM would take
// (a path the trainer does not have; dev/cuda/matmul times it).
struct Fp8Operands {
  float* state = nullptr;
  __nv_fp8_storage_t *inp8 = nullptr, *dout8 = nullptr, *w8 = nullptr, *wt8 = nullptr;
  __nv_fp8_storage_t *inp_t8 = nullptr, *dout_t8 = nullptr;
  // dout's E5M2 copy as the bias-gradient kernels write it, recording into the gradient's amax.
  __nv_fp8_storage_t* dout8_by_bias = nullptr;
  // The E4M3 GELU of the output, as the fc GEMM's epilogue writes it (LLMC_FP8_GELU=epilogue), at
  // 2^6 (|gelu| < 4 here), recording into that tensor's amax.
  __nv_fp8_storage_t* gelu8 = nullptr;
  static constexpr float kGeluScale = 64.0f;
  int input = 0, gradient = 0, gelu = 0;
  std::vector<float> inp, w, dout;  // the values of the FP8 copies
  llmc::Fp8Matrix inp_m, w_m, dout_m, wt_m, inp_tm, dout_tm;

  Fp8Operands(const Shape& s, const Reference& r, const DeviceBuffers& d) {
    // A one-layer model's scaling state; this shape's operands are its qkv layer's tensors.
    llmc::GPT2Config one_layer;
    one_layer.num_layers = 1;
    const llmc::Fp8Layout layout(one_layer);
    input = layout.tensor(llmc::Fp8Role::kInput, llmc::LinearLayer::kQkv, 0);
    gradient = layout.tensor(llmc::Fp8Role::kGradient, llmc::LinearLayer::kQkv, 0);
    const int weight = layout.tensor(llmc::Fp8Role::kWeight, llmc::LinearLayer::kQkv, 0);
    gelu = layout.tensor(llmc::Fp8Role::kInput, llmc::LinearLayer::kFcproj, 0);
    const float inp_scale = 256.0f, dout_scale = 32768.0f;
    std::vector<float> host_state = layout.initial_state();
    for (const auto& [i, scale] :
         {std::pair{input, inp_scale}, std::pair{gradient, dout_scale}, std::pair{gelu, kGeluScale}}) {
      host_state[llmc::fp8_scale_offset(i)] = scale;
      host_state[llmc::fp8_scale_inv_offset(i)] = 1.0f / scale;
    }
    CUDA_CHECK(cudaMalloc(&state, host_state.size() * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(state, host_state.data(), host_state.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMalloc(&inp8, s.n_in()));
    CUDA_CHECK(cudaMalloc(&dout8, s.n_out()));
    CUDA_CHECK(cudaMalloc(&dout8_by_bias, s.n_out()));
    CUDA_CHECK(cudaMalloc(&gelu8, s.n_out()));
    CUDA_CHECK(cudaMalloc(&w8, s.n_w()));
    CUDA_CHECK(cudaMalloc(&wt8, s.n_w()));
    CUDA_CHECK(cudaMalloc(&inp_t8, s.n_in()));
    CUDA_CHECK(cudaMalloc(&dout_t8, s.n_out()));
    llmc::fp8_cast({inp8, state + llmc::fp8_scale_offset(input), nullptr, __NV_E4M3}, d.inp, s.n_in(), 0);
    llmc::fp8_cast({dout8, state + llmc::fp8_scale_offset(gradient), nullptr, __NV_E5M2}, d.dout, s.n_out(), 0);
    llmc::fp8_cast_weights({{d.weight, s.OC, s.C, weight, w8, wt8}}, state, weight, 1, 0);
    cast_transposes(d, s);
    float w_scale = 0.0f;
    CUDA_CHECK(cudaMemcpy(&w_scale, state + llmc::fp8_scale_offset(weight), sizeof w_scale, cudaMemcpyDeviceToHost));
    inp = fp8_values(r.inp, inp_scale, __NV_E4M3);
    w = fp8_values(r.weight, w_scale, __NV_E4M3);
    dout = fp8_values(r.dout, dout_scale, __NV_E5M2);
    inp_m = {inp8, state + llmc::fp8_scale_inv_offset(input), __NV_E4M3};
    w_m = {w8, state + llmc::fp8_scale_inv_offset(weight), __NV_E4M3};
    dout_m = {dout8, state + llmc::fp8_scale_inv_offset(gradient), __NV_E5M2};
    wt_m = {wt8, state + llmc::fp8_scale_inv_offset(weight), __NV_E4M3};
    inp_tm = {inp_t8, state + llmc::fp8_scale_inv_offset(input), __NV_E4M3};
    dout_tm = {dout_t8, state + llmc::fp8_scale_inv_offset(gradient), __NV_E5M2};
  }
  // inp's and dout's transposes alone (their plain copies are the producers'), at their scales.
  void cast_transposes(const DeviceBuffers& d, const Shape& s) const {
    llmc::fp8_cast_transposed(nullptr, inp_t8, d.inp, state + llmc::fp8_scale_offset(input), s.BT, s.C, __NV_E4M3, 0);
    llmc::fp8_cast_transposed(nullptr, dout_t8, d.dout, state + llmc::fp8_scale_offset(gradient), s.BT, s.OC,
                              __NV_E5M2, 0);
  }
  ~Fp8Operands() {
    bench::free_device({state, inp8, dout8, w8, wt8, inp_t8, dout_t8, dout8_by_bias, gelu8});
  }
  llmc::Fp8Sink gelu_sink() const {
    return {gelu8, state + llmc::fp8_scale_offset(gelu), reinterpret_cast<unsigned*>(state + llmc::fp8_amax_offset(gelu)),
            __NV_E4M3};
  }
  llmc::Fp8Sink dout_by_bias() const {
    return {dout8_by_bias, state + llmc::fp8_scale_offset(gradient),
            reinterpret_cast<unsigned*>(state + llmc::fp8_amax_offset(gradient)), __NV_E5M2};
  }
  // The largest of tensor i's amax slots: the gradient's, or the GELU's.
  float amax(int i) const {
    std::vector<float> slots(llmc::kFp8AmaxSlots * llmc::kFp8AmaxSlotStride);
    CUDA_CHECK(cudaMemcpy(slots.data(), state + llmc::fp8_amax_offset(i), slots.size() * sizeof(float),
                          cudaMemcpyDeviceToHost));
    return *std::max_element(slots.begin(), slots.end());
  }
  Fp8Operands(const Fp8Operands&) = delete;
  Fp8Operands& operator=(const Fp8Operands&) = delete;
};

}  // namespace matmul_bench
