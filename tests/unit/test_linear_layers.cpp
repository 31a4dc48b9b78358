// The linear-layer table (llmc/linear_layers.def) and the FP8 layout built from it
// (llmc/cuda/fp8_layout.h), against GPT-2 small's shapes and the scaling-state order that
// checkpoints written before the table keep, both worked out by hand.
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "llmc/cuda/fp8_layout.h"
#include "llmc/gpt2.h"
#include "llmc/linear_layers.h"

using namespace llmc;

namespace {

// GPT-2 small: L=12, C=768, Vp=50304.
constexpr size_t kL = 12, kC = 768, kVp = 50304;

}  // namespace

TEST_CASE("linear layers: GPT-2 small's four per-layer layers and its LM head") {
  const auto layers = linear_layers(config_from_descriptor("d12"));
  const LinearLayerSpec& qkv = layers[int(LinearLayer::kQkv)];
  CHECK(qkv.weight == kQkvw);
  CHECK(qkv.bias == kQkvb);
  CHECK(qkv.out == 3 * kC);
  CHECK(qkv.in == kC);
  CHECK(qkv.per_layer);
  CHECK(qkv.fp8);
  const LinearLayerSpec& fcproj = layers[int(LinearLayer::kFcproj)];
  CHECK(fcproj.weight == kFcprojw);
  CHECK(fcproj.out == kC);
  CHECK(fcproj.in == 4 * kC);
  CHECK(fcproj.copies(int(kL)) == kL);
  const LinearLayerSpec& head = layers[int(LinearLayer::kLmHead)];
  CHECK(head.weight == kWte);
  CHECK(head.bias == kNoBias);
  CHECK(head.out == kVp);
  CHECK(head.in == kC);
  CHECK_FALSE(head.per_layer);
  CHECK(head.copies(int(kL)) == 1);
  CHECK_FALSE(head.fp8);
  for (int i = 0; i < kLinearLayers; ++i) CHECK(int(layers[i].id) == i);
}

TEST_CASE("linear layers: each W has its row's shape in the model table, each b out values") {
  const GPT2Config config = config_from_descriptor("d12");
  const auto layout = param_layout(config);
  for (const LinearLayerSpec& linear : linear_layers(config)) {
    CAPTURE(linear.name);
    CHECK(layout[linear.weight].shape.numel() == linear.out * linear.in);
    CHECK(layout[linear.weight].per_layer == linear.per_layer);
    if (linear.bias != kNoBias) CHECK(layout[linear.bias].shape.numel() == linear.out);
  }
  CHECK(num_parameters(config) == 124475904);
}

TEST_CASE("FP8 layout: GPT-2 small keeps the scaling state's order, (role * 4 + linear) * L + layer") {
  const GPT2Config config = config_from_descriptor("d12");
  const Fp8Layout fp8(config);
  CHECK(fp8.tensors_per_role() == 4 * int(kL));
  CHECK(fp8.tensors() == 144);
  CHECK(fp8.delayed() == 96);
  CHECK(fp8.first(Fp8Role::kWeight) == 96);
  const LinearLayer four[] = {LinearLayer::kQkv, LinearLayer::kAttproj, LinearLayer::kFc, LinearLayer::kFcproj};
  for (int role = 0; role < 3; ++role)
    for (int linear = 0; linear < 4; ++linear)
      for (int layer = 0; layer < int(kL); ++layer)
        REQUIRE(fp8.tensor(Fp8Role(role), four[linear], layer) == (role * 4 + linear) * int(kL) + layer);
  CHECK_FALSE(fp8.scales(LinearLayer::kLmHead));
  CHECK_THROWS_AS(fp8.tensor(Fp8Role::kInput, LinearLayer::kLmHead, 0), std::logic_error);
  CHECK_THROWS_AS(fp8.tensor(Fp8Role::kInput, LinearLayer::kQkv, int(kL)), std::logic_error);
  // The weight copies: 2 x 12 C^2 bytes a layer; qkv's L layers (6 C^2 each) come first.
  CHECK(fp8.weight_bytes() == 169869312ull);
  CHECK(fp8.weight_copy(LinearLayer::kQkv, 0, false) == 0);
  CHECK(fp8.weight_copy(LinearLayer::kQkv, 0, true) == 3 * kC * kC);
  CHECK(fp8.weight_copy(LinearLayer::kQkv, 1, false) == 6 * kC * kC);
  CHECK(fp8.weight_copy(LinearLayer::kAttproj, 0, false) == kL * 6 * kC * kC);
  CHECK(fp8.weight_copy(LinearLayer::kFcproj, int(kL) - 1, true) == kL * (6 + 2 + 8) * kC * kC + 11 * 8 * kC * kC + 4 * kC * kC);
  CHECK(fp8.operand_width() == 4 * kC);
  // Every scale and scale_inv 1, the rest 0: 1048 floats a tensor.
  const std::vector<float> state = fp8.initial_state();
  REQUIRE(state.size() == 144u * 1048);
  size_t ones = 0, others = 0;
  for (float x : state) {
    if (x == 1.0f)
      ++ones;
    else if (x != 0.0f)
      ++others;
  }
  CHECK(ones == 2 * 144);
  CHECK(others == 0);
  CHECK(state[fp8_scale_offset(143)] == 1.0f);
  CHECK(state[fp8_scale_inv_offset(143)] == 1.0f);
}

