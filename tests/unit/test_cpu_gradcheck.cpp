// Finite-difference check of the CPU backend's gradients, independent of PyTorch.
//
// Tolerance reasoning: the forward pass runs in fp32, so the loss L (about ln 61 = 4.1) carries a
// rounding noise of roughly 1e-7 relative, ~5e-7 absolute (the loss is recomputed here in double
// from the logits, adding no further rounding). A central difference (L(p+h) - L(p-h)) / 2h then
// has a noise of ~5e-7 / 2h and a truncation error of h^2 |L'''| / 6.
// - Single entries, h = 2e-3: noise ~1.3e-4, so an entry must agree to 1e-2 relative plus 2e-4.
// - A directional derivative along sign(gradient) over a whole tensor (it equals the gradient's L1
//   norm, so a wrong sign or magnitude anywhere shows): the step moves every entry, so curvature
//   adds up and h must be smaller, 3e-4; noise ~1e-3, so it must agree to 1e-2 relative plus 3e-3.
// Breaking one factor of the GELU derivative makes both checks fail.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "llmc/cpu/cpu_backend.h"
#include "llmc/gpt2.h"
#include "llmc/rng.h"
#include "tests/unit/test_support.h"

using namespace llmc;

namespace {

struct Case {
  GPT2Config config;
  int B = 2, T = 5;
  std::vector<int> tokens;
  std::vector<float> params;
};

Case make_case() {
  Case c;
  c.config = test_support::two_layer_config(8, 8, 61, 64);
  c.params = init_parameters(c.config, 5);
  // Larger weights than GPT-2's 0.02 and non-trivial biases/layernorm parameters, so every path
  // carries a gradient well above the finite-difference noise floor.
  Rng rng(6);
  auto layout = param_layout(c.config);
  for (const ParamTensor& t : layout) {
    for (size_t i = 0; i < t.numel; ++i) {
      float& p = c.params[t.offset + i];
      if (&t == &layout[kWte] && i >= size_t(c.config.vocab_size) * c.config.channels) continue;
      p = p * 5.0f + 0.1f * rng.normal();
    }
  }
  c.tokens.resize(size_t(c.B) * c.T + 1);
  for (int& t : c.tokens) t = int(rng.below(uint64_t(c.config.vocab_size)));
  return c;
}

// Mean cross-entropy, in double, from the backend's fp32 logits.
double loss_at(CpuBackend& backend, const Case& c, const std::vector<float>& params) {
  backend.set_parameters(params.data());
  const float* logits = backend.forward_logits(c.tokens.data(), c.B, c.T);
  const int V = c.config.vocab_size, Vp = c.config.padded_vocab_size;
  double total = 0.0;
  for (int n = 0; n < c.B * c.T; ++n) {
    const float* row = logits + size_t(n) * Vp;
    double sum = 0.0;
    for (int v = 0; v < V; ++v) sum += std::exp(double(row[v]));
    total += std::log(sum) - row[c.tokens[n + 1]];
  }
  return total / (c.B * c.T);
}

// A backend holding the case's parameters and the gradients of one forward/backward pass of its
// tokens (loss scale 1), for the tests that compare those gradients.
struct Backpropagated {
  Backpropagated() {
    backend.set_parameters(c.params.data());
    backend.zero_grad();
    backward(1.0f);
  }
  void backward(float loss_scale) {
    backend.forward_backward(c.tokens.data(), c.tokens.data() + 1, c.B, c.T, loss_scale);
  }

  Case c = make_case();
  CpuBackend backend{c.config};
};

}  // namespace

