// Where the FP8 scaling state (--fp8 1, llmc/cuda/fp8.cuh) keeps each tensor's scale and amax, and
// where the weights' FP8 copies lie: plain C++, so that the memory plan and the unit tests can
// include it.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "llmc/gpt2.h"
#include "llmc/linear_layers.h"

namespace llmc {

constexpr float kE4M3Max = 448.0f;
constexpr float kE5M2Max = 57344.0f;
// Micro-steps of amax history behind each delayed scale.
constexpr int kFp8History = 16;
// Each tensor's amax is recorded into this many slots, each on a 128-byte line of its own (a
// block's or a warp's atomicMax goes to slot index % kFp8AmaxSlots), so that the atomics of
// thousands of blocks spread over as many of L2's lines instead of queueing on one: on an H100 the
// first layout, 64 slots side by side on two lines and one atomic per warp, held a cast of 25 M
// values to 0.09 ms (850 GB/s) and made --fp8 1 slower than bf16. The scale update takes the
// largest.
constexpr int kFp8AmaxSlots = 32;
constexpr size_t kFp8AmaxSlotStride = 32;  // floats: 128 bytes

// A scaled tensor's role in its linear layer's GEMMs: the layer's input (E4M3, delayed scaling),
// its output gradient (E5M2, delayed) or its weight (E4M3, current).
enum class Fp8Role { kInput, kGradient, kWeight };
constexpr int kFp8Roles = 3;

// A checkpoint's scaling state (CudaBackend::scaling_state): kScalingStateHeadWords uint64 words,
// then per scaled tensor what it keeps: its scale and its amax history (the scale_inv is 1/scale, and
// the amax slots are zero between micro-steps).
constexpr size_t kScalingStateHeadWords = 3;
constexpr size_t kScalingStateFloatsPerTensor = 1 + kFp8History;

// Each scaled tensor's state, at float fp8_scale_offset(i) of the state buffer, tensor i
// (Fp8Layout::tensor), kFp8FloatsPerTensor floats: the scale (the cast's multiplier), the scale_inv
// (the GEMM's), each first in a 16-byte group of its own, then kFp8AmaxSlots amax slots (float bits,
// atomicMax'ed as unsigned: for x >= 0 the order of the bits is the order of the values), the first
// float of each kFp8AmaxSlotStride, and kFp8History amax entries. cuBLASLt's FP8 GEMMs refused scale
// pointers 4 bytes off a 16-byte boundary on an H100 (CUBLAS_STATUS_NOT_SUPPORTED from
// cublasLtMatmul after its heuristic had offered the algorithm), so every tensor's state starts
// 16-byte aligned and its scale_inv at float 4.
constexpr size_t kFp8ScaleGroup = 4;  // floats in 16 bytes
constexpr size_t kFp8FloatsPerTensor = 2 * kFp8ScaleGroup + kFp8AmaxSlots * kFp8AmaxSlotStride + kFp8History;

// The offsets are called by kernels too: host and device functions under nvcc, plain functions
// elsewhere (the host code, and the emulated GPU's kernels, compiled by g++).
#if defined(__CUDACC__)
#define LLMC_FP8_ACCESSOR __host__ __device__ inline
#else
#define LLMC_FP8_ACCESSOR inline
#endif
LLMC_FP8_ACCESSOR size_t fp8_scale_offset(int i) { return size_t(i) * kFp8FloatsPerTensor; }
LLMC_FP8_ACCESSOR size_t fp8_scale_inv_offset(int i) { return fp8_scale_offset(i) + kFp8ScaleGroup; }
LLMC_FP8_ACCESSOR size_t fp8_amax_offset(int i) { return fp8_scale_offset(i) + 2 * kFp8ScaleGroup; }
LLMC_FP8_ACCESSOR size_t fp8_history_offset(int i) { return fp8_amax_offset(i) + kFp8AmaxSlots * kFp8AmaxSlotStride; }
#undef LLMC_FP8_ACCESSOR

// The linear layers that run in FP8 with --fp8 1: the table's fp8 column (llmc/linear_layers.def),
// and with LLMC_FP8_LM_HEAD=on (`lm_head`) the LM head too, in table order.
inline std::vector<LinearLayer> fp8_linears(const GPT2Config& config, bool lm_head) {
  std::vector<LinearLayer> linears;
  for (const LinearLayerSpec& linear : linear_layers(config))
    if (linear.fp8 || (lm_head && linear.id == LinearLayer::kLmHead)) linears.push_back(linear.id);
  return linears;
}

// The scaled tensors and the weights' FP8 copies of the linear layers that run in FP8, for one
// model.
//
// Tensor indices: the inputs of every such layer, then their output gradients, then their weights
// (so the delayed tensors come first, [0, delayed())); within a role the layers in table order, each
// with one tensor per layer in layer order, or one for a layer that is not per layer. For GPT-2's
// four per-layer linear layers that is index (role * 4 + linear) * L + layer, the order in which a
// checkpoint keeps the scaling state.
// Weight copies (weight_bytes() in all, one byte a value): the layers in table order, each with,
// per W in layer order, W's E4M3 copy as it is (out x in) then transposed (in x out).
// (Inline, as the kernel benchmarks of dev/cuda use it without the host library.)
class Fp8Layout {
 public:
  // The table's fp8 column; or the layers `linears` (fp8_linears; in any order: the layout follows
  // the table's).
  explicit Fp8Layout(const GPT2Config& config) : Fp8Layout(config, fp8_linears(config, false)) {}
  Fp8Layout(const GPT2Config& config, const std::vector<LinearLayer>& linears) : L_(config.num_layers) {
    for (const LinearLayerSpec& linear : linear_layers(config)) {
      Place& place = place_[int(linear.id)];
      place.name = linear.name;
      if (std::find(linears.begin(), linears.end(), linear.id) == linears.end()) continue;
      place.scaled = true;
      place.per_layer = linear.per_layer;
      place.first_tensor = per_role_;
      place.first_copy = weight_bytes_;
      place.weight_values = linear.out * linear.in;
      if (linear.per_layer) operand_width_ = std::max({operand_width_, linear.in, linear.out});
      per_role_ += int(linear.copies(L_));
      weight_bytes_ += 2 * place.weight_values * linear.copies(L_);
    }
  }

