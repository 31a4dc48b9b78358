// The CUDA backend: GPT-2 forward and backward on one GPU with the kernels of llmc/*.cuh, driven by
// the shared training loop (llmc/train_loop.h) through the Backend interface.
//
// Precision (fixed at compile time, see llmc/cuda_common.cuh): the default build keeps parameters,
// gradients and activations in bf16, with fp32 master weights, AdamW moments, losses and norms,
// and writes the bf16 parameters from the master copy with stochastic rounding; PRECISION=FP32
// (-DENABLE_FP32) keeps everything in fp32. Design and memory layout: docs/cuda-trainer.md.
//
// This header is plain C++ (no CUDA types), so host-only translation units can include it; the
// kernels stay in llmc/cuda_backend.cu, the only file that includes the kernel headers.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "llmc/backend.h"

namespace llmc {

enum class AttentionKind {
  kCudnn,     // cuDNN flash attention (bf16 builds only)
  kFallback,  // llmc/attention.cuh: explicit T x T scores, exact; the only kind in the FP32 build
};

struct CudaBackendOptions {
  int max_batch = 4;     // the largest B of any call (activations are allocated once for it)
  int max_seq_len = 64;  // the largest T of any call, at most the model's max_seq_len
  // 0: keep every activation; 1: keep only the pre-GELU of each layer's fc and recompute the GELU
  // in the backward pass; 2: also recompute the two LayerNorm outputs of each layer.
  int recompute = 1;
  AttentionKind attention = AttentionKind::kCudnn;
  unsigned seed = 1337;  // stochastic rounding streams
};

// "fp32" or "bf16": the precision this binary was built with.
const char* cuda_precision_name();
// The attention a build uses by default: cuDNN in bf16, the fallback in fp32. The environment
// variable LLMC_ATTENTION=fallback|cudnn overrides it (cudnn is refused in the FP32 build).
AttentionKind default_attention_kind();
const char* attention_kind_name(AttentionKind kind);
// Number of CUDA devices, 0 when there is none or no working driver (never throws).
int cuda_device_count();
// One line naming the current device, its compute capability and memory.
std::string cuda_device_description();

class CudaBackend : public Backend {
 public:
  // Allocates everything on the current device; throws std::runtime_error (naming the shape and
  // the bytes asked for) when the model or batch does not fit or the shape is unsupported.
  CudaBackend(const GPT2Config& config, const CudaBackendOptions& options);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  const GPT2Config& config() const override;
  void set_parameters(const float* params) override;
  void get_parameters(float* params) override;
  void set_optimizer_state(const float* m, const float* v) override;
  void get_optimizer_state(float* m, float* v) override;
  void zero_grad() override;
  void forward_backward(const int* inputs, const int* targets, int B, int T, float loss_scale) override;
  float accumulated_loss() override;
  float forward_loss(const int* inputs, const int* targets, int B, int T) override;
  void next_token_logits(const int* tokens, int T, float* logits) override;
  float grad_sum_of_squares() override;
  void adamw_update(const AdamWHyper& hyper, float lr, int t, float grad_scale) override;

  // For the parity tests: the B*T x padded_vocab_size logits of a forward pass, and the current
  // gradients in parameter layout, both converted to fp32.
  std::vector<float> forward_logits(const int* inputs, int B, int T);
  void get_gradients(float* grads);
  // Device bytes this backend allocated itself (parameters, state, activations, workspaces).
  size_t device_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmc
