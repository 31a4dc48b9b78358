// CudaBackend's private state (CudaBackend::Impl) and the helpers shared by the translation units
// that implement it: cuda_backend.cu (construction, the tokens staged for the GPU),
// forward_backward.cu (the forward and backward passes, training, evaluation and sampling),
// cuda_backend_fp8.cu (--fp8 1) and cuda_backend_state.cu (parameters, optimizer state, gradient
// norm, optimizer step, ZeRO collectives). Included by those files only.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "llmc/cuda/backend_buffers.h"
#include "llmc/cuda/common.cuh"
#include "llmc/cuda/cublaslt_handle.cuh"
#include "llmc/cuda/cuda_backend.h"
#include "llmc/cuda/encoder.cuh"
#include "llmc/cuda/fp8.cuh"
#include "llmc/cuda/launch_profiler.cuh"
#include "llmc/cuda/matmul.cuh"
#include "llmc/cuda/memory_fit.h"
#include "llmc/cuda/memory_plan.h"
#include "llmc/cuda/micro_step_graphs.cuh"
#include "llmc/cuda/planned_allocator.h"
#include "llmc/dist/bucket_sync_order.h"
#include "llmc/dist/gradient_buckets.h"
#include "llmc/linear_layers.h"
#if defined(LLMC_NCCL_LIBRARY)
#include "llmc/dist/nccl_communicator.h"
#endif
#if defined(LLMC_CUDNN)
#include "llmc/cuda/cudnn_attention.h"
#endif

