// CudaBackend: GPT-2 training on one GPU: construction, and the forward and backward passes.
//
// Forward, per layer l (residual[l] is the stream entering the layer):
//   ln1 = LN(residual[l])                 (layer 0: plain LN; later: fused with the residual add)
//   qkv = ln1 Wqkv^T + b                  (cuBLASLt, bias epilogue)
//   atty = causal attention(qkv)          (cuDNN flash attention in bf16, the fallback in fp32)
//   res2 = residual[l] + atty Wproj^T + b, ln2 = LN(res2)        (one fused kernel)
//   fch = ln2 Wfc^T + b, gelu = GELU(fch) (one GEMM: GELU_AUX_BIAS keeps fch as the aux output)
//   residual[l+1] = res2 + gelu Wfcproj^T + b, next LN            (fused again; after the last
//                                           layer the next LN is lnf)
// then the classifier (cuda_backend_classifier.cu): logits = lnf wte^T, the fused
// softmax/cross-entropy, which overwrites the logits with their gradient, and its backward GEMMs
// into d(lnf), in chunks of rows. The backward pass mirrors
// the layers from lnf down; the running gradient of the residual stream (dres) collects each
// LayerNorm backward and flows through the residual adds unchanged.
//
// Gradients accumulate in floatX across micro-batches (every GEMM runs with beta = 1, the bias,
// LayerNorm and encoder kernels add); zero_grad clears them. Nothing here waits for the GPU
// except the calls whose value the loop needs on the host (accumulated_loss, grad_sum_of_squares,
// forward_losses, next_token_logits, the get_* copies), and waits on a pinned staging buffer that
// the GPU finished copying two micro-batches ago.
#include "llmc/cuda/cuda_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "llmc/cuda/attention.cuh"
#include "llmc/cuda/cuda_backend_impl.cuh"
#include "llmc/cuda/encoder.cuh"
#include "llmc/cuda/gelu.cuh"
#include "llmc/cuda/layernorm.cuh"
#include "llmc/cuda/layernorm_forward.cuh"
#include "llmc/cuda/matmul.cuh"
#include "llmc/cuda/memory_fit.h"
#include "llmc/cuda/memory_plan.h"
#include "llmc/cuda/random.cuh"

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
      size_t bytes = cudnn->forward_workspace_bytes(opt.max_batch, opt.max_seq_len, NH, HS, true);
      bytes = std::max(bytes, cudnn->backward_workspace_bytes(opt.max_batch, opt.max_seq_len, NH, HS));
      bytes = std::max(bytes, cudnn->forward_workspace_bytes(1, opt.max_seq_len, NH, HS, true));
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

void CudaBackend::Impl::attention_forward(int l, int B, int T) {
  const int C = this->C(), NH = this->NH();
  floatX* q = slot_of(qkv, l, 3 * size_t(C));
  floatX* out = slot_of(atty, l, size_t(C));
#if defined(LLMC_CUDNN)
  if (cudnn_attention()) {
    const int HS = C / NH;
    ensure_cudnn_workspace(cudnn->forward_workspace_bytes(B, T, NH, HS, true));
    const TimedRegion timed(stream, [] { return std::string("cuDNN attention forward"); });
    cudnn->forward(out, att_stats_of(l), q, B, T, NH, HS, true, cudnn_workspace,
                   cudnn_workspace_bytes, stream);
    return;
  }
#endif
  llmc::attention_forward(*blas, out, att_probs_of(l), att_buffers, q, B, T, C, NH, stream);
}

// dqkv (d_big) from d(atty) (d_ln).
void CudaBackend::Impl::attention_backward(int l, int B, int T) {
  const int C = this->C(), NH = this->NH();
  const floatX* q = slot_of(qkv, l, 3 * size_t(C));
#if defined(LLMC_CUDNN)
  if (cudnn_attention()) {
    const int HS = C / NH;
    // The wrapper clears the fp32 dQ accumulator it keeps in the workspace itself, where the
    // loaded cuDNN does not.
    ensure_cudnn_workspace(cudnn->backward_workspace_bytes(B, T, NH, HS));
    const TimedRegion timed(stream, [] { return std::string("cuDNN attention backward"); });
    cudnn->backward(d_big, d_ln, q, slot_of(atty, l, size_t(C)), att_stats_of(l), B, T, NH, HS,
                    cudnn_workspace, cudnn_workspace_bytes, stream);
    return;
  }
#endif
  llmc::attention_backward(*blas, d_big, d_ln, q, att_probs_of(l), att_buffers, B, T, C, NH, stream);
}

void CudaBackend::Impl::linear_forward(LinearLayer linear, int l, floatX* out, const floatX* inp, int rows,
                                       int row0) {
  const LinearLayerSpec& s = spec(linear);
  const size_t first = size_t(row0) * s.in;
  if (fp8_gemms(linear)) {
    Fp8Matrix inp8 = fp8_operand_of(Fp8Role::kInput, linear, l);
    inp8.data += first;
    matmul_forward_fp8(*blas, out, inp8, fp8_weight(linear, l, false), bias_of(linear, l), rows, int(s.in),
                       int(s.out), opt.speed.fp8_fast_accum == Fp8FastAccum::kForward, stream);
  } else {
    matmul_forward(*blas, out, inp + first, weight_of(linear, l), bias_of(linear, l), rows, int(s.in), int(s.out),
                   stream);
  }
}

void CudaBackend::Impl::linear_backward(LinearLayer linear, int l, MatmulBackward p) {
  const LinearLayerSpec& s = spec(linear);
  p.dweight = weight_grad_of(linear, l);
  p.weight = weight_of(linear, l);
  p.C = int(s.in);
  p.OC = int(s.out);
  if (fp8_gemms(linear)) {
    p.dout8 = fp8_operand_of(Fp8Role::kGradient, linear, l);
    p.weight_t8 = fp8_weight(linear, l, true);
  }
  matmul_backward(*blas, p, stream);
}

// Encoder to lnf, for the tokens staged in tokens_dev.
void CudaBackend::Impl::forward(int B, int T) {
  const int C = this->C(), L = this->L(), BT = B * T;
  const size_t Cs = size_t(C);
  // --fp8 1: the kernels that produce each linear layer's input also write its FP8 copy (fp8_sink;
  // the attention output, from cuDNN, is cast on its own), which the layer's GEMM reads.
  if (opt.fp8) cast_fp8_weights();
  encoder_layernorm_forward(residual, ln1_of(0), ln1_mean, ln1_rstd, tokens_dev, param(kWte), param(kWpe),
                            param(kLn1w, 0), param(kLn1b, 0), B, T, C, stream,
                            fp8_sink(Fp8Role::kInput, LinearLayer::kQkv, 0));
  for (int l = 0; l < L; ++l) {
    floatX* res_in = slot_of(residual, l, Cs);
    floatX* layer_qkv = slot_of(qkv, l, 3 * Cs);
    floatX* layer_res2 = slot_of(res2, l, Cs);
    floatX* layer_atty = slot_of(atty, l, Cs);
    floatX* layer_fch = slot_of(fch, l, H());
    linear_forward(LinearLayer::kQkv, l, layer_qkv, ln1_of(l), BT);
    attention_forward(l, B, T);
    if (opt.fp8) fp8_cast(fp8_sink(Fp8Role::kInput, LinearLayer::kAttproj, l), layer_atty, size_t(BT) * Cs, stream);
    linear_forward(LinearLayer::kAttproj, l, branch, layer_atty, BT);
    fused_residual_layernorm_forward(layer_res2, ln2_of(l), slot_of(ln2_mean, l, 1),
                                     slot_of(ln2_rstd, l, 1), res_in, branch, param(kLn2w, l), param(kLn2b, l), BT, C,
                                     stream, fp8_sink(Fp8Role::kInput, LinearLayer::kFc, l));
    if (gelu_by_backward() && fp8_gemms(LinearLayer::kFc)) {
      // LLMC_FP8_GELU=epilogue: fcproj's E4M3 operand from the fc GEMM; the bf16 GELU comes in the backward.
      const LinearLayerSpec& fc = spec(LinearLayer::kFc);
      matmul_forward_fp8_gelu(*blas, fp8_sink(Fp8Role::kInput, LinearLayer::kFcproj, l), layer_fch,
                              fp8_operand_of(Fp8Role::kInput, LinearLayer::kFc, l), fp8_weight(fc.id, l, false),
                              bias_of(fc.id, l), BT, int(fc.in), int(fc.out),
                              opt.speed.fp8_fast_accum == Fp8FastAccum::kForward, stream);
    } else if (opt.fp8) {
      linear_forward(LinearLayer::kFc, l, layer_fch, ln2_of(l), BT);
      gelu_forward(gelu_of(l), layer_fch, size_t(BT) * H(), stream,
                   fp8_sink(Fp8Role::kInput, LinearLayer::kFcproj, l));
    } else {
      const LinearLayerSpec& fc = spec(LinearLayer::kFc);
      matmul_forward_gelu(*blas, gelu_of(l), layer_fch, ln2_of(l), weight_of(fc.id, l), bias_of(fc.id, l), BT,
                          int(fc.in), int(fc.out), opt.speed.gelu == GeluPath::kEpilogues, stream);
    }
    linear_forward(LinearLayer::kFcproj, l, branch, gelu_of(l), BT);
    floatX* res_out = slot_of(residual, l + 1, Cs);
    if (l + 1 < L) {
      fused_residual_layernorm_forward(res_out, ln1_of(l + 1), slot_of(ln1_mean, l + 1, 1),
                                       slot_of(ln1_rstd, l + 1, 1), layer_res2, branch, param(kLn1w, l + 1),
                                       param(kLn1b, l + 1), BT, C, stream,
                                       fp8_sink(Fp8Role::kInput, LinearLayer::kQkv, l + 1));
    } else {
      fused_residual_layernorm_forward(res_out, lnf, lnf_mean, lnf_rstd, layer_res2, branch, param(kLnfw),
                                       param(kLnfb), BT, C, stream, fp8_sink(Fp8Role::kInput, LinearLayer::kLmHead, 0));
    }
  }
}

