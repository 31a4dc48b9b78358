// The CUDA backend's memory plan (llmc/cuda/memory_plan.h). Notation: L layers, C channels, NH
// heads, Vp the padded vocabulary, B x T the batch, BT = B*T rows; X is the bytes of one floatX
// (2 in bf16, 4 in fp32). Per-layer activations are L slots of BT rows.
#include "llmc/cuda/memory_plan.h"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

#include "llmc/backend.h"
#include "llmc/cuda/kernel_scratch.h"
#include "llmc/dist/gradient_buckets.h"

namespace llmc {

const char* attention_kind_name(AttentionKind kind) { return kind == AttentionKind::kCudnn ? "cudnn" : "fallback"; }

const char* precision_name(Precision precision) { return precision == Precision::kBf16 ? "bf16" : "fp32"; }

MemoryPlanInputs inputs_for_ranks(const GPT2Config& config, int batch, int seq_len, int recompute, int zero_stage,
                                  int ranks, bool overlap, Precision precision, AttentionKind attention) {
  MemoryPlanInputs in;
  in.config = config;
  in.batch = batch;
  in.seq_len = seq_len;
  in.recompute = recompute;
  in.precision = precision;
  in.attention = attention;
  in.partition = optimizer_partition(num_parameters(config), zero_stage, ranks, 0);
  // train_gpt2.cu: NCCL whenever there are several ranks, each with its own GPU; one rank has no
  // NCCL, and only -z 1 sends its (single-rank) reduce-scatter and all-gather through staging.
  in.host_staging = ranks == 1 && zero_stage == 1;
  in.overlap_buckets = overlap && ranks > 1;
  return in;
}

size_t cudnn_workspace_estimate(const GPT2Config& config, int batch, int seq_len) {
  const size_t rows = size_t(batch) * size_t(config.num_heads) * size_t(seq_len);  // B*NH*T
  const size_t head_size = size_t(config.channels / config.num_heads);
  return cudnn_backward_workspace_bytes(kCudnnEngineWorkspaceEstimate, rows, head_size);
}

const PlannedBuffer* MemoryPlan::find(BufferId id) const {
  for (const PlannedBuffer& b : buffers)
    if (b.id == id) return &b;
  return nullptr;
}

size_t MemoryPlan::total_bytes() const {
  size_t total = 0;
  for (const PlannedBuffer& b : buffers) total += b.bytes();
  return total;
}

void check_plan_inputs(const MemoryPlanInputs& in) {
  if (in.batch <= 0 || in.seq_len <= 0 || in.seq_len > in.config.max_seq_len)
    throw std::invalid_argument(
        fmt::format("memory plan: batch B={} T={} is not within 1..{} tokens per row", in.batch, in.seq_len,
                    in.config.max_seq_len));
  if (in.recompute < 0 || in.recompute > 2)
    throw std::invalid_argument(fmt::format("memory plan: recompute {} is not 0, 1 or 2", in.recompute));
  if (in.attention == AttentionKind::kCudnn && in.precision != Precision::kBf16)
    throw std::invalid_argument("memory plan: cuDNN attention is bf16 only");
}

MemoryPlan plan_memory(const MemoryPlanInputs& in) {
  check_plan_inputs(in);
  const GPT2Config& cfg = in.config;
  const bool bf16 = in.precision == Precision::kBf16;
  const bool cudnn = in.attention == AttentionKind::kCudnn;

  const size_t L = size_t(cfg.num_layers), C = size_t(cfg.channels), NH = size_t(cfg.num_heads);
  const size_t Vp = size_t(cfg.padded_vocab_size), B = size_t(in.batch), T = size_t(in.seq_len), BT = B * T;
  const size_t X = bf16 ? 2 : 4, F = sizeof(float), I = sizeof(int);
  const size_t padded = in.partition.buffer_size(), owned = in.partition.owned().size();
  // -r 2 recomputes ln1/ln2 into one slot; -r 1 and 2 recompute the GELU into one slot.
  const size_t ln_slots = in.recompute >= 2 ? 1 : L, gelu_slots = in.recompute >= 1 ? 1 : L;
  const size_t scores = B * NH * T * T;  // one layer's attention matrix (fallback)

  MemoryPlan plan;
  auto add = [&](BufferId id, const char* name, size_t elements, size_t element_bytes, const char* depends_on) {
    plan.buffers.push_back({id, name, elements, element_bytes, depends_on});
  };
  const char* param_size = in.partition.sharded ? "ranks*chunk (padded)" : "parameters";
  const char* owned_size = in.partition.sharded ? "chunk (ZeRO-1)" : "parameters";
  add(BufferId::kParams, "parameters", padded, X, param_size);
  if (bf16) add(BufferId::kMaster, "master weights", owned, F, owned_size);
  add(BufferId::kGrads, "gradients", padded, X, param_size);
  add(BufferId::kAdamM, "AdamW m", owned, F, owned_size);
  add(BufferId::kAdamV, "AdamW v", owned, F, owned_size);
  if (in.host_staging) add(BufferId::kStaging, "collective staging", padded, F, param_size);
  if (in.overlap_buckets) {
    // The buckets go one after another through one staging buffer of the largest packed bucket
    // (the last layer's 12 slices and lnf: about 12C^2); their pack and unpack spans sit in one table.
    const std::vector<BucketTransfer> transfers = plan_bucket_transfers(cfg, in.partition);
    size_t spans = 0;
    for (const BucketTransfer& t : transfers) spans += t.pack.size() + t.unpack.size();
    add(BufferId::kBucketStaging, "gradient bucket staging", largest_staging(transfers), X, "12C^2+15C (a layer + lnf)");
    add(BufferId::kBucketSpans, "gradient bucket spans", spans, sizeof(CopySpan), "L, ranks");
  }

  add(BufferId::kResidual, "residual stream", (L + 1) * BT * C, X, "(L+1)*B*T*C");
  add(BufferId::kLn1, "ln1", ln_slots * BT * C, X, in.recompute >= 2 ? "B*T*C (-r 2)" : "L*B*T*C");
  add(BufferId::kLn2, "ln2", ln_slots * BT * C, X, in.recompute >= 2 ? "B*T*C (-r 2)" : "L*B*T*C");
  add(BufferId::kLn1Mean, "ln1 mean", L * BT, F, "L*B*T");
  add(BufferId::kLn1Rstd, "ln1 rstd", L * BT, F, "L*B*T");
  add(BufferId::kLn2Mean, "ln2 mean", L * BT, F, "L*B*T");
  add(BufferId::kLn2Rstd, "ln2 rstd", L * BT, F, "L*B*T");
  add(BufferId::kLnfMean, "lnf mean", BT, F, "B*T");
  add(BufferId::kLnfRstd, "lnf rstd", BT, F, "B*T");
  add(BufferId::kQkv, "qkv", L * BT * 3 * C, X, "L*B*T*3C");
  add(BufferId::kAtty, "attention output", L * BT * C, X, "L*B*T*C");
  add(BufferId::kRes2, "residual after attention", L * BT * C, X, "L*B*T*C");
  add(BufferId::kFch, "fc pre-GELU", L * BT * 4 * C, X, "L*B*T*4C");
  add(BufferId::kFchGelu, "fc GELU", gelu_slots * BT * 4 * C, X, in.recompute >= 1 ? "B*T*4C (-r >= 1)" : "L*B*T*4C");
  add(BufferId::kBranch, "projection outputs", BT * C, X, "B*T*C");
  add(BufferId::kLnf, "lnf", BT * C, X, "B*T*C");
  add(BufferId::kLogits, "logits", BT * Vp, X, "B*T*Vp");
  add(BufferId::kLosses, "losses", BT, F, "B*T");
  if (cudnn) {
    add(BufferId::kAttStats, "attention statistics", L * att_stats_layer_floats(BT, NH), F, "L*B*T*NH (16 B slices)");
  } else {
    add(BufferId::kAttProbs, "attention probabilities", L * scores, X, "L*B*NH*T*T");
    add(BufferId::kAttQ, "attention q", BT * C, X, "B*T*C");
    add(BufferId::kAttK, "attention k", BT * C, X, "B*T*C");
    add(BufferId::kAttV, "attention v", BT * C, X, "B*T*C");
    add(BufferId::kAttVaccum, "attention vaccum", BT * C, X, "B*T*C");
    add(BufferId::kAttDq, "attention dq", BT * C, X, "B*T*C");
    add(BufferId::kAttDk, "attention dk", BT * C, X, "B*T*C");
    add(BufferId::kAttDv, "attention dv", BT * C, X, "B*T*C");
    add(BufferId::kAttScores, "attention scores", scores, X, "B*NH*T*T");
  }
  add(BufferId::kDres, "residual gradient", BT * C, X, "B*T*C");
  add(BufferId::kDln, "layer gradient", BT * C, X, "B*T*C");
  add(BufferId::kDbig, "fc/qkv gradient", BT * 4 * C, X, "B*T*4C");
  // The LayerNorm and bias gradients take turns in one fp32 scratch, the larger of the two needs.
  add(BufferId::kScratch, "gradient partial sums",
      std::max(layernorm_backward_scratch_floats(cfg.channels), matmul_bias_grad_scratch_floats(int(BT), 4 * cfg.channels)),
      F, "C, B*T*4C/64");
  add(BufferId::kScalars, "scalars", kScalarSlots + kGlobalNormBlocks, F, "fixed");
  add(BufferId::kTokens, "tokens", 2 * BT, I, "B*T");  // inputs, then targets
  // Encoder backward: n distinct tokens, n+1 offsets and the B*T positions (EncoderBuckets in
  // llmc/cuda/encoder.cuh), at most 3*BT+1 ints.
  add(BufferId::kBuckets, "encoder buckets", 3 * BT + 1, I, "B*T");
  add(BufferId::kBlasWorkspace, "cuBLASLt workspace", kBlasWorkspaceBytes, 1, "fixed");
  if (cudnn)
    add(BufferId::kCudnnWorkspace, "cuDNN workspace",
        in.cudnn_workspace_bytes > 0 ? in.cudnn_workspace_bytes
                                     : cudnn_workspace_estimate(cfg, in.batch, in.seq_len),
        1, in.cudnn_workspace_bytes > 0 ? "cuDNN's answer" : "B*T*C (estimate)");
  return plan;
}

}  // namespace llmc
