// CudaBackend's FP8 matmuls (--fp8 1; llmc/cuda/fp8.cuh has the casts and the scaling, and
// docs/cuda-trainer.md "FP8 matmuls" the design): where each scaled tensor's FP8 copy lives, the
// weights' casts, the end of a micro-step, and the scaling state a checkpoint keeps.
#include <fmt/format.h>

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

// Where a linear layer's copies start within a layer's 24 C^2 bytes of fp8_weights: each weight's
// copy as it is, then transposed (qkv 3C^2 each, attproj C^2, fc 4C^2, fcproj 4C^2).
size_t linear_copy_offset(Fp8Linear linear, size_t C) {
  const size_t before[] = {0, 6, 8, 16};  // in C^2, twice the sizes of the layers before
  return before[int(linear)] * C * C;
}

constexpr uint64_t kScalingStateMagic = 0x3153434C41385046ull;  // "FP8ALCS1"

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

Fp8Matrix CudaBackend::Impl::fp8_weight(Fp8Linear linear, int l, bool transposed) const {
  const size_t Cs = size_t(C());
  const LinearShape shape = linear_shape(linear, C());
  const size_t at = size_t(l) * fp8_weight_bytes(1, Cs) + linear_copy_offset(linear, Cs) +
                    (transposed ? size_t(shape.rows) * shape.cols : 0);
  const int i = fp8_tensor_index(Fp8Role::kWeight, linear, l, L());
  return {fp8_weights + at, fp8_state + fp8_scale_inv_offset(i), __NV_E4M3};
}

void CudaBackend::Impl::cast_fp8_weights() {
  if (!fp8_weights_stale) return;
  for (int l = 0; l < L(); ++l)
    for (Fp8Linear linear : {Fp8Linear::kQkv, Fp8Linear::kAttproj, Fp8Linear::kFc, Fp8Linear::kFcproj}) {
      const LinearShape shape = linear_shape(linear, C());
      const Fp8Matrix w8 = fp8_weight(linear, l, false), wt8 = fp8_weight(linear, l, true);
      fp8_cast_weight(const_cast<__nv_fp8_storage_t*>(w8.data), const_cast<__nv_fp8_storage_t*>(wt8.data),
                      fp8_state, fp8_tensor_index(Fp8Role::kWeight, linear, l, L()), param(shape.weight, l),
                      shape.rows, shape.cols, stream);
    }
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

// Bytes, little-endian: [0] kScalingStateMagic [1] layers [2] fp8_micro_steps (uint64 each), then
// the fp8_state buffer's fp8_state_floats(L) floats (their amax slots are zero between micro-steps).
std::vector<uint8_t> CudaBackend::scaling_state() {
  Impl& d = *impl_;
  if (!d.opt.fp8) return {};
  d.outside_step();
  const size_t floats = fp8_state_floats(d.L());
  const uint64_t head[3] = {kScalingStateMagic, uint64_t(d.L()), d.fp8_micro_steps};
  std::vector<uint8_t> bytes(sizeof head + floats * sizeof(float));
  std::memcpy(bytes.data(), head, sizeof head);
  CUDA_CHECK(cudaMemcpyAsync(bytes.data() + sizeof head, d.fp8_state, floats * sizeof(float), cudaMemcpyDeviceToHost,
                             d.stream));
  CUDA_CHECK(cudaStreamSynchronize(d.stream));
  return bytes;
}

void CudaBackend::set_scaling_state(const std::vector<uint8_t>& state) {
  Impl& d = *impl_;
  // Without FP8 there is nothing to scale; a checkpoint written without --fp8 1 has no state, and
  // the scales start afresh, the next micro-step calibrating them.
  if (!d.opt.fp8 || state.empty()) return;
  const size_t floats = fp8_state_floats(d.L());
  uint64_t head[3] = {};
  if (state.size() == sizeof head + floats * sizeof(float)) std::memcpy(head, state.data(), sizeof head);
  if (head[0] != kScalingStateMagic || head[1] != uint64_t(d.L()))
    throw std::runtime_error(fmt::format("--fp8 1: the checkpoint's {} bytes of scaling state are not the FP8 state of "
                                         "a {}-layer model",
                                         state.size(), d.L()));
  d.fp8_micro_steps = head[2];
  CUDA_CHECK(cudaMemcpyAsync(d.fp8_state, state.data() + sizeof head, floats * sizeof(float), cudaMemcpyHostToDevice,
                             d.stream));
  CUDA_CHECK(cudaStreamSynchronize(d.stream));
}

}  // namespace llmc