  bool scales(LinearLayer linear) const { return place_[int(linear)].scaled; }
  // Throws std::logic_error for a layer that does not run in FP8 or a layer outside 0..L-1.
  int tensor(Fp8Role role, LinearLayer linear, int layer) const {
    const Place& place = place_[int(linear)];
    return first(role) + place.first_tensor + layer_of(place, layer);
  }
  // Each role has a tensor of each W of the layers that run in FP8: tensors_per_role() of them,
  // from first(role) on.
  int tensors_per_role() const { return per_role_; }
  int tensors() const { return kFp8Roles * per_role_; }
  int first(Fp8Role role) const { return int(role) * per_role_; }
  int delayed() const { return first(Fp8Role::kWeight); }
  size_t state_floats() const { return size_t(tensors()) * kFp8FloatsPerTensor; }
  // The state before anything was recorded: every scale and scale_inv 1 (what the calibrating
  // micro-step casts with), the amax slots and the history 0.
  std::vector<float> initial_state() const {
    std::vector<float> state(state_floats(), 0.0f);
    for (int i = 0; i < tensors(); ++i) state[fp8_scale_offset(i)] = state[fp8_scale_inv_offset(i)] = 1.0f;
    return state;
  }

  // Where layer `layer`'s copy of `linear`'s weight starts (bytes), as it is or transposed.
  size_t weight_copy(LinearLayer linear, int layer, bool transposed) const {
    const Place& place = place_[int(linear)];
    return place.first_copy + (2 * size_t(layer_of(place, layer)) + (transposed ? 1 : 0)) * place.weight_values;
  }
  size_t weight_bytes() const { return weight_bytes_; }
  // The widest FP8 operand a row of a layer's activations or gradients has: the largest in or out
  // of the per-layer linear layers that run in FP8 (the operand buffer holds B*T rows of it). The LM
  // head's operands are the memory plan's: lnf's copy and a chunk of d(logits)' rows.
  size_t operand_width() const { return operand_width_; }

 private:
  struct Place {
    const char* name = nullptr;
    bool scaled = false;
    bool per_layer = false;
    int first_tensor = 0;   // within its role
    size_t first_copy = 0;  // bytes
    size_t weight_values = 0;
  };
  // The W of `place`'s layer that layer `layer` uses: its own, or the model's one.
  int layer_of(const Place& place, int layer) const {
    if (!place.scaled || layer < 0 || layer >= L_)
      throw std::logic_error(std::string("Fp8Layout: linear layer ") + place.name + " of layer " +
                             std::to_string(layer) + " has no FP8 tensors");
    return place.per_layer ? layer : 0;
  }

  int L_ = 0;
  int per_role_ = 0;
  size_t weight_bytes_ = 0;
  size_t operand_width_ = 0;
  std::array<Place, kLinearLayers> place_{};
};

}  // namespace llmc
