// A Backend that tells the watchdog (llmc/train/watchdog.h) which backend call its rank is in: each
// call marks its name, forwards to the wrapped backend and, on return, counts as progress. So every
// micro-batch, evaluation batch, sampled token and checkpoint read of the parameters is a beat
// without a mark in the loop, and a rank stuck on the GPU (a hung kernel, or an NCCL collective
// whose peer is gone, which the host only notices when it next waits for the stream) reports e.g.
// "inside the backend's grad_sum_of_squares". Every virtual method of Backend must be forwarded
// here; the calls that only read fixed properties are not marked.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "llmc/backend.h"
#include "llmc/train/watchdog.h"

namespace llmc {

class WatchedBackend final : public Backend {
 public:
  // Both must outlive this object.
  WatchedBackend(Backend& inner, Watchdog& watchdog) : inner_(inner), watchdog_(watchdog) {}

  using Backend::grad_sum_of_squares;
  const GPT2Config& config() const override { return inner_.config(); }
  const OptimizerPartition& partition() const override { return inner_.partition(); }
  size_t optimizer_state_bytes() const override { return inner_.optimizer_state_bytes(); }
  double peak_flops() const override { return inner_.peak_flops(); }

  void set_parameters(const float* params) override {
    marked("set_parameters", [&] { inner_.set_parameters(params); });
  }
  void get_parameters(float* params) override { marked("get_parameters", [&] { inner_.get_parameters(params); }); }
  std::vector<OptimizerTensor> get_optimizer_state() override {
    return marked("get_optimizer_state", [&] { return inner_.get_optimizer_state(); });
  }
  void set_optimizer_state(const std::vector<OptimizerTensor>& state) override {
    marked("set_optimizer_state", [&] { inner_.set_optimizer_state(state); });
  }
  void zero_grad() override { marked("zero_grad", [&] { inner_.zero_grad(); }); }
  void forward_backward(const int* inputs, const int* targets, int B, int T, float loss_scale) override {
    marked("forward_backward", [&] { inner_.forward_backward(inputs, targets, B, T, loss_scale); });
  }
  float accumulated_loss() override { return marked("accumulated_loss", [&] { return inner_.accumulated_loss(); }); }
  void forward_losses(const int* inputs, const int* targets, int B, int T, float* losses) override {
    marked("forward_losses", [&] { inner_.forward_losses(inputs, targets, B, T, losses); });
  }
  void next_token_logits(const int* tokens, int T, float* logits) override {
    marked("next_token_logits", [&] { inner_.next_token_logits(tokens, T, logits); });
  }
  float grad_sum_of_squares(ElementRange range) override {
    return marked("grad_sum_of_squares", [&] { return inner_.grad_sum_of_squares(range); });
  }
  void set_gradient_element(size_t index, float value) override {
    marked("set_gradient_element", [&] { inner_.set_gradient_element(index, value); });
  }
  void optimizer_step(const OptimizerStep& step) override {
    marked("optimizer_step", [&] { inner_.optimizer_step(step); });
  }
  void all_reduce_gradients(Communicator& host) override {
    marked("all_reduce_gradients", [&] { inner_.all_reduce_gradients(host); });
  }
  void reduce_scatter_gradients(Communicator& host) override {
    marked("reduce_scatter_gradients", [&] { inner_.reduce_scatter_gradients(host); });
  }
  void all_gather_parameters(Communicator& host) override {
    marked("all_gather_parameters", [&] { inner_.all_gather_parameters(host); });
  }
  void begin_gradient_sync(Communicator& host) override {
    marked("begin_gradient_sync", [&] { inner_.begin_gradient_sync(host); });
  }
  void finish_gradient_sync() override { marked("finish_gradient_sync", [&] { inner_.finish_gradient_sync(); }); }
  bool tunes_kernels() const override { return inner_.tunes_kernels(); }
  void tune_kernels(const int* inputs, const int* targets, int B, int T) override {
    marked("tune_kernels", [&] { inner_.tune_kernels(inputs, targets, B, T); });
  }
  std::vector<uint8_t> kernel_choices() override {
    return marked("kernel_choices", [&] { return inner_.kernel_choices(); });
  }
  std::string set_kernel_choices(const std::vector<uint8_t>& choices) override {
    return marked("set_kernel_choices", [&] { return inner_.set_kernel_choices(choices); });
  }
  std::vector<uint8_t> scaling_state() override {
    return marked("scaling_state", [&] { return inner_.scaling_state(); });
  }
  void set_scaling_state(const std::vector<uint8_t>& state) override {
    marked("set_scaling_state", [&] { inner_.set_scaling_state(state); });
  }

 private:
  // Runs `call` as the backend call `name`: marked while it runs, progress when it returns.
  template <class Call>
  auto marked(const char* name, Call&& call) -> decltype(call()) {
    const Watchdog::InBackendCall mark(watchdog_, name);
    return call();
  }

  Backend& inner_;
  Watchdog& watchdog_;
};

}  // namespace llmc
