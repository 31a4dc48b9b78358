// GPT-2's linear layers (llmc/linear_layers.def) as a table: which parameters each one multiplies
// by, its shape for a model, and whether --fp8 1 runs it in FP8.
#pragma once
#include <array>
#include <cstddef>

#include "llmc/gpt2.h"

namespace llmc {

enum class LinearLayer {
#define LLMC_LINEAR(id, name, weight, bias, fp8) id,
#include "llmc/linear_layers.def"
};

constexpr LinearLayer kLinearLayerIds[] = {
#define LLMC_LINEAR(id, name, weight, bias, fp8) LinearLayer::id,
#include "llmc/linear_layers.def"
};
constexpr int kLinearLayers = int(sizeof kLinearLayerIds / sizeof kLinearLayerIds[0]);

// A linear layer without a bias names this as its bias tensor.
constexpr int kNoBias = -1;

// One row of the table for a model's shape: out = inp W^T + b, W of out x in values (W's shape in
// the model table).
struct LinearLayerSpec {
  LinearLayer id;
  const char* name;
  int weight, bias;  // ParamIndex of W and of b (kNoBias: none)
  size_t out, in;
  bool per_layer;  // one W per layer, or one for the model
  bool fp8;        // --fp8 1 runs its forward and input-gradient GEMMs in FP8
  // How many Ws the model has (L layers).
  size_t copies(int L) const { return per_layer ? size_t(L) : 1; }
};

// The rows for `config`, indexed by LinearLayer. (Inline, as the kernel benchmarks of dev/cuda use
// it without the host library.)
inline std::array<LinearLayerSpec, kLinearLayers> linear_layers(const GPT2Config& config) {
  const auto params = param_specs(config);
  const auto row = [&](LinearLayer id, const char* name, int weight, int bias, bool fp8) {
    const ParamSpec& w = params[weight];
    return LinearLayerSpec{id, name, weight, bias, w.shape.rows, w.shape.cols, w.per_layer, fp8};
  };
  return {{
#define LLMC_LINEAR(id, name, weight, bias, fp8) row(LinearLayer::id, name, weight, bias, fp8),
#include "llmc/linear_layers.def"
  }};
}

}  // namespace llmc
