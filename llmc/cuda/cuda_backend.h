// The CUDA backend: GPT-2 forward and backward on one GPU with the kernels of llmc/cuda/*.cuh, driven by
// the shared training loop (llmc/train/trainer.h) through the Backend interface.
//
// Precision (fixed at compile time, see llmc/cuda/common.cuh): the default build keeps parameters,
// gradients and activations in bf16, with fp32 master weights, optimizer state, losses and norms,
// and writes the bf16 parameters from the master copy rounded to nearest; PRECISION=FP32
// (-DENABLE_FP32) keeps everything in fp32. Design and memory layout: docs/cuda-trainer.md.
//
// This header is plain C++ (no CUDA types), so host-only translation units can include it; the
// kernels stay in llmc/cuda/cuda_backend.cu, the only file that includes the kernel headers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "llmc/backend.h"
#include "llmc/cuda/memory_plan.h"
#include "llmc/cuda/speed_switches.h"
#include "llmc/mfu.h"

namespace llmc {

struct CudaBackendOptions {
  int max_batch = 4;     // the largest B of any call (activations are allocated once for it)
  int max_seq_len = 64;  // the largest T of any call, at most the model's max_seq_len
  // 0: keep every activation; 1: keep only the pre-GELU of each layer's fc and recompute the GELU
  // in the backward pass; 2: also recompute the two LayerNorm outputs of each layer. kRecomputeAuto
  // (-r auto): the least, up to max_recompute(speed), whose memory plan fits (recompute() says which).
  int recompute = 1;
  AttentionKind attention = AttentionKind::kCudnn;
  // With kCudnn: when cuDNN rejects the attention graph at start-up (no engine for this GPU, shape
  // or library), use the plain attention kernels, saying so on one line of stderr, instead of
  // throwing. train_gpt2cu allows it unless LLMC_ATTENTION=cudnn forces cuDNN.
  bool attention_fallback = false;
  SpeedSwitches speed;  // llmc/cuda/speed_switches.def; train_gpt2cu reads them from the environment
  // The classifier's rows per chunk; test_gpt2cu lowers it so that its small batches span
  // several chunks.
  int classifier_chunk_rows = kClassifierChunkRows;
  // LLMC_PROFILE=on (llmc/cuda/launch_profile.h): time every launch, GEMM and cuDNN call of the
  // training steps with CUDA events and print the `profile:` table when the backend is destroyed.
  // train_gpt2cu sets it on rank 0 only. At most one such backend at a time.
  bool profile = false;
  // --fp8 1 (llmc/cuda/fp8.cuh, docs/cuda-trainer.md "FP8 matmuls"): the layers' four linear layers
  // run their forward and input-gradient GEMMs on FP8 copies (E4M3 activations and weights, E5M2
  // gradients) with per-tensor scales; the bf16 build on a GPU of compute capability 8.9 or more.
  bool fp8 = false;
  unsigned seed = 1337;  // the encoder backward's stochastic rounding
  int device = -1;       // the GPU to select before allocating anything; -1 = the current one
  // A registered optimizer (llmc/optim/registry.h) with at most two state tensors: the memory
  // plan's two fp32 state buffers of the owned range (kAdamM, kAdamV) hold them.
  OptimizerSpec optimizer = default_optimizer();
  // Several ranks, one GPU each: with nccl_host set, the gradient and parameter collectives run
  // over NCCL on the device buffers (NcclCommunicator on GPU `device`, its unique id sent over
  // nccl_host, which must outlive the backend). Without it they stage through host fp32 buffers
  // and the communicator the loop passes (MPI), which also works for ranks sharing one GPU.
  Communicator* nccl_host = nullptr;
  // --overlap over NCCL: a second stream and a staging buffer of the largest gradient bucket
  // (llmc/dist/gradient_buckets.h) so that begin/finish_gradient_sync overlap the backward pass.
  // Without NCCL the sums wait for the backward pass (host staging must wait for the GPU anyway).
  bool overlap_gradients = false;
  // The run's ranks: without nccl_host, several ranks (or ZeRO-1 on one) send the collectives
  // through a device fp32 staging buffer, planned and allocated up front; also the -z 1 advice.
  int world_size = 1;
  // Before allocating, the memory plan (llmc/cuda/memory_plan.h) must fit the GPU's free memory and,
  // when this is not 0, this many bytes per GPU (--device-memory), each less its reserve
  // (llmc/cuda/memory_fit.h); otherwise the constructor throws with the figures and advice.
  size_t device_memory = 0;
};

// "fp32" or "bf16": the precision this binary was built with.
const char* cuda_precision_name();
// The attention a build uses by default: cuDNN in bf16, the fallback in fp32. The environment
// variable LLMC_ATTENTION=fallback|cudnn overrides it (cudnn is refused in the FP32 build).
AttentionKind default_attention_kind();
// Whether LLMC_ATTENTION chose the attention (then a cuDNN that rejects the graph is an error).
bool attention_kind_forced();
// The build's precision as the memory plan names it.
Precision cuda_precision();
// Number of CUDA devices, 0 when there is none or no working driver (never throws).
int cuda_device_count();
// One line naming the current device, its compute capability and memory.
std::string cuda_device_description();
// The current device's compute capability as major * 10 + minor (90 for an H100).
int cuda_compute_capability();
// Throws std::runtime_error naming the current GPU's compute capability and the architectures this
// binary holds code for (CUDA_ARCHS) when the driver can run none of them on it (no SASS for it, no
// PTX it can compile, or PTX newer than the driver); the backend calls it before anything else.
void check_kernel_image();
// Whether this build has NCCL (not with NO_MULTI_GPU=1: several ranks then sum through host memory).
bool cuda_build_has_nccl();
// The least compute capability with FP8 tensor cores (Ada, sm_89), which --fp8 1 needs.
constexpr int kFp8ComputeCapability = 89;
// What MFU is counted against on the current device, for this build's precision:
// LLMC_PEAK_TFLOPS=<dense TFLOP/s> when set, else the table of llmc/mfu.h for its name
// (cudaDeviceProp::name). Throws std::runtime_error naming LLMC_PEAK_TFLOPS for a bad value.
PeakFlops cuda_device_peak();
// The versions of the CUDA driver and runtime, cuBLASLt, cuDNN and NCCL this process loaded, e.g.
// "driver 13.0, runtime 13.0, cuBLASLt 13.1.0, cuDNN 9.19.0, NCCL 2.28.7" (never throws).
std::string cuda_library_versions();
// The GPU a rank drives: its local rank modulo the visible devices (one visible device: that one,
// e.g. when the launcher pins each rank to its GPU). Throws std::runtime_error without a device.
int cuda_device_for_local_rank(int local_rank);
// The device's UUID as 32 hex digits: ranks that print the same UUID share one GPU.
std::string cuda_device_uuid(int device);
// The current device's free memory (cudaMemGetInfo, which creates the CUDA context), or nothing
// without a device or a working driver (never throws).
std::optional<size_t> cuda_free_memory();
// Whether this binary runs on the emulated GPU (emulator/README.md): every kernel on the CPU.
bool cuda_device_emulated();
// The sizes of the device allocations alive now, in the order they were made. Only the emulated GPU
// keeps that account; on a GPU, nullopt.
std::optional<std::vector<size_t>> cuda_live_allocation_sizes();

class CudaBackend : public Backend {
 public:
  // Plans the device memory, checks that the plan fits (options.device_memory), then allocates
  // exactly the plan's buffers on the device; throws std::runtime_error (the figures, the largest -b
  // that fits, what -r 2 and -z 1 would save) when it does not fit, or the shape is unsupported.
  CudaBackend(const GPT2Config& config, const CudaBackendOptions& options);
  // For one rank of several: gradients and parameters padded to partition.buffer_size(), the
  // optimizer's state and (bf16) the fp32 master weights only for partition.owned().
  CudaBackend(const GPT2Config& config, const CudaBackendOptions& options, const OptimizerPartition& partition);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  using Backend::grad_sum_of_squares;
  const GPT2Config& config() const override;
  const OptimizerPartition& partition() const override;
  void set_parameters(const float* params) override;
  void get_parameters(float* params) override;
  std::vector<OptimizerTensor> get_optimizer_state() override;
  void set_optimizer_state(const std::vector<OptimizerTensor>& state) override;
  size_t optimizer_state_bytes() const override;
  void zero_grad() override;
  void forward_backward(const int* inputs, const int* targets, int B, int T, float loss_scale) override;
  float accumulated_loss() override;
  void forward_losses(const int* inputs, const int* targets, int B, int T, float* losses) override;
  void next_token_logits(const int* tokens, int T, float* logits) override;
  // range.begin must be a multiple of 8 (the norm kernel reads 16-byte vectors); the loop's ranges
  // (0, or a ZeRO chunk start) are.
  float grad_sum_of_squares(ElementRange range) override;
  void set_gradient_element(size_t index, float value) override;
  void optimizer_step(const OptimizerStep& step) override;
  void all_reduce_gradients(Communicator& host) override;
  void reduce_scatter_gradients(Communicator& host) override;
  void all_gather_parameters(Communicator& host) override;
  void begin_gradient_sync(Communicator& host) override;
  void finish_gradient_sync() override;
  // LLMC_GEMM_SEARCH=timed: the table of cuBLASLt algorithms (llmc/cuda/gemm_table.h).
  bool tunes_kernels() const override;
  void tune_kernels(const int* inputs, const int* targets, int B, int T) override;
  std::vector<uint8_t> kernel_choices() override;
  std::string set_kernel_choices(const std::vector<uint8_t>& choices) override;
  // --fp8 1: the FP8 scaling state (llmc/cuda/fp8.cuh) and how many micro-steps it has seen.
  std::vector<uint8_t> scaling_state() override;
  void set_scaling_state(const std::vector<uint8_t>& state) override;

  // For the parity tests: the B*T x padded_vocab_size logits of a forward pass, and the current
  // gradients in parameter layout, both converted to fp32.
  std::vector<float> forward_logits(const int* inputs, int B, int T);
  void get_gradients(float* grads);
  // Device bytes this backend allocated itself (parameters, state, activations, workspaces): the
  // sum of its memory plan's buffers, cuDNN's workspace at the size cuDNN asked for.
  size_t device_bytes() const;
  // The plan it allocated from, and its total with cuDNN's workspace estimated instead (what
  // `train_gpt2cu --dry-run` prints).
  const MemoryPlan& memory_plan() const;
  size_t planned_bytes() const;
  // The attention it runs: options.attention, or the fallback after cuDNN rejected the graph.
  AttentionKind attention() const;
  // The recompute the backend runs: options.recompute, or what -r auto chose.
  int recompute() const;
  // What MFU is counted against on its device: cuda_device_peak(), taken at construction (which
  // throws for a bad LLMC_PEAK_TFLOPS).
  const PeakFlops& peak() const;
  double peak_flops() const override;
  // LLMC_CUDA_GRAPHS=on: how many micro-steps ran as a CUDA graph launch.
  uint64_t graph_launches() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmc
