// CudaBackend: GPT-2 training on one GPU: construction (the checks, the memory plan, the buffers),
// the host's side of a micro-step (the tokens and their buckets staged for the GPU) and the small
// accessors. The forward and backward passes themselves are in llmc/cuda/forward_backward.cu.
//
// Nothing here waits for the GPU except the calls whose value the loop needs on the host
// (accumulated_loss), and waits on a pinned staging buffer that the GPU finished copying two
// micro-batches ago.
#include "llmc/cuda/cuda_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "llmc/cuda/cuda_backend_impl.cuh"
#include "llmc/cuda/encoder.cuh"
#include "llmc/cuda/memory_fit.h"
#include "llmc/cuda/memory_plan.h"

namespace llmc {

CudaBackend::Impl::Impl(const GPT2Config& config, const CudaBackendOptions& options,
                        const OptimizerPartition& partition_)
    : cfg(config), opt(options), partition(partition_), linears(linear_layers(config)),
      fp8_layout(config, fp8_linears(config, options.speed.fp8_lm_head == Fp8LmHead::kOn)) {
  const int C = cfg.channels, NH = cfg.num_heads;
  plan_inputs.config = cfg;
  plan_inputs.batch = opt.max_batch;
  plan_inputs.seq_len = opt.max_seq_len;
  if (opt.fp8 && opt.speed.gelu == GeluPath::kEpilogues)
    throw std::runtime_error("CUDA backend: --fp8 1 runs the GELU as a kernel, which also writes its output's FP8 copy "
                             "for the next GEMM; LLMC_GELU=epilogues is for the bf16 GEMMs (unset it with --fp8 1)");
  // -r auto is planned at the most recompute the switches allow until the budget is known (below).
  const bool auto_recompute = opt.recompute == kRecomputeAuto;
  if (auto_recompute) opt.recompute = max_recompute(opt.speed);
  plan_inputs.recompute = opt.recompute;
  plan_inputs.precision = cuda_precision();
  plan_inputs.attention = opt.attention;
  take_speed_switches(plan_inputs, opt.speed);
  plan_inputs.partition = partition;
  plan_inputs.fp8 = opt.fp8;
  plan_inputs.classifier_chunk_rows = opt.classifier_chunk_rows;
  check_plan_inputs(plan_inputs);  // B, T, recompute, cuDNN attention and FP8 only in bf16
  if (opt.recompute > max_recompute(opt.speed))
    throw std::runtime_error(fmt::format("CUDA backend: LLMC_GELU=epilogues needs -r 0: recompute {} would rebuild "
                                         "the GELU output from the stored bf16 pre-activation, not as the epilogue "
                                         "computed it",
                                         opt.recompute));
#if !defined(LLMC_CUDNN)
  if (opt.attention == AttentionKind::kCudnn)
    throw std::runtime_error(fmt::format("CUDA backend: this build has no cuDNN attention ({}): use "
                                         "LLMC_ATTENTION=fallback",
                                         kNoCudnnReason));
#endif
#if !defined(LLMC_NCCL_LIBRARY)
  if (opt.nccl_host != nullptr)
    throw std::runtime_error(fmt::format("CUDA backend: this build has no NCCL ({}): leave nccl_host unset, and "
                                         "several ranks sum through host memory",
                                         kNoNcclReason));
#endif
  if (C % 8 != 0 || NH <= 0 || C % NH != 0 || (C / NH) % 8 != 0)
    throw std::runtime_error(fmt::format(
        "CUDA backend: channels {} and heads {} must give a multiple of 8 for both C and the head size", C, NH));
  if (cfg.padded_vocab_size % 8 != 0)
    throw std::runtime_error(fmt::format("CUDA backend: padded vocabulary {} is not a multiple of 8",
                                         cfg.padded_vocab_size));
  optimizer = find_optimizer(opt.optimizer.name);
  if (optimizer.state_names.size() > 2)
    throw std::runtime_error(fmt::format("CUDA backend: optimizer {} keeps {} state tensors; the memory plan has two",
                                         optimizer.name, optimizer.state_names.size()));
  if (opt.fp8 && C % 16 != 0)
    throw std::runtime_error(fmt::format("CUDA backend: --fp8 1 needs channels C a multiple of 16 (cuBLASLt's FP8 "
                                         "GEMMs take leading dimensions of 16 elements), got C = {}",
                                         C));
  if (opt.fp8 && fp8_layout.scales(LinearLayer::kLmHead) && cfg.padded_vocab_size % 16 != 0)
    throw std::runtime_error(fmt::format("CUDA backend: LLMC_FP8_LM_HEAD=on needs the padded vocabulary a multiple "
                                         "of 16 (cuBLASLt's FP8 GEMMs), got {}",
                                         cfg.padded_vocab_size));
  if (cuda_device_count() == 0) throw std::runtime_error("CUDA backend: no CUDA device");
  if (opt.device >= 0) CUDA_CHECK(cudaSetDevice(opt.device));
  check_kernel_image();
  if (opt.fp8 && cuda_compute_capability() < kFp8ComputeCapability)
    throw std::runtime_error(fmt::format("CUDA backend: --fp8 1 needs FP8 tensor cores (compute capability 8.9 or "
                                         "more: Ada, Hopper, Blackwell); {} has none: leave --fp8 at 0",
                                         cuda_device_description()));
  peak = cuda_device_peak();

  layout = param_layout(cfg);
  num_params = num_parameters(cfg);
  if (partition.num_elements() != num_params)
    throw std::runtime_error(fmt::format("CUDA backend: optimizer partition of {} elements for a model of {}",
                                         partition.num_elements(), num_params));
  buffer_size = partition.buffer_size();
  owned = partition.owned();
  owned_slices = tensor_slices(layout, owned);
  max_bt = size_t(opt.max_batch) * opt.max_seq_len;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
#if defined(LLMC_NCCL_LIBRARY)
  if (opt.nccl_host != nullptr) nccl = std::make_unique<NcclCommunicator>(*opt.nccl_host, stream);
#endif

  // all_reduce_gradients stages with several ranks, the ZeRO-1 collectives with any number.
  plan_inputs.host_staging = !over_nccl() && (opt.world_size > 1 || partition.sharded);
  plan_inputs.overlap_buckets = over_nccl() && opt.overlap_gradients;
#if defined(LLMC_CUDNN)
  if (cudnn_attention()) {
    // cuDNN's workspace is known only once its plans exist: for the training shape and for sampling
    // (B=1 at the longest T), built now, so that the plan holds the real size. A graph cuDNN rejects
    // here is rejected before anything is allocated, so the plain attention can take over.
    try {
      cudnn = std::make_unique<CudnnAttention>(opt.speed.cudnn_backward);
      const int HS = C / NH;
      size_t bytes = cudnn->forward_workspace_bytes(opt.max_batch, opt.max_seq_len, NH, HS);
      bytes = std::max(bytes, cudnn->backward_workspace_bytes(opt.max_batch, opt.max_seq_len, NH, HS));
      bytes = std::max(bytes, cudnn->forward_workspace_bytes(1, opt.max_seq_len, NH, HS));
      plan_inputs.cudnn_workspace_bytes = bytes;
    } catch (const std::runtime_error& e) {
      if (!opt.attention_fallback) throw;
      fmt::print(stderr, "attention: cuDNN rejected the attention graph at start-up ({}); using the plain attention "
                         "kernels (LLMC_ATTENTION=cudnn makes this an error)\n", e.what());
      cudnn.reset();
      opt.attention = plan_inputs.attention = AttentionKind::kFallback;
    }
  }
#endif
  // The free memory now (the context, NCCL and cuDNN's handle exist), and --device-memory's card.
  const std::optional<size_t> free_bytes = cuda_free_memory();
  if (!free_bytes) throw std::runtime_error("CUDA backend: cannot query the device's free memory");
  MemoryBudget budget = budget_from_free_memory(*free_bytes, false);
  if (opt.device_memory > 0) budget = tighter(budget, budget_from_device_memory(opt.device_memory, over_nccl()));
  if (auto_recompute) opt.recompute = plan_inputs.recompute = least_recompute_that_fits(plan_inputs, budget, opt.recompute);
  MemoryPlan plan = plan_memory(plan_inputs);
  check_memory_fits(plan_inputs, plan, opt.world_size, budget);

  buffers = std::make_unique<PlannedAllocator>(std::move(plan), device_allocator);
  logits_chunk_rows = int(logits_rows(plan_inputs));
  allocate_backend_buffers<floatX>(*buffers, *this, opt.attention, opt.fp8, plan_inputs.fp8_lm_head);
  fp8_adamw_sinks = make_fp8_adamw_sinks();
  if (bucket_staging) setup_bucket_sync();
  if (staging_dev) staging_host.resize(buffer_size);
  if (cudnn_attention()) cudnn_workspace_bytes = buffers->plan().find(BufferId::kCudnnWorkspace)->bytes();
  CUDA_CHECK(cudaMallocHost(&host_scalar, sizeof(float)));
  for (int s = 0; s < 2; ++s) {
    CUDA_CHECK(cudaMallocHost(&tokens_host[s], 2 * max_bt * sizeof(int)));
    CUDA_CHECK(cudaMallocHost(&buckets_host[s], (3 * max_bt + 1) * sizeof(int)));
    CUDA_CHECK(cudaEventCreateWithFlags(&tokens_copied[s], cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&buckets_copied[s], cudaEventDisableTiming));
  }
  blas = std::make_unique<BlasContext>(blas_workspace, buffers->plan().find(BufferId::kBlasWorkspace)->bytes());
  // The encoder backward's piece sums take turns with the fc/qkv
  // gradient in d_big: 8*BT*C/(K+1) bytes at most against its 4*BT*C elements.
  if (encoder_piece_sums_floats(max_bt, size_t(C)) * sizeof(float) > buffers->plan().find(BufferId::kDbig)->bytes())
    throw std::logic_error("CUDA backend: the encoder backward's piece sums do not fit in the fc/qkv gradient buffer");

  CUDA_CHECK(cudaMemsetAsync(params, 0, buffer_size * sizeof(floatX), stream));
  if (master) CUDA_CHECK(cudaMemsetAsync(master, 0, owned.size() * sizeof(float), stream));
  CUDA_CHECK(cudaMemsetAsync(grads, 0, buffer_size * sizeof(floatX), stream));
  optimizer_state.assign({m, v});
  optimizer_state.resize(optimizer.state_names.size());
  for (float* tensor : optimizer_state) CUDA_CHECK(cudaMemsetAsync(tensor, 0, owned.size() * sizeof(float), stream));
  CUDA_CHECK(cudaMemsetAsync(scalars, 0, buffers->plan().find(BufferId::kScalars)->bytes(), stream));
  // Alive until the synchronization below, which the copy from it must precede.
  const std::vector<float> fp8_initial = fp8_state ? fp8_layout.initial_state() : std::vector<float>();
  if (fp8_state)
    CUDA_CHECK(cudaMemcpyAsync(fp8_state, fp8_initial.data(), fp8_initial.size() * sizeof(float),
                               cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  if (opt.profile && opt.speed.cuda_graphs == CudaGraphs::kOn) {
    fmt::print(stderr, "LLMC_CUDA_GRAPHS=on: off while LLMC_PROFILE=on, which times every launch from the host "
                       "(a graph's launches have no host side)\n");
    opt.speed.cuda_graphs = CudaGraphs::kOff;
  }
  if (opt.profile) {
    if (active_launch_timer() != nullptr)
      throw std::runtime_error("CUDA backend: LLMC_PROFILE: another backend of this process is being profiled");
    profiler = std::make_unique<LaunchProfiler>();
    active_launch_timer() = profiler.get();
  }
}

CudaBackend::Impl::~Impl() {
  if (comm_stream) cudaStreamSynchronize(comm_stream);
  if (stream) cudaStreamSynchronize(stream);
  if (profiler) {
    active_launch_timer() = nullptr;
    try {
      for (const std::string& line : profiler->table()) fmt::print("{}\n", line);
    } catch (const std::exception& e) {
      fmt::print(stderr, "profile: no table: {}\n", e.what());
    }
    std::fflush(stdout);
    profiler.reset();
  }
#if defined(LLMC_NCCL_LIBRARY)
  nccl.reset();
#endif
#if defined(LLMC_CUDNN)
  cudnn.reset();
#endif
  blas.reset();
  buffers.reset();
  for (int s = 0; s < 2; ++s) {
    if (tokens_host[s]) cudaFreeHost(tokens_host[s]);
    if (buckets_host[s]) cudaFreeHost(buckets_host[s]);
    if (tokens_copied[s]) cudaEventDestroy(tokens_copied[s]);
    if (buckets_copied[s]) cudaEventDestroy(buckets_copied[s]);
  }
  if (host_scalar) cudaFreeHost(host_scalar);
  if (bucket_event) cudaEventDestroy(bucket_event);
  if (comm_done) cudaEventDestroy(comm_done);
  if (comm_stream) cudaStreamDestroy(comm_stream);
  if (stream) cudaStreamDestroy(stream);
}

// cuDNN may want more workspace for a shape first seen after construction (a smaller batch
// never does in practice); growing it frees the old buffer, which waits for the GPU once.
void CudaBackend::Impl::ensure_cudnn_workspace(size_t bytes) {
  if (bytes <= cudnn_workspace_bytes) return;
  CUDA_CHECK(cudaStreamSynchronize(stream));
  cudnn_workspace = static_cast<unsigned char*>(buffers->regrow(BufferId::kCudnnWorkspace, bytes));
  cudnn_workspace_bytes = bytes;
}

// tokens_dev = inputs then targets (targets may be null: sampling).
void CudaBackend::Impl::stage_tokens(const int* inputs, const int* targets, int B, int T) {
  if (B > opt.max_batch || T > opt.max_seq_len)
    throw std::runtime_error(fmt::format("CUDA backend: batch B={} T={} exceeds the B={} T={} it was allocated for",
                                         B, T, opt.max_batch, opt.max_seq_len));
  check_batch(cfg, inputs, targets, B, T);
  const size_t BT = size_t(B) * T;
  slot ^= 1;
  CUDA_CHECK(cudaEventSynchronize(tokens_copied[slot]));
  int* host = tokens_host[slot];
  std::memcpy(host, inputs, BT * sizeof(int));
  if (targets) std::memcpy(host + BT, targets, BT * sizeof(int));
  CUDA_CHECK(cudaMemcpyAsync(tokens_dev, host, (targets ? 2 : 1) * BT * sizeof(int), cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaEventRecord(tokens_copied[slot], stream));
}

// Called once the forward pass is queued, so the host groups positions by token while the GPU
// works; returns the buckets (the backward pass needs their counts).
EncoderBuckets CudaBackend::Impl::stage_buckets(const int* inputs, int BT) {
  EncoderBuckets buckets = build_encoder_buckets(inputs, BT, cfg.vocab_size);
  CUDA_CHECK(cudaEventSynchronize(buckets_copied[slot]));
  std::memcpy(buckets_host[slot], buckets.packed.data(), buckets.packed.size() * sizeof(int));
  CUDA_CHECK(cudaMemcpyAsync(buckets_dev, buckets_host[slot], buckets.packed.size() * sizeof(int),
                             cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaEventRecord(buckets_copied[slot], stream));
  return buckets;
}

CudaBackend::CudaBackend(const GPT2Config& config, const CudaBackendOptions& options)
    : CudaBackend(config, options, unsharded_partition(num_parameters(config))) {}

CudaBackend::CudaBackend(const GPT2Config& config, const CudaBackendOptions& options,
                         const OptimizerPartition& partition)
    : impl_(std::make_unique<Impl>(config, options, partition)) {}

CudaBackend::~CudaBackend() = default;

const GPT2Config& CudaBackend::config() const { return impl_->cfg; }

const OptimizerPartition& CudaBackend::partition() const { return impl_->partition; }

size_t CudaBackend::device_bytes() const { return impl_->buffers->allocated_bytes(); }

const MemoryPlan& CudaBackend::memory_plan() const { return impl_->buffers->plan(); }

AttentionKind CudaBackend::attention() const { return impl_->opt.attention; }

int CudaBackend::recompute() const { return impl_->opt.recompute; }

const PeakFlops& CudaBackend::peak() const { return impl_->peak; }

double CudaBackend::peak_flops() const { return impl_->peak.flops_per_second; }

size_t CudaBackend::planned_bytes() const {
  MemoryPlanInputs estimated = impl_->plan_inputs;
  estimated.cudnn_workspace_bytes = 0;
  return plan_memory(estimated).total_bytes();
}

size_t CudaBackend::optimizer_state_bytes() const {
  const Impl& d = *impl_;
  return d.owned.size() * sizeof(float) * (d.optimizer_state.size() + (d.master ? 1 : 0));
}

void CudaBackend::zero_grad() {
  Impl& d = *impl_;
  if (d.profiler) d.profiler->begin_step();
  d.clear_gradients();
}

void CudaBackend::Impl::clear_gradients() {
  CUDA_CHECK(cudaMemsetAsync(grads, 0, buffer_size * sizeof(floatX), stream));
  CUDA_CHECK(cudaMemsetAsync(scalars + kLossAccum, 0, sizeof(float), stream));
  micro_in_step = 0;
}

float CudaBackend::accumulated_loss() { return impl_->read_scalar(Impl::kLossAccum); }

}  // namespace llmc
