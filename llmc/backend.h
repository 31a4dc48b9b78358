// The interface between the shared training loop (llmc/train_loop.h) and a compute backend: the
// CPU oracle (llmc/cpu_backend.h) or the CUDA trainer. Everything that is not a kernel lives in
// the loop; a backend owns parameters, gradients, AdamW moments and activations.
#pragma once
#include <cstddef>
#include <stdexcept>

#include "llmc/gpt2.h"

namespace llmc {

struct AdamWHyper {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // applied only to the tensors marked weight_decay in param_layout
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const GPT2Config& config() const = 0;

  // Parameters as a flat fp32 buffer in checkpoint order (num_parameters(config()) floats).
  virtual void set_parameters(const float* params) = 0;
  virtual void get_parameters(float* params) = 0;

  // AdamW first and second moments, same layout as the parameters.
  virtual void set_optimizer_state(const float* m, const float* v) = 0;
  virtual void get_optimizer_state(float* m, float* v) = 0;

  // Starts a step: zeroes the gradients and the loss accumulator.
  virtual void zero_grad() = 0;

  // Forward and backward of one micro-batch of B rows of T tokens (inputs/targets are B*T ids,
  // row-major). Adds the gradient of (loss_scale * mean cross-entropy of this micro-batch) to the
  // gradients, and loss_scale * that mean to the loss accumulator. With accumulation over `n`
  // micro-batches the loop passes loss_scale = 1/n, so the step's gradient is that of the mean.
  virtual void forward_backward(const int* inputs, const int* targets, int B, int T, float loss_scale) = 0;

  // The loss accumulated since zero_grad() (the one value of a step that must reach the host).
  virtual float accumulated_loss() = 0;

  // Mean cross-entropy of a batch without touching the gradients (validation).
  virtual float forward_loss(const int* inputs, const int* targets, int B, int T) = 0;

  // Cross-entropy at every position of a batch (B*T floats, row-major like the targets), without
  // touching the gradients: HellaSwag scores each completion by its own positions' losses. The
  // default throws, for a backend that has not implemented it yet (-h 1 then fails with its message).
  virtual void forward_losses(const int* inputs, const int* targets, int B, int T, float* losses) {
    (void)inputs, (void)targets, (void)B, (void)T, (void)losses;
    throw std::runtime_error("-h: this backend does not implement forward_losses, which the HellaSwag eval needs");
  }

  // Logits over the real vocabulary (config().vocab_size floats) that predict the token after
  // tokens[T-1], for one sequence of T tokens (sampling).
  virtual void next_token_logits(const int* tokens, int T, float* logits) = 0;

  // Sum of squares of every gradient entry (the loop takes the square root; with several ranks it
  // sums the ranks' values first).
  virtual float grad_sum_of_squares() = 0;

  // One AdamW step at 1-based step count t: gradients are first multiplied by grad_scale (global
  // norm clipping), then m, v and the parameters are updated as in DESIGN.md.
  virtual void adamw_update(const AdamWHyper& hyper, float lr, int t, float grad_scale) = 0;
};

}  // namespace llmc