uint32_t CudaBackend::Impl::rounding_seed(const int* inputs, int BT) const {
  uint32_t seed = mix32(opt.seed ^ mix32(micro_in_step));
  for (int i = 0; i < BT; ++i) seed = mix32(seed ^ uint32_t(inputs[i]));
  return seed;
}

// Backward from d(lnf), which the classifier left in d_ln, through the layers (the encoder's
// gradients: backward_encoder).
void CudaBackend::Impl::backward(int B, int T) {
  const int C = this->C(), L = this->L(), BT = B * T;
  const size_t Cs = size_t(C);
  CUDA_CHECK(cudaMemsetAsync(dres, 0, size_t(BT) * Cs * sizeof(floatX), stream));
  const bool dgelu_epilogue = opt.speed.gelu != GeluPath::kKernels && !opt.fp8;
  // With --fp8 1 and LLMC_FP8_FC_BIAS_GRAD=gelu-backward the fc bias gradient comes with the GELU
  // backward kernel; otherwise the fc layer's own bias-gradient kernels sum it.
  const bool fc_bias_in_gelu_backward = opt.fp8 && opt.speed.fp8_fc_bias_grad == Fp8FcBiasGrad::kGeluBackward;
  // --fp8 1: each input-gradient GEMM reads its output gradient's E5M2 copy: the fc layer's written
  // by the GELU backward kernel that produces it; dqkv's by matmul_backward, cast on its own or, with
  // LLMC_FP8_DQKV_CAST=bias-grad, by the qkv bias gradient's kernel as it reads dqkv; the
  // projections' (the residual gradient dres) by matmul_backward's cast or, with
  // LLMC_FP8_RESIDUAL_CAST=layernorm, by the LayerNorm backward that leaves dres.
  const bool dqkv_fp8_by_bias_grad = opt.speed.fp8_dqkv_cast == Fp8DqkvCast::kBiasGrad;
  const bool fp8_from_ln = opt.speed.fp8_residual_cast == Fp8ResidualCast::kLayerNorm;
  const auto residual_fp8 = [&](LinearLayer linear, int l) {
    return fp8_from_ln ? fp8_sink(Fp8Role::kGradient, linear, l) : Fp8Sink{};
  };
  const auto projection_dout_fp8 = [&](LinearLayer linear, int l) {
    return fp8_from_ln ? Fp8Sink{} : fp8_sink(Fp8Role::kGradient, linear, l);
  };
  layernorm_backward(dres, grad(kLnfw), grad(kLnfb), scratch, d_ln, slot_of(residual, L, Cs), param(kLnfw), lnf_mean,
                     lnf_rstd, BT, C, stream, residual_fp8(LinearLayer::kFcproj, L - 1));
  for (int l = L - 1; l >= 0; --l) {
    floatX* res_in = slot_of(residual, l, Cs);
    floatX* layer_res2 = slot_of(res2, l, Cs);
    floatX* layer_fch = slot_of(fch, l, H());
    // With LLMC_FP8_GELU=epilogue the GELU backward kernel writes it (inp_by_gelu_backward).
    if (opt.recompute >= 1 && !gelu_by_backward()) gelu_forward(gelu_of(l), layer_fch, size_t(BT) * H(), stream);
    if (opt.recompute >= 2)
      layernorm_forward(ln2_of(l), nullptr, nullptr, layer_res2, param(kLn2w, l), param(kLn2b, l), BT, C, stream);
    // fcproj: its input gradient comes out already multiplied by gelu'(fch).
    linear_backward(LinearLayer::kFcproj, l,
                    {.dinp = d_big, .dbias = bias_grad_of(LinearLayer::kFcproj, l), .bias_scratch = scratch,
                     .dout = dres, .inp = gelu_of(l), .pre_gelu = layer_fch, .BT = BT,
                     .dgelu_epilogue = dgelu_epilogue,
                     .dinp_fp8 = fp8_sink(Fp8Role::kGradient, LinearLayer::kFc, l),
                     .dout_fp8 = projection_dout_fp8(LinearLayer::kFcproj, l),
                     .dbias_pre_gelu = fc_bias_in_gelu_backward ? bias_grad_of(LinearLayer::kFc, l) : nullptr,
                     .inp_by_gelu_backward = gelu_by_backward()});
    linear_backward(LinearLayer::kFc, l,
                    {.dinp = d_ln, .dbias = fc_bias_in_gelu_backward ? nullptr : bias_grad_of(LinearLayer::kFc, l),
                     .bias_scratch = scratch, .dout = d_big, .inp = ln2_of(l), .BT = BT});
    layernorm_backward(dres, grad(kLn2w, l), grad(kLn2b, l), scratch, d_ln, layer_res2, param(kLn2w, l),
                       slot_of(ln2_mean, l, 1), slot_of(ln2_rstd, l, 1), BT, C, stream,
                       residual_fp8(LinearLayer::kAttproj, l));
    linear_backward(LinearLayer::kAttproj, l,
                    {.dinp = d_ln, .dbias = bias_grad_of(LinearLayer::kAttproj, l), .bias_scratch = scratch,
                     .dout = dres, .inp = slot_of(atty, l, Cs), .BT = BT,
                     .dout_fp8 = projection_dout_fp8(LinearLayer::kAttproj, l)});
    attention_backward(l, B, T);
    if (opt.recompute >= 2)
      layernorm_forward(ln1_of(l), nullptr, nullptr, res_in, param(kLn1w, l), param(kLn1b, l), BT, C, stream);
    linear_backward(LinearLayer::kQkv, l,
                    {.dinp = d_ln, .dbias = bias_grad_of(LinearLayer::kQkv, l), .bias_scratch = scratch,
                     .dout = d_big, .inp = ln1_of(l), .BT = BT,
                     .dout_fp8 = fp8_sink(Fp8Role::kGradient, LinearLayer::kQkv, l),
                     .dout_fp8_by_bias_grad = dqkv_fp8_by_bias_grad});
    // Below layer 0 the stream is the encoder's output, which no GEMM reads: no FP8 copy.
    layernorm_backward(dres, grad(kLn1w, l), grad(kLn1b, l), scratch, d_ln, res_in, param(kLn1w, l),
                       slot_of(ln1_mean, l, 1), slot_of(ln1_rstd, l, 1), BT, C, stream,
                       l > 0 ? residual_fp8(LinearLayer::kFcproj, l - 1) : Fp8Sink{});
    // Layer l's gradients (and lnf's) are final: bucket L-1-l (llmc/dist/gradient_buckets.h); the
    // buckets overlap the backward pass over NCCL only.
#if defined(LLMC_NCCL_LIBRARY)
    if (overlapping()) start_bucket(L - 1 - l);
#endif
  }
}

