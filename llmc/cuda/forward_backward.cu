// GPT-2's forward and backward passes on the GPU, as the sequence of kernel launches and GEMMs they
// are: CudaBackend::forward_backward (a training micro-step), the evaluation and sampling passes,
// and the per-layer pieces they share. The backend's state is CudaBackend::Impl
// (llmc/cuda/cuda_backend_impl.cuh); construction is in cuda_backend.cu.
//
// Forward, per layer l (residual[l] is the stream entering the layer):
//   ln1 = LN(residual[l])                 (layer 0: fused with the encoder; later: with the residual add)
//   qkv = ln1 Wqkv^T + b                  (cuBLASLt, bias epilogue)
//   atty = causal attention(qkv)          (cuDNN flash attention in bf16, the fallback in fp32)
//   res2 = residual[l] + atty Wproj^T + b, ln2 = LN(res2)        (one fused kernel)
//   fch = ln2 Wfc^T + b, gelu = GELU(fch) (GEMM, then the GELU kernel; LLMC_GELU=epilogues: one GEMM)
//   residual[l+1] = res2 + gelu Wfcproj^T + b, next LN            (fused again; after the last
//                                           layer the next LN is lnf)
// then the classifier: logits = lnf wte^T (the LM head of llmc/linear_layers.def: its weight is the
// token embedding, tied, no bias), the fused softmax/cross-entropy (llmc/cuda/classifier.cuh),
// which overwrites the logits with their gradient, and its two backward GEMMs, in chunks of rows.
// The backward pass mirrors the layers from lnf down; the running gradient of the residual stream
// (dres) collects each LayerNorm backward and flows through the residual adds unchanged.
//
// Gradients accumulate in floatX across micro-batches (every weight-gradient GEMM runs with beta = 1,
// the bias, LayerNorm and encoder kernels add); zero_grad clears them. Only the evaluation and
// sampling calls wait for the GPU, for the values they return.
//
// The classifier's chunks: the logits buffer holds logits_chunk_rows rows (logits_rows,
// llmc/cuda/memory_plan.h): B*T, or kClassifierChunkRows (fewer where a test asks) where B*T is
// more. Each chunk is done with before the next one overwrites the buffer: in training its logits
// GEMM, the fused classifier (the chunk's losses, and its logits overwritten with their gradient),
// the input-gradient GEMM (d(lnf) of its rows, into d_ln) and the weight-gradient GEMM (beta = 1: the
// chunks add up in wte's gradient as micro-batches do). Each row's logits, loss and d(lnf) are the
// products one chunk computes; only wte's gradient is summed in another grouping of the rows.
//
// --fp8 1 (llmc/cuda/fp8.cuh, cuda_backend_fp8.cu): the four linear layers of each layer run their
// forward and input-gradient GEMMs on FP8 copies; with LLMC_FP8_LM_HEAD=on the LM head's two GEMMs
// too, the logits from lnf's E4M3 copy and d(lnf) from the E5M2 copy of the chunk's d(logits), which
// the fused classifier writes.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "llmc/cuda/attention.cuh"
#include "llmc/cuda/classifier.cuh"
#include "llmc/cuda/cuda_backend_impl.cuh"
#include "llmc/cuda/encoder.cuh"
#include "llmc/cuda/gelu.cuh"
#include "llmc/cuda/layernorm.cuh"
#include "llmc/cuda/layernorm_forward.cuh"
#include "llmc/cuda/matmul.cuh"
#include "llmc/cuda/random.cuh"
#include "llmc/cuda/reduce.cuh"

namespace llmc {

namespace {

// accumulator[0] += scale * sum(losses[0..n)), one block with a fixed summation order, so that
// the reported loss is reproducible and never needs the host.
__global__ void accumulate_loss_kernel(float* accumulator, const float* losses, int n, float scale) {
  LLMC_SHARED(float, scratch, [kMaxWarpsPerBlock]);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) sum += losses[i];
  sum = block_reduce_sum(sum, scratch);
  if (threadIdx.x == 0) accumulator[0] += scale * sum;
}

void accumulate_loss(float* accumulator, const float* losses, int n, float scale, cudaStream_t stream) {
  launch<accumulate_loss_kernel>(1, 1024, 0, stream, accumulator, losses, n, scale);
}

}  // namespace

