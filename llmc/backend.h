// The interface between the shared training loop (llmc/train/trainer.h) and a compute backend: the
// CPU oracle (llmc/cpu/cpu_backend.h) or the CUDA trainer. Everything that is not a kernel lives in
// the loop; a backend owns parameters, gradients, the optimizer's state (llmc/optim/optimizer.h) and
// activations.
//
// Several ranks (docs/multi-gpu.md): each rank has its own backend, built for an
// OptimizerPartition (llmc/dist/zero_sharding.h). The loop writes ZeRO stages 0 and 1 once against the
// collective operations below:
//   stage 0: all_reduce_gradients, grad_sum_of_squares(whole buffer), optimizer_step (everything)
//   stage 1: reduce_scatter_gradients, grad_sum_of_squares(owned) summed over the ranks,
//            optimizer_step (owned range only), all_gather_parameters
// With --overlap 1 the gradient sum of either stage is begin/finish_gradient_sync instead.
// The collectives take the ranks' host communicator (ProcessGroup's); a backend whose buffers live
// elsewhere may use its own device communicator instead (CUDA: NCCL) or stage through host memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "llmc/dist/communicator.h"
#include "llmc/dist/zero_sharding.h"
#include "llmc/gpt2.h"
#include "llmc/optim/optimizer.h"

namespace llmc {

// -r auto: the least recompute whose memory plan fits the GPU (the CUDA backend decides it, once it
// knows the GPU's free memory, each rank for its own GPU: recompute never changes what is computed).
constexpr int kRecomputeAuto = -1;

// Part of the contract: every backend accepts an OptimizerPartition whose ZeRO-1 chunks start on
// multiples of this many elements, and the loop only builds such partitions. 32 elements are 128
// bytes of fp32 and 64 of bf16: a cache line, and a whole number of the 16-byte vectors the CUDA
// kernels (norm, optimizer updates, conversions) read, so no backend needs a scalar path for a chunk's start.
constexpr size_t kPartitionAlignment = 32;

// The partition the loop builds for -z `zero_stage` (0 or 1): rank `rank`'s ZeRO-1 chunk of
// `num_elements` over `world_size` ranks, or everything for stage 0.
OptimizerPartition optimizer_partition(size_t num_elements, int zero_stage, int world_size, int rank);

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const GPT2Config& config() const = 0;
  // Which elements this rank keeps optimizer state for (fixed at construction).
  virtual const OptimizerPartition& partition() const = 0;
  // The dense peak FLOP/s of this rank's device that the loop reports model FLOPs utilisation
  // against (llmc/mfu.h); 0 when there is none (the CPU, a GPU not in the table), and then
  // the loop shows no MFU rather than a wrong one.
  virtual double peak_flops() const { return 0.0; }

  // Parameters as a flat fp32 buffer in checkpoint order (num_parameters(config()) floats).
  // get_parameters is exact (the fp32 master values) on partition().owned(); elsewhere a backend
  // that trains in lower precision returns its working copy (the CPU backend is exact everywhere).
  virtual void set_parameters(const float* params) = 0;
  virtual void get_parameters(float* params) = 0;

  // The optimizer's state on partition().owned(): one tensor per state name of the optimizer the
  // backend was built for (AdamW: m, v), in that order, owned().size() values each. set throws
  // std::invalid_argument for other names, order or sizes (check_optimizer_state).
  virtual std::vector<OptimizerTensor> get_optimizer_state() = 0;
  virtual void set_optimizer_state(const std::vector<OptimizerTensor>& state) = 0;
  // Bytes this rank holds for the optimizer: its state tensors and, where there is one, the fp32
  // master copy.
  virtual size_t optimizer_state_bytes() const = 0;

  // Starts a step: zeroes the gradients and the loss accumulator.
  virtual void zero_grad() = 0;

  // Forward and backward of one micro-batch of B rows of T tokens (inputs/targets are B*T ids,
  // row-major). Adds the gradient of (loss_scale * mean cross-entropy of this micro-batch) to the
  // gradients, and loss_scale * that mean to the loss accumulator. With accumulation over `n`
  // micro-batches on each of W ranks the loop passes loss_scale = 1/(n*W), so the sum over the
  // ranks of the step's gradients is the gradient of the mean over all of the step's tokens.
  virtual void forward_backward(const int* inputs, const int* targets, int B, int T, float loss_scale) = 0;

  // The loss accumulated since zero_grad() (the one value of a step that must reach the host).
  virtual float accumulated_loss() = 0;

  // Cross-entropy at every position of a batch (B*T floats, row-major like the targets), without
  // touching the gradients: HellaSwag scores each completion by its own positions' losses.
  virtual void forward_losses(const int* inputs, const int* targets, int B, int T, float* losses) = 0;

  // Mean cross-entropy of a batch without touching the gradients (validation): the mean of
  // forward_losses, reduced here the same way for every backend (mean_in_order).
  float forward_loss(const int* inputs, const int* targets, int B, int T);