// The encoder's gradients from dres, which the backward pass through the layers left.
void CudaBackend::Impl::backward_encoder(int B, int T, const EncoderBuckets& buckets, uint32_t seed) {
  const int C = this->C();
  // d_big is free again; it holds the piece sums (encoder_piece_sums_floats fits, checked at construction).
  encoder_backward(grad(kWte), grad(kWpe), reinterpret_cast<float*>(d_big), dres, buckets_dev, buckets, B, T, C, seed,
                   stream);
#if defined(LLMC_NCCL_LIBRARY)
  if (overlapping()) start_bucket(L());
#endif
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

// Forward, classifier and the backward pass through the layers, for the tokens staged in tokens_dev.
void CudaBackend::Impl::forward_and_backward(int B, int T, float dloss) {
  forward(B, T);
  classifier_forward_backward(B * T, dloss);
  backward(B, T);
}

void CudaBackend::forward_backward(const int* inputs, const int* targets, int B, int T, float loss_scale) {
  Impl& d = *impl_;
  const int BT = B * T;
  d.fp8_recording = d.opt.fp8 && !d.tuning;
  d.stage_tokens(inputs, targets, B, T);
  // d(loss_scale * mean loss)/d(loss of one position) = loss_scale / (B*T).
  d.micro_step(B, T, loss_scale / float(BT));
  // The host sorts the tokens into buckets while the GPU runs the micro-step.
  const EncoderBuckets buckets = d.stage_buckets(inputs, BT);
  ++d.micro_in_step;
  d.backward_encoder(B, T, buckets, d.rounding_seed(inputs, BT));
  if (d.fp8_recording) d.end_fp8_micro_step();
  d.fp8_recording = false;
}

float CudaBackend::accumulated_loss() { return impl_->read_scalar(Impl::kLossAccum); }

}  // namespace llmc