namespace llmc {

// Rounds to nearest, as the optimizer writes the bf16 parameters from the master copy.
template <class Dst, class Src>
__global__ void convert_kernel(Dst* out, const Src* in, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = Dst(float(in[i]));
}

template <class Dst, class Src>
void convert(Dst* out, const Src* in, size_t n, cudaStream_t stream) {
  constexpr int block = 256;
  launch<convert_kernel<Dst, Src>>(ceil_div(static_cast<long long>(n), block), block, 0, stream, out, in, n);
}

// n floatX values of device memory, as fp32 on the host (waits for the stream).
inline std::vector<float> floatx_to_host(const floatX* device, size_t n, cudaStream_t stream) {
  std::vector<floatX> values(n);
  CUDA_CHECK(cudaMemcpyAsync(values.data(), device, n * sizeof(floatX), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return std::vector<float>(values.begin(), values.end());  // bf16 to fp32 is exact
}

#if defined(LLMC_NCCL_LIBRARY)
// The NCCL element type of floatX (gradients and parameters).
inline ncclDataType_t nccl_floatx() { return std::is_same_v<floatX, float> ? ncclFloat : ncclBfloat16; }
#endif

// cudaMalloc and cudaFree behind the memory plan's allocator interface.
class CudaDeviceAllocator final : public DeviceAllocator {
 public:
  void* allocate(size_t bytes, const char* name) override {
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
      cudaGetLastError();
      throw std::runtime_error(
          fmt::format("CUDA backend: cannot allocate {} for {}: {}", format_bytes(bytes), name, cudaGetErrorString(err)));
    }
    return p;
  }
  void release(void* pointer) override { cudaFree(pointer); }
};

// The device buffers (parameters, optimizer state, activations, workspaces) are the members of
// BackendBuffers<floatX> (llmc/cuda/backend_buffers.h), allocated from the memory plan.
struct CudaBackend::Impl : BackendBuffers<floatX> {
  GPT2Config cfg;
  CudaBackendOptions opt;
  OptimizerPartition partition;
  std::array<ParamTensor, kNumParamTensors> layout;
  std::array<LinearLayerSpec, kLinearLayers> linears;  // llmc/linear_layers.def for cfg
  Fp8Layout fp8_layout;                                // --fp8 1's scaled tensors and weight copies
  size_t num_params = 0;
  size_t buffer_size = 0;  // params and grads: num_params, or the padded ZeRO-1 chunks
  ElementRange owned;      // the optimizer's state and master cover these elements
  std::vector<TensorSlice> owned_slices;  // the tensors' parts in `owned`, for per-tensor weight decay
  OptimizerSpec optimizer;                // opt.optimizer's
  std::vector<float*> optimizer_state;    // its state tensors: the first optimizer.state_names.size() of m, v
  size_t max_bt = 0;  // max_batch * max_seq_len
  int logits_chunk_rows = 0;  // the logits buffer's rows: a chunk of the max_bt rows
  PeakFlops peak;     // what MFU is counted against (CudaBackend::peak)
  cudaStream_t stream = nullptr;
  MemoryPlanInputs plan_inputs;  // the plan allocated from (cuDNN's workspace as cuDNN asked for it)
  CudaDeviceAllocator device_allocator;
  std::unique_ptr<PlannedAllocator> buffers;  // owns the device buffers; frees them when reset

  // Collectives: NCCL on the device buffers, or fp32 staging through the host (staging_dev), the
  // only way in a build without NCCL (NO_MULTI_GPU=1).
#if defined(LLMC_NCCL_LIBRARY)
  std::unique_ptr<NcclCommunicator> nccl;
  bool over_nccl() const { return nccl != nullptr; }
#else
  bool over_nccl() const { return false; }
#endif
  std::vector<float> staging_host, staging_shard;
  // Overlapped gradient sums (opt.overlap_gradients over NCCL): bucket b's messages run on
  // comm_stream after bucket_event, recorded on `stream` behind its last gradient kernel; one
  // staging buffer serves every bucket because comm_stream runs them in order.
  struct BucketSpans {
    int pack_begin = 0, num_pack = 0, unpack_begin = 0, num_unpack = 0;  // into bucket_span_table
    size_t largest_pack = 0, largest_unpack = 0;                          // longest span counts
  };
  std::vector<BucketTransfer> transfers;
  std::vector<BucketSpans> bucket_spans;
  cudaStream_t comm_stream = nullptr;
  cudaEvent_t bucket_event = nullptr, comm_done = nullptr;
  BucketSyncOrder bucket_order{"CUDA backend"};  // between begin_ and finish_gradient_sync

  // The fp32 scalars (`scalars`): the step's loss, the squared norm; the norm's partials follow the
  // kScalarSlots slots (llmc/cuda/memory_plan.h).
  enum { kLossAccum, kNormSquared };
  float* host_scalar = nullptr;  // pinned

  // Token staging: the host writes a pinned slot, one async copy moves it into tokens_dev (or
  // buckets_dev). Two slots alternate, and a slot is rewritten only after the event recorded behind
  // its previous copy has fired.
  std::array<int*, 2> tokens_host{};
  std::array<int*, 2> buckets_host{};
  std::array<cudaEvent_t, 2> tokens_copied{};
  std::array<cudaEvent_t, 2> buckets_copied{};
  int slot = 0;
  unsigned micro_in_step = 0;  // micro-batches since zero_grad (rounding_seed)

  std::unique_ptr<BlasContext> blas;
#if defined(LLMC_CUDNN)
  std::unique_ptr<CudnnAttention> cudnn;
#endif
  size_t cudnn_workspace_bytes = 0;
  std::unique_ptr<LaunchProfiler> profiler;  // opt.profile's, the active launch timer while it lives
  MicroStepGraphs graphs;                    // LLMC_CUDA_GRAPHS=on

  // --fp8 1 (llmc/cuda/fp8.cuh). The weights' FP8 copies are cast again before the first forward
  // pass after the parameters change. fp8_micro_steps counts the training micro-steps whose amaxes
  // the delayed scales have taken in (the history's clock, kept in the checkpoint); until the first
  // has, the GEMMs stay in floatX (calibration). Only a training micro-step records amaxes
  // (fp8_recording): evaluation, sampling and the tuning pass read the scales and leave them.
  bool fp8_weights_stale = true;
  // LLMC_FP8_WEIGHT_AMAX=adamw: where AdamW records the FP8 weights' amaxes (make_fp8_adamw_sinks,
  // at start-up; empty where it does not), and whether the last optimizer step did, for the next
  // cast_fp8_weights, which then takes no amax pass of its own.
  std::vector<Fp8WeightAmaxSink> fp8_adamw_sinks;
  bool fp8_weight_amax_recorded = false;
  uint64_t fp8_micro_steps = 0;
  bool fp8_recording = false;
  bool tuning = false;  // inside tune_kernels: its FP8 GEMM shapes are timed even before calibration

  Impl(const GPT2Config& config, const CudaBackendOptions& options, const OptimizerPartition& partition);
  ~Impl();

  int L() const { return cfg.num_layers; }
  int C() const { return cfg.channels; }
  size_t H() const { return mlp_width(cfg); }
  int NH() const { return cfg.num_heads; }
  bool cudnn_attention() const { return opt.attention == AttentionKind::kCudnn; }

  floatX* param(int index, int layer = 0) const { return params + layout[index].at(layer); }
  floatX* grad(int index, int layer = 0) const { return grads + layout[index].at(layer); }
  // Slot `l` of a per-layer activation of `width` values per row.
  template <class T>
  T* slot_of(T* base, int l, size_t width) const {
    return base + size_t(l) * max_bt * width;
  }
  floatX* ln1_of(int l) const { return slot_of(ln1, opt.recompute >= 2 ? 0 : l, size_t(C())); }
  floatX* ln2_of(int l) const { return slot_of(ln2, opt.recompute >= 2 ? 0 : l, size_t(C())); }
  // LLMC_FP8_GELU=epilogue under --fp8 1: the forward keeps the GELU in FP8 only, and the backward's
  // GELU kernel writes the bf16 output, a layer at a time.
  bool gelu_by_backward() const { return opt.fp8 && opt.speed.fp8_gelu == Fp8Gelu::kEpilogue; }
  floatX* gelu_of(int l) const {
    return slot_of(fch_gelu, opt.recompute >= 1 || gelu_by_backward() ? 0 : l, H());
  }
  // cuDNN's log-sum-exp rows of layer l: a 16-byte-aligned slice (memory_plan.h).
  float* att_stats_of(int l) const { return att_stats + size_t(l) * att_stats_layer_floats(max_bt, size_t(NH())); }
  // The fallback attention's probabilities of layer l: B*NH*T*T values, at the allocated B and T.
  floatX* att_probs_of(int l) const { return slot_of(att, l, size_t(NH()) * opt.max_seq_len); }

  void stage_tokens(const int* inputs, const int* targets, int B, int T);
  EncoderBuckets stage_buckets(const int* inputs, int BT);
  void ensure_cudnn_workspace(size_t bytes);
  // The gradients, the loss accumulator and the micro-step count back to zero (zero_grad, which also
  // begins a profiled step, and the tuning pass, which is none).
  void clear_gradients();
  // Work outside a training step follows (evaluation, sampling, parameters and state in or out):
  // the profiler, if any, times nothing until the next zero_grad.
  void outside_step() {
    if (profiler) profiler->pause();
  }
  void forward(int B, int T);
  void attention_forward(int l, int B, int T);
  // The classifier, a chunk of rows at a time (forward_backward.cu; a chunk's logits are the LM
  // head's linear_forward): the fused classifier over the logits of rows row0.. of a batch of BT:
  // their losses and, with write_dlogits, their gradient (dloss per position) over the logits; the
  // training pass's classifier: per chunk the logits, their losses (into losses), their gradient and
  // its two GEMMs, d(lnf)'s rows into d_ln and wte's gradient added; then the loss accumulator adds
  // dloss times the sum of the BT losses.
  void classify_chunk(int BT, int row0, int rows, float dloss, bool write_dlogits);
  void classifier_forward_backward(int BT, float dloss);
  // The encoder backward's stochastic rounding seed for a micro-batch of BT tokens: a function of
  // the run's seed, the tokens and their place in the step, never of how many steps this process
  // has run, so that a run resumed from a checkpoint rounds as the unbroken run did.
  uint32_t rounding_seed(const int* inputs, int BT) const;
  // LLMC_CUDA_GRAPHS=on: a micro-step's forward, classifier and backward through the layers as one
  // CUDA graph; the encoder's backward (backward_encoder) follows it outside the graph, since it
  // needs the host's buckets of this micro-step's tokens.
  void graphed_micro_step(int B, int T, float dloss);
  void backward(int B, int T);
  void backward_encoder(int B, int T, const EncoderBuckets& buckets, uint32_t seed);
  void attention_backward(int l, int B, int T);
  float read_scalar(int index);
  // The linear layers (llmc/linear_layers.def). Layer l's row of `linear`: its W and b (null
  // without a bias), and their gradients.
  const LinearLayerSpec& spec(LinearLayer linear) const { return linears[int(linear)]; }
  floatX* weight_of(LinearLayer linear, int l) const { return param(spec(linear).weight, l); }
  floatX* bias_of(LinearLayer linear, int l) const {
    return spec(linear).bias == kNoBias ? nullptr : param(spec(linear).bias, l);
  }
  floatX* weight_grad_of(LinearLayer linear, int l) const { return grad(spec(linear).weight, l); }
  floatX* bias_grad_of(LinearLayer linear, int l) const {
    return spec(linear).bias == kNoBias ? nullptr : grad(spec(linear).bias, l);
  }
  // out = inp W^T + b for rows row0 .. row0 + rows - 1 of inp: in FP8 (from the same rows of inp's
  // FP8 copy, and W's copy) when fp8_gemms() and the layer runs in FP8, else in floatX.
  void linear_forward(LinearLayer linear, int l, floatX* out, const floatX* inp, int rows, int row0 = 0);
  // The layer's backward (dinp, dW and db) with p's activations and choices, and the layer's W, its
  // gradient and its shape filled in; its input gradient from the FP8 copies where linear_forward's
  // GEMM would be FP8.
  void linear_backward(LinearLayer linear, int l, MatmulBackward p);
  // --fp8 1. Whether this pass's FP8 layers run their GEMMs in FP8; where tensor (role, linear,
  // layer l) is cast to (fp8_data: the operand buffer, or lnf's copy for the LM head's input; with
  // its scale; null data without --fp8 or for a layer that does not run in FP8); that operand as the
  // GEMM reads it; the weight's copy (as it is, or transposed); the weights' casts; the end of a
  // training micro-step.
  bool fp8_gemms() const { return opt.fp8 && (fp8_micro_steps > 0 || tuning); }
  bool fp8_gemms(LinearLayer linear) const { return fp8_gemms() && fp8_layout.scales(linear); }
  __nv_fp8_storage_t* fp8_data(Fp8Role role, LinearLayer linear) const;
  Fp8Sink fp8_sink(Fp8Role role, LinearLayer linear, int l) const;
  Fp8Matrix fp8_operand_of(Fp8Role role, LinearLayer linear, int l) const;
  Fp8Matrix fp8_weight(LinearLayer linear, int l, bool transposed) const;
  __nv_fp8_storage_t* fp8_weight_copy(LinearLayer linear, int l, bool transposed) const;
  void cast_fp8_weights();
  // Where the multi-tensor AdamW records each owned slice's FP8 weight amaxes (Fp8WeightAmaxSink,
  // one per owned_slices entry); empty where it does not (LLMC_FP8_WEIGHT_AMAX=cast, no --fp8 1,
  // or a rank that owns a part of the parameters only).
  std::vector<Fp8WeightAmaxSink> make_fp8_adamw_sinks() const;
  // Forgets an amax AdamW recorded for weights that changed since (set_parameters).
  void drop_fp8_weight_amax();
  void end_fp8_micro_step();
  void setup_bucket_sync();
  bool overlapping() const { return bucket_order.active() && comm_stream != nullptr; }
#if defined(LLMC_NCCL_LIBRARY)
  // The backward pass has finished bucket `bucket`'s gradients (kernels queued on `stream`).
  void start_bucket(int bucket);
#endif
  // Host fp32 copies of device floatX ranges (through staging_dev), for the MPI path; throws
  // std::logic_error when the plan has no staging buffer (options.world_size/nccl_host are wrong).
  void ensure_staging();
  void download(std::vector<float>& host, const floatX* device, size_t n);
  void upload(floatX* device, const float* host, size_t n);
};

}  // namespace llmc