TEST_CASE("FP8 layout: a layer that is not per layer holds one tensor a role, after the per-layer ones") {
  const GPT2Config config = config_from_descriptor("d12");
  const Fp8Layout fp8(config, {LinearLayer::kLmHead, LinearLayer::kQkv, LinearLayer::kAttproj, LinearLayer::kFc,
                               LinearLayer::kFcproj});
  CHECK(fp8.tensors_per_role() == 4 * int(kL) + 1);
  CHECK(fp8.tensors() == 3 * 49);
  CHECK(fp8.delayed() == 98);
  // The table's order whatever the order asked in: the four layers as before, then the head.
  CHECK(fp8.tensor(Fp8Role::kInput, LinearLayer::kQkv, 0) == 0);
  CHECK(fp8.tensor(Fp8Role::kInput, LinearLayer::kFcproj, 11) == 47);
  CHECK(fp8.tensor(Fp8Role::kInput, LinearLayer::kLmHead, 0) == 48);
  CHECK(fp8.tensor(Fp8Role::kGradient, LinearLayer::kQkv, 0) == 49);
  CHECK(fp8.tensor(Fp8Role::kGradient, LinearLayer::kLmHead, 0) == 97);
  CHECK(fp8.tensor(Fp8Role::kWeight, LinearLayer::kLmHead, 0) == 146);
  // Every layer's view of the one shared W is the same tensor and the same copy.
  CHECK(fp8.tensor(Fp8Role::kWeight, LinearLayer::kLmHead, 7) == 146);
  CHECK(fp8.weight_copy(LinearLayer::kLmHead, 7, false) == 169869312ull);
  CHECK(fp8.weight_copy(LinearLayer::kLmHead, 0, true) == 169869312ull + kVp * kC);
  CHECK(fp8.weight_bytes() == 169869312ull + 2 * kVp * kC);
  // The operand buffer's rows are the layers' (B*T of them): the head's Vp columns are not among them.
  CHECK(fp8.operand_width() == 4 * kC);
}

TEST_CASE("FP8 layout: LLMC_FP8_LM_HEAD=on adds the LM head to the table's layers") {
  const GPT2Config config = config_from_descriptor("d12");
  const std::vector<LinearLayer> four = {LinearLayer::kQkv, LinearLayer::kAttproj, LinearLayer::kFc,
                                         LinearLayer::kFcproj};
  CHECK(fp8_linears(config, false) == four);
  std::vector<LinearLayer> five = four;
  five.push_back(LinearLayer::kLmHead);
  CHECK(fp8_linears(config, true) == five);
  CHECK(Fp8Layout(config, fp8_linears(config, true)).tensors() == 3 * 49);
  CHECK(Fp8Layout(config).tensors() == 144);
}

TEST_CASE("FP8 layout: no layer in FP8, no tensors") {
  const Fp8Layout fp8(config_from_descriptor("d12"), {});
  CHECK(fp8.tensors() == 0);
  CHECK(fp8.weight_bytes() == 0);
  CHECK(fp8.state_floats() == 0);
  CHECK_THROWS_AS(fp8.weight_copy(LinearLayer::kFc, 0, false), std::logic_error);
}