TEST_CASE_FIXTURE(Backpropagated, "cpu backend: gradients match central differences for all 16 tensors") {
  const std::vector<float> grads(backend.gradients(), backend.gradients() + c.params.size());
  CHECK(backend.accumulated_loss() == doctest::Approx(loss_at(backend, c, c.params)).epsilon(1e-6));

  const double h = 2e-3, h_dir = 3e-4;
  Rng rng(9);
  for (const ParamTensor& t : param_layout(c.config)) {
    const std::string name = t.name;
    CAPTURE(name);
    for (int k = 0; k < 5; ++k) {
      const size_t i = t.offset + rng.below(t.numel);
      std::vector<float> p = c.params;
      p[i] = c.params[i] + float(h);
      const double up = loss_at(backend, c, p);
      p[i] = c.params[i] - float(h);
      const double down = loss_at(backend, c, p);
      const double fd = (up - down) / (2 * h);
      CAPTURE(i);
      CHECK(std::fabs(fd - grads[i]) <= 1e-2 * std::fabs(fd) + 2e-4);
    }
    std::vector<float> direction(t.numel);
    double analytic = 0.0;
    for (size_t j = 0; j < t.numel; ++j) {
      direction[j] = grads[t.offset + j] < 0.0f ? -1.0f : 1.0f;
      analytic += double(direction[j]) * grads[t.offset + j];
    }
    std::vector<float> up_p = c.params, down_p = c.params;
    for (size_t j = 0; j < t.numel; ++j) {
      up_p[t.offset + j] += float(h_dir) * direction[j];
      down_p[t.offset + j] -= float(h_dir) * direction[j];
    }
    const double fd = (loss_at(backend, c, up_p) - loss_at(backend, c, down_p)) / (2 * h_dir);
    CHECK(std::fabs(fd - analytic) <= 1e-2 * std::fabs(analytic) + 3e-3);
  }
}

TEST_CASE_FIXTURE(Backpropagated, "cpu backend: padded vocabulary rows get exactly zero gradient") {
  const size_t C = c.config.channels;
  for (size_t i = size_t(c.config.vocab_size) * C; i < size_t(c.config.padded_vocab_size) * C; ++i)
    REQUIRE(backend.gradients()[i] == 0.0f);
  // and the loss does not depend on them at all
  std::vector<float> p = c.params;
  p[size_t(c.config.vocab_size) * C + 3] = 5.0f;
  CHECK(loss_at(backend, c, p) == loss_at(backend, c, c.params));
}

TEST_CASE_FIXTURE(Backpropagated, "cpu backend: loss_scale and accumulation over micro-batches") {
  const float loss = backend.accumulated_loss();
  const std::vector<float> grads(backend.gradients(), backend.gradients() + c.params.size());
  backend.zero_grad();
  backward(0.5f);
  backward(0.5f);
  CHECK(backend.accumulated_loss() == doctest::Approx(loss).epsilon(1e-6));
  for (size_t i = 0; i < grads.size(); ++i)
    REQUIRE(backend.gradients()[i] == doctest::Approx(grads[i]).epsilon(1e-5));
  CHECK(backend.forward_loss(c.tokens.data(), c.tokens.data() + 1, c.B, c.T) == doctest::Approx(loss).epsilon(1e-6));
  std::vector<float> next(c.config.vocab_size);
  backend.next_token_logits(c.tokens.data(), c.T, next.data());
  const float* logits = backend.forward_logits(c.tokens.data(), 1, c.T);
  for (int v = 0; v < c.config.vocab_size; ++v)
    REQUIRE(next[v] == logits[size_t(c.T - 1) * c.config.padded_vocab_size + v]);
}

TEST_CASE("cpu backend: bad batches are rejected") {
  Case c = make_case();
  CpuBackend backend(c.config);
  std::vector<int> tokens(16, 3);
  tokens[4] = 61;  // == vocab_size
  CHECK_THROWS_AS(backend.forward_loss(tokens.data(), tokens.data() + 1, 1, 8), std::invalid_argument);
  tokens[4] = 3;
  CHECK_THROWS_AS(backend.forward_loss(tokens.data(), tokens.data() + 1, 1, 9), std::invalid_argument);
  CHECK_NOTHROW(backend.forward_loss(tokens.data(), tokens.data() + 1, 1, 8));
}
