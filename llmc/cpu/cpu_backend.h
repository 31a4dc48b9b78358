// The CPU backend: fp32 parameters, gradients and optimizer state, the layers of llmc/cpu/*.h, OpenMP.
// It is the numerical oracle the CUDA kernels are checked against, so every reduction has an order
// fixed by the code: results are identical run to run and for any number of threads.
#pragma once
#include <array>
#include <vector>

#include "llmc/backend.h"
#include "llmc/dist/host_bucket_sync.h"

namespace llmc {

class CpuBackend : public Backend {
 public:
  // One rank, or stage 0: optimizer state for every parameter.
  explicit CpuBackend(const GPT2Config& config, const OptimizerSpec& optimizer = default_optimizer());
  // partition.num_elements() must be the model's parameter count: gradients and parameters are
  // host buffers of partition.buffer_size() floats (the padding stays zero), the optimizer's state
  // tensors cover owned(). `optimizer` is a registered one (llmc/optim/registry.h).
  CpuBackend(const GPT2Config& config, const OptimizerPartition& partition,
             const OptimizerSpec& optimizer = default_optimizer());

  using Backend::grad_sum_of_squares;
  const GPT2Config& config() const override { return config_; }
  const OptimizerPartition& partition() const override { return partition_; }
  void set_parameters(const float* params) override;
  void get_parameters(float* params) override;
  std::vector<OptimizerTensor> get_optimizer_state() override { return state_; }
  void set_optimizer_state(const std::vector<OptimizerTensor>& state) override;
  size_t optimizer_state_bytes() const override;
  void zero_grad() override;
  void forward_backward(const int* inputs, const int* targets, int B, int T, float loss_scale) override;
  float accumulated_loss() override;
  void forward_losses(const int* inputs, const int* targets, int B, int T, float* losses) override;
  void next_token_logits(const int* tokens, int T, float* logits) override;
  float grad_sum_of_squares(ElementRange range) override;
  void set_gradient_element(size_t index, float value) override;
  void optimizer_step(const OptimizerStep& step) override;
  void all_reduce_gradients(Communicator& host) override;
  void reduce_scatter_gradients(Communicator& host) override;
  void all_gather_parameters(Communicator& host) override;
  void begin_gradient_sync(Communicator& host) override;
  void finish_gradient_sync() override;
  // fp32 throughout: no scaling state to keep, and one from an FP8 run is ignored.
  std::vector<uint8_t> scaling_state() override { return {}; }
  void set_scaling_state(const std::vector<uint8_t>&) override {}

  // For the parity tests: the B*T x padded_vocab_size logits of a forward pass (valid until the
  // next call), and the gradient buffer in parameter layout.
  const float* forward_logits(const int* inputs, int B, int T);
  const float* gradients() const { return grads_.data(); }

 private:
  // Activations of the forward pass that the backward pass reads, per layer where needed.
  struct Activations {
    std::vector<float> residual;  // (L+1) x BT x C: the encoder output, then each layer's output
    std::vector<float> ln1, ln1_mean, ln1_rstd, qkv, atty, att, res2, ln2, ln2_mean, ln2_rstd, fch, fch_gelu;
    std::vector<float> lnf, lnf_mean, lnf_rstd, logits, losses, branch;
    std::vector<float> dresidual, dbuf_a, dbuf_b;  // gradients of the activations, reused per layer
  };

  void ensure_activations(int B, int T);
  void forward(const int* inputs, int B, int T);
  void backward(const int* inputs, int B, int T);
  float* param(int index, int layer = 0) { return params_.data() + layout_[index].at(layer); }
  float* grad(int index, int layer = 0) { return grads_.data() + layout_[index].at(layer); }

  GPT2Config config_;
  OptimizerPartition partition_;
  std::array<ParamTensor, kNumParamTensors> layout_;
  OptimizerSpec optimizer_;
  std::vector<TensorSlice> owned_slices_;  // the tensors' parts in partition_.owned(), for the optimizer
  std::vector<float> params_, grads_;  // partition_.buffer_size() floats
  std::vector<OptimizerTensor> state_;  // the optimizer's, over partition_.owned()
  std::vector<float*> state_pointers_;  // optimizer_step's: each of state_'s tensors' element 0
  std::vector<float> shard_;           // one chunk, for the collectives (MPI wants distinct buffers)
  std::vector<double> partial_sums_;   // grad_sum_of_squares's per-chunk sums
  HostBucketSync bucket_sync_;         // --overlap: buckets sent during the backward pass
  double loss_accumulator_ = 0.0;
  Activations acts_;
  size_t capacity_bt_ = 0, capacity_att_ = 0;
};

}  // namespace llmc
