// CudaBackend's FP8 matmuls (--fp8 1; llmc/cuda/fp8.cuh has the casts and the scaling, and
// docs/cuda-trainer.md "FP8 matmuls" the design): where each scaled tensor's FP8 copy lives, the
// weights' casts, the end of a micro-step, and the scaling state a checkpoint keeps.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "llmc/cuda/cuda_backend_impl.cuh"
#include "llmc/cuda/matmul.cuh"
#include "llmc/test_hooks.h"

namespace llmc {

namespace {

// The parameter tensor and the (rows, cols) = (OC, C) of each linear layer's weight.
struct LinearShape {
  int weight;
  int rows, cols;
};
LinearShape linear_shape(Fp8Linear linear, int C) {
  switch (linear) {
    case Fp8Linear::kQkv: return {kQkvw, 3 * C, C};
    case Fp8Linear::kAttproj: return {kAttprojw, C, C};
    case Fp8Linear::kFc: return {kFcw, 4 * C, C};
    case Fp8Linear::kFcproj: return {kFcprojw, C, 4 * C};
  }
  throw std::logic_error("linear_shape: no such linear layer");
}

constexpr Fp8Linear kLinears[] = {Fp8Linear::kQkv, Fp8Linear::kAttproj, Fp8Linear::kFc, Fp8Linear::kFcproj};

// Where a linear layer's copies start within a layer's fp8_weight_bytes(1, C): each weight's copy as
// it is, then transposed, the linear layers in order.
size_t linear_copy_offset(Fp8Linear linear, int C) {
  size_t at = 0;
  for (Fp8Linear before : kLinears) {
    if (before == linear) break;
    const LinearShape shape = linear_shape(before, C);
    at += 2 * size_t(shape.rows) * shape.cols;
  }
  return at;
}

constexpr uint64_t kScalingStateMagic = 0x3253434C41385046ull;  // "FP8ALCS2"
constexpr uint64_t kScalingStateHeadWords = 3;
// What a checkpoint keeps of each scaled tensor: its scale and its amax history (the scale_inv is
// 1/scale, and the amax slots are zero between micro-steps).
constexpr size_t kScalingStateFloatsPerTensor = 1 + kFp8History;

}  // namespace

Fp8Sink CudaBackend::Impl::fp8_sink(Fp8Role role, Fp8Linear linear, int l) const {
  if (!opt.fp8) return {};
  const int i = fp8_tensor_index(role, linear, l, L());
  Fp8Sink sink;
  sink.data = fp8_operand;
  sink.scale = fp8_state + fp8_scale_offset(i);
  sink.amax = fp8_recording ? reinterpret_cast<unsigned*>(fp8_state + fp8_amax_offset(i)) : nullptr;
  sink.format = role == Fp8Role::kGradient ? __NV_E5M2 : __NV_E4M3;
  return sink;
}

Fp8Matrix CudaBackend::Impl::fp8_operand_of(Fp8Role role, Fp8Linear linear, int l) const {
  const int i = fp8_tensor_index(role, linear, l, L());
  return {fp8_operand, fp8_state + fp8_scale_inv_offset(i), role == Fp8Role::kGradient ? __NV_E5M2 : __NV_E4M3};
}

__nv_fp8_storage_t* CudaBackend::Impl::fp8_weight_copy(Fp8Linear linear, int l, bool transposed) const {
  const LinearShape shape = linear_shape(linear, C());
  return fp8_weights + size_t(l) * fp8_weight_bytes(1, size_t(C())) + linear_copy_offset(linear, C()) +
         (transposed ? size_t(shape.rows) * shape.cols : 0);
}

Fp8Matrix CudaBackend::Impl::fp8_weight(Fp8Linear linear, int l, bool transposed) const {
  const int i = fp8_tensor_index(Fp8Role::kWeight, linear, l, L());
  return {fp8_weight_copy(linear, l, transposed), fp8_state + fp8_scale_inv_offset(i), __NV_E4M3};
}

void CudaBackend::Impl::cast_fp8_weights() {
  if (!fp8_weights_stale) return;
  std::vector<Fp8WeightCast> weights;
  for (int l = 0; l < L(); ++l)
    for (Fp8Linear linear : kLinears) {
      const LinearShape shape = linear_shape(linear, C());
      weights.push_back({param(shape.weight, l), shape.rows, shape.cols,
                         fp8_tensor_index(Fp8Role::kWeight, linear, l, L()), fp8_weight_copy(linear, l, false),
                         fp8_weight_copy(linear, l, true)});
    }
  // The weights' tensors are the last kFp8Linears * L of the state, role kWeight.
  fp8_cast_weights(weights, fp8_state, fp8_tensor_index(Fp8Role::kWeight, Fp8Linear::kQkv, 0, L()),
                   kFp8Linears * L(), stream);
  fp8_weights_stale = false;
}

void CudaBackend::Impl::end_fp8_micro_step() {
  fp8_update_delayed(fp8_state, L(), int(fp8_micro_steps % kFp8History),
                     int(std::min<uint64_t>(fp8_micro_steps + 1, kFp8History)), stream, test_hook_fp8_stale_amax_shift());
  ++fp8_micro_steps;
}

void CudaBackend::Impl::linear_forward(Fp8Linear linear, int l, floatX* out, const floatX* inp, int w, int b, int BT,
                                       int C, int OC) {
  if (fp8_gemms())
    matmul_forward_fp8(*blas, out, fp8_operand_of(Fp8Role::kInput, linear, l), fp8_weight(linear, l, false),
                       param(b, l), BT, C, OC, stream);
  else
    matmul_forward(*blas, out, inp, param(w, l), param(b, l), BT, C, OC, stream);
}

// Bytes, little-endian: kScalingStateHeadWords uint64, [0] kScalingStateMagic [1] layers
// [2] fp8_micro_steps, then per scaled tensor in index order its scale and its kFp8History amax
// entries (fp32).
std::vector<uint8_t> CudaBackend::scaling_state() {
  Impl& d = *impl_;
  if (!d.opt.fp8) return {};
  d.outside_step();
  std::vector<float> state(fp8_state_floats(d.L()));
  CUDA_CHECK(cudaMemcpyAsync(state.data(), d.fp8_state, state.size() * sizeof(float), cudaMemcpyDeviceToHost,
                             d.stream));
  CUDA_CHECK(cudaStreamSynchronize(d.stream));
  std::vector<float> kept;
  for (int i = 0; i < fp8_tensors(d.L()); ++i) {
    kept.push_back(state[fp8_scale_offset(i)]);
    kept.insert(kept.end(), state.begin() + fp8_history_offset(i), state.begin() + fp8_history_offset(i) + kFp8History);
  }
  const uint64_t head[kScalingStateHeadWords] = {kScalingStateMagic, uint64_t(d.L()), d.fp8_micro_steps};
  std::vector<uint8_t> bytes(sizeof head + kept.size() * sizeof(float));
  std::memcpy(bytes.data(), head, sizeof head);
  std::memcpy(bytes.data() + sizeof head, kept.data(), kept.size() * sizeof(float));
  return bytes;
}

void CudaBackend::set_scaling_state(const std::vector<uint8_t>& bytes) {
  Impl& d = *impl_;
  // Without FP8 there is nothing to scale; a checkpoint written without --fp8 1 has no state, and
  // the scales start afresh, the next micro-step calibrating them.
  if (!d.opt.fp8 || bytes.empty()) return;
  const int tensors = fp8_tensors(d.L());
  uint64_t head[kScalingStateHeadWords] = {};
  std::vector<float> kept(size_t(tensors) * kScalingStateFloatsPerTensor);
  if (bytes.size() == sizeof head + kept.size() * sizeof(float)) {
    std::memcpy(head, bytes.data(), sizeof head);
    std::memcpy(kept.data(), bytes.data() + sizeof head, kept.size() * sizeof(float));
  }
  if (head[0] != kScalingStateMagic || head[1] != uint64_t(d.L()))
    throw std::runtime_error(fmt::format("--fp8 1: the checkpoint's {} bytes of scaling state are not the FP8 state of "
                                         "a {}-layer model",
                                         bytes.size(), d.L()));
  std::vector<float> state = fp8_initial_state(d.L());
  for (int i = 0; i < tensors; ++i) {
    const float* t = kept.data() + size_t(i) * kScalingStateFloatsPerTensor;
    state[fp8_scale_offset(i)] = t[0];
    state[fp8_scale_inv_offset(i)] = 1.0f / t[0];  // exact: the scales are powers of two
    std::copy(t + 1, t + kScalingStateFloatsPerTensor, state.begin() + fp8_history_offset(i));
  }
  d.fp8_micro_steps = head[2];
  CUDA_CHECK(cudaMemcpyAsync(d.fp8_state, state.data(), state.size() * sizeof(float), cudaMemcpyHostToDevice,
                             d.stream));
  CUDA_CHECK(cudaStreamSynchronize(d.stream));
}

}  // namespace llmc