void CudaBackend::forward_backward(const int* inputs, const int* targets, int B, int T, float loss_scale) {
  Impl& d = *impl_;
  const int BT = B * T;
  // d(loss_scale * mean loss)/d(loss of one position) = loss_scale / (B*T).
  const float dloss = loss_scale / float(BT);
  d.fp8_recording = d.opt.fp8 && !d.tuning;
  d.stage_tokens(inputs, targets, B, T);
  if (d.opt.speed.cuda_graphs == CudaGraphs::kOn && !d.tuning) {
    d.graphed_micro_step(B, T, dloss);
  } else {
    d.forward(B, T);
    d.classifier_forward_backward(BT, dloss);
    d.backward(B, T);
  }
  // The host sorts the tokens into buckets while the GPU runs the micro-step; the encoder's backward
  // needs them, so it stays outside a graph.
  const EncoderBuckets buckets = d.stage_buckets(inputs, BT);
  ++d.micro_in_step;
  d.backward_encoder(B, T, buckets, d.rounding_seed(inputs, BT));
  if (d.fp8_recording) d.end_fp8_micro_step();
  d.fp8_recording = false;
}

// LLMC_CUDA_GRAPHS=on: the forward, classifier and backward through the layers as one CUDA graph
// (what it holds and what stays out of it: llmc/cuda/micro_step_graphs.cuh).
void CudaBackend::Impl::graphed_micro_step(int B, int T, float dloss) {
  if (opt.fp8) cast_fp8_weights();  // only after the parameters changed, so never inside a graph
  const MicroStepKind kind{B, T, MicroStepKind::bits(dloss), fp8_gemms(), fp8_recording, overlapping()};
  const bool captured = graphs.run(kind, stream, [&] {
    forward(B, T);
    classifier_forward_backward(B * T, dloss);
    backward(B, T);
    // The buckets' collectives, forked onto comm_stream, join the captured stream (CUDA ends a
    // capture only so); the encoder backward then follows them.
    if (kind.overlapping) {
      CUDA_CHECK(cudaEventRecord(comm_done, comm_stream));
      CUDA_CHECK(cudaStreamWaitEvent(stream, comm_done, 0));
    }
  });
  // A replay sends the layers' buckets as the captured pass did; the host's account of them follows.
  if (!captured && kind.overlapping)
    for (int bucket = 0; bucket < L(); ++bucket) bucket_order.ready(bucket);
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

void CudaBackend::Impl::classifier_forward_backward(int BT, float dloss) {
  for (int row0 = 0; row0 < BT; row0 += logits_chunk_rows) {
    const int rows = std::min(logits_chunk_rows, BT - row0);
    linear_forward(LinearLayer::kLmHead, 0, logits, lnf, rows, row0);
    classify_chunk(BT, row0, rows, dloss, true);
    const size_t first = size_t(row0) * C();
    linear_backward(LinearLayer::kLmHead, 0, {.dinp = d_ln + first, .dout = logits, .inp = lnf + first, .BT = rows});
  }
  accumulate_loss(scalars + kLossAccum, losses, BT, dloss, stream);
}

// With LLMC_FP8_LM_HEAD=on the gradient pass also writes the chunk's d(logits) E5M2 copy (from the
// operand buffer's start), which the LM head's input-gradient GEMM reads.
void CudaBackend::Impl::classify_chunk(int BT, int row0, int rows, float dloss, bool write_dlogits) {
  fused_classifier(logits, losses + row0, tokens_dev + BT + row0, rows, cfg.vocab_size, cfg.padded_vocab_size, dloss,
                   write_dlogits, stream,
                   write_dlogits ? fp8_sink(Fp8Role::kGradient, LinearLayer::kLmHead, 0) : Fp8Sink{});
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

uint32_t CudaBackend::Impl::rounding_seed(const int* inputs, int BT) const {
  uint32_t seed = mix32(opt.seed ^ mix32(micro_in_step));
  for (int i = 0; i < BT; ++i) seed = mix32(seed ^ uint32_t(inputs[i]));
  return seed;
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

// The backward of linear layer `linear` in layer l, given p's activations and choices: dout's FP8
// copy before the input gradient reads it, the bias gradient, dW += dout^T inp, then dinp (the input
// gradient first where it writes inp: inp_by_gelu_backward); the input gradient from the FP8 copies
// where linear_forward's GEMM would be FP8.
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
  // The bias-gradient kernels would write dout's copy only after the input gradient read it.
  const bool input_first = p.inp_by_gelu_backward;
  if (input_first && p.dout_fp8_by_bias_grad)
    throw std::invalid_argument("linear_backward: inp_by_gelu_backward with dout_fp8_by_bias_grad");
  const bool fp8_by_bias_grad = p.dout_fp8_by_bias_grad && p.dbias;
  if (p.dout_fp8.data && !fp8_by_bias_grad) fp8_cast(p.dout_fp8, p.dout, size_t(p.BT) * p.OC, stream);
  if (input_first) matmul_backward_input(*blas, p, stream);
  if (p.dbias)
    matmul_bias_grad(p.dbias, p.bias_scratch, p.dout, p.BT, p.OC, stream, fp8_by_bias_grad ? p.dout_fp8 : Fp8Sink{});
  lt_gemm(*blas, weight_grad_gemm(p.dweight, p.dout, p.inp, p.BT, p.C, p.OC), stream);
  if (!input_first) matmul_backward_input(*blas, p, stream);
}

void CudaBackend::Impl::attention_forward(int l, int B, int T) {
  const int C = this->C(), NH = this->NH();
  floatX* q = slot_of(qkv, l, 3 * size_t(C));
  floatX* out = slot_of(atty, l, size_t(C));
#if defined(LLMC_CUDNN)
  if (cudnn_attention()) {
    const int HS = C / NH;
    ensure_cudnn_workspace(cudnn->forward_workspace_bytes(B, T, NH, HS));
    const TimedRegion timed(stream, [] { return std::string("cuDNN attention forward"); });
    cudnn->forward(out, att_stats_of(l), q, B, T, NH, HS, cudnn_workspace,
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

void CudaBackend::forward_losses(const int* inputs, const int* targets, int B, int T, float* losses) {
  Impl& d = *impl_;
  d.outside_step();
  const int BT = B * T;
  d.stage_tokens(inputs, targets, B, T);
  d.forward(B, T);
  // The classifier writes each position's cross-entropy (fp32) without touching the logits.
  for (int row0 = 0; row0 < BT; row0 += d.logits_chunk_rows) {
    const int rows = std::min(d.logits_chunk_rows, BT - row0);
    d.linear_forward(LinearLayer::kLmHead, 0, d.logits, d.lnf, rows, row0);
    d.classify_chunk(BT, row0, rows, 0.0f, false);
  }
  CUDA_CHECK(cudaMemcpyAsync(losses, d.losses, size_t(BT) * sizeof(float), cudaMemcpyDeviceToHost, d.stream));
  CUDA_CHECK(cudaStreamSynchronize(d.stream));
}

void CudaBackend::next_token_logits(const int* tokens, int T, float* logits) {
  Impl& d = *impl_;
  d.outside_step();
  if (T <= 0 || T > d.opt.max_seq_len)
    throw std::runtime_error(fmt::format("CUDA backend: sampling context of {} tokens is not within 1..{}", T,
                                         d.opt.max_seq_len));
  // Always the longest T, padded after the context: attention is causal, so position T-1 does not
  // see the padding, and one fixed shape means one set of GEMM algorithms and attention plans.
  const int Tp = d.opt.max_seq_len;
  std::vector<int> padded(size_t(Tp), 0);
  std::copy(tokens, tokens + T, padded.begin());
  d.stage_tokens(padded.data(), nullptr, 1, Tp);
  d.forward(1, Tp);
  // The logits of the chunk that holds row T-1 only.
  const int row = T - 1, row0 = row / d.logits_chunk_rows * d.logits_chunk_rows;
  d.linear_forward(LinearLayer::kLmHead, 0, d.logits, d.lnf, std::min(d.logits_chunk_rows, Tp - row0), row0);
  const std::vector<float> values = floatx_to_host(d.logits + size_t(row - row0) * d.cfg.padded_vocab_size,
                                                   size_t(d.cfg.vocab_size), d.stream);
  std::copy(values.begin(), values.end(), logits);
}

std::vector<float> CudaBackend::forward_logits(const int* inputs, int B, int T) {
  Impl& d = *impl_;
  d.outside_step();
  d.stage_tokens(inputs, nullptr, B, T);
  d.forward(B, T);
  const size_t Vp = size_t(d.cfg.padded_vocab_size);
  std::vector<float> all(size_t(B) * T * Vp);
  for (int row0 = 0; row0 < B * T; row0 += d.logits_chunk_rows) {
    const int rows = std::min(d.logits_chunk_rows, B * T - row0);
    d.linear_forward(LinearLayer::kLmHead, 0, d.logits, d.lnf, rows, row0);
    const std::vector<float> chunk = floatx_to_host(d.logits, size_t(rows) * Vp, d.stream);
    std::copy(chunk.begin(), chunk.end(), all.begin() + ptrdiff_t(size_t(row0) * Vp));
  }
  return all;
}

uint64_t CudaBackend::graph_launches() const { return impl_->graphs.launches(); }

}  // namespace llmc