  // Logits over the real vocabulary (config().vocab_size floats) that predict the token after
  // tokens[T-1], for one sequence of T tokens (sampling).
  virtual void next_token_logits(const int* tokens, int T, float* logits) = 0;

  // Sum of squares of the gradient entries in `range` of the flat buffer (the loop takes the
  // square root of the whole buffer's, or of the ranks' owned ranges summed over the ranks).
  virtual float grad_sum_of_squares(ElementRange range) = 0;
  float grad_sum_of_squares() { return grad_sum_of_squares(ElementRange{0, num_parameters(config())}); }

  // Sets element `index` of the flat gradient buffer to `value` where the gradients live (on the
  // device for the CUDA backend), as a kernel that overflowed would have: the test seam
  // LLMC_TEST_POISON_GRADIENT (llmc/test_hooks.h) calls it. Throws std::out_of_range past the
  // parameters.
  virtual void set_gradient_element(size_t index, float value) = 0;

  // One step of the backend's optimizer on the elements of partition().owned(): gradients are
  // first multiplied by step.grad_scale (global norm clipping), then its state and the parameters
  // are updated (AdamW: docs/contract.md), with step.weight_decay on the tensors that decay.
  // Throws std::invalid_argument for step.t < 1.
  virtual void optimizer_step(const OptimizerStep& step) = 0;

  // ZeRO stage 0: every rank's gradients become the sum over the ranks.
  virtual void all_reduce_gradients(Communicator& host) = 0;
  // ZeRO stage 1 (a sharded partition of host.world_size() ranks): the gradients of this rank's
  // owned range become the sum over the ranks; the rest of the gradient buffer is left undefined.
  virtual void reduce_scatter_gradients(Communicator& host) = 0;
  // ZeRO stage 1, after optimizer_step: every rank receives the parameters the others updated.
  virtual void all_gather_parameters(Communicator& host) = 0;

  // The same sums overlapped with the backward pass (--overlap 1; llmc/dist/gradient_buckets.h):
  // begin_gradient_sync before a step's last forward_backward, whose backward pass then starts
  // each bucket's collectives (an all-reduce, or for a sharded partition a reduce to each owner of
  // the bucket's parts) as soon as the bucket's gradients are final; finish_gradient_sync waits for
  // them all. Afterwards the gradients are what all_reduce_gradients (unsharded) or
  // reduce_scatter_gradients (sharded) leave. A backend that cannot overlap runs the blocking call
  // in finish; a communicator without non-blocking sums runs each bucket's sum when it is started
  // (Communicator::start_*).
  virtual void begin_gradient_sync(Communicator& host) = 0;
  virtual void finish_gradient_sync() = 0;

  // Kernels chosen by timing (the CUDA backend's LLMC_GEMM_SEARCH=timed). The loop asks once,
  // before the first step, whether the backend tunes; if so rank 0 runs tune_kernels on a batch
  // (one forward and backward pass whose candidates run on the real buffers; the gradients and the
  // loss accumulator are zeroed afterwards, nothing else the step computes is kept), and every rank
  // then runs set_kernel_choices with rank 0's kernel_choices, or with a checkpoint's, which a
  // resumed run loads instead of tuning, so that it runs the same kernels. The choices are opaque
  // bytes to the loop; kernel_choices is empty when nothing was chosen. set_kernel_choices returns
  // what it loaded in words (for the loop's line) and throws std::runtime_error for bytes it cannot
  // use. A backend that does not tune keeps these defaults.
  virtual bool tunes_kernels() const { return false; }
  virtual void tune_kernels(const int* inputs, const int* targets, int B, int T);
  virtual std::vector<uint8_t> kernel_choices() { return {}; }
  virtual std::string set_kernel_choices(const std::vector<uint8_t>& choices);

  // State that the numbers of the next steps depend on beyond the parameters and the optimizer's:
  // the CUDA backend's FP8 scales and amax history (--fp8 1). Opaque bytes to the loop, this rank's
  // own, which each rank's checkpoint state file keeps and a resumed run sets before its first step,
  // so that it computes what the unbroken run did. Empty: none. A backend that keeps none ignores
  // what it is given (a run resumed without --fp8 1 has nothing to scale), one that does starts
  // afresh from an empty state; set_scaling_state throws std::runtime_error for bytes it cannot use
  // (another model's). No default: a backend that wraps another (WatchedBackend) must forward them,
  // or a checkpoint would silently lose the state.
  virtual std::vector<uint8_t> scaling_state() = 0;
  virtual void set_scaling_state(const std::vector<uint8_t>& state) = 0;

 private:
  std::vector<float> losses_;  // forward_loss's per-position losses
};

// The mean of values[0..n) summed in index order in double: the same bits for any backend and
// thread count.
double mean_in_order(const float* values, size_t n);

}  // namespace llmc
