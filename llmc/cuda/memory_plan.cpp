// The CUDA backend's memory plan (llmc/cuda/memory_plan.h): the rows of llmc/cuda/buffer_table.def,
// sized by list_buffers, which defines the names their sizes use.
#include "llmc/cuda/memory_plan.h"

#include <algorithm>
#include <cstdint>
#include <fmt/format.h>
#include <stdexcept>

#include "llmc/backend.h"
#include "llmc/cuda/fp8_layout.h"
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

size_t cudnn_deterministic_ds_bytes(const GPT2Config& config, int batch, int seq_len) {
  const size_t padded_t = (size_t(seq_len) + 63) / 64 * 64;
  return size_t(batch) * size_t(config.num_heads) * padded_t * padded_t * 2;
}

size_t cudnn_workspace_estimate(const GPT2Config& config, int batch, int seq_len, CudnnBackward backward) {
  const size_t rows = size_t(batch) * size_t(config.num_heads) * size_t(seq_len);  // B*NH*T
  const size_t head_size = size_t(config.channels / config.num_heads);
  const bool deterministic = backward == CudnnBackward::kDeterministic;
  const size_t engine =
      kCudnnEngineWorkspaceEstimate + (deterministic ? cudnn_deterministic_ds_bytes(config, batch, seq_len) : 0);
  return cudnn_backward_workspace_bytes(engine, rows, head_size, !deterministic);
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
  if (in.fp8 && in.precision != Precision::kBf16)
    throw std::invalid_argument("memory plan: FP8 matmuls (--fp8 1) need the bf16 build");
  if (in.classifier_chunk_rows <= 0)
    throw std::invalid_argument(
        fmt::format("memory plan: classifier chunks of {} rows: wants at least 1 row",
                    in.classifier_chunk_rows));
}

size_t logits_rows(const MemoryPlanInputs& in) {
  const size_t bt = size_t(in.batch) * size_t(in.seq_len);
  return std::min(bt, size_t(in.classifier_chunk_rows));
}

namespace {

// The rows of llmc/cuda/buffer_table.def that hold for `in`, with their sizes. FloatX stands in for
// the build's floatX: any type of its size (uint16_t for bf16, float for fp32).
template <class FloatX>
MemoryPlan list_buffers(const MemoryPlanInputs& in) {
  const GPT2Config& cfg = in.config;
  const size_t L = size_t(cfg.num_layers), C = size_t(cfg.channels), H = mlp_width(cfg), NH = size_t(cfg.num_heads);
  const size_t Vp = size_t(cfg.padded_vocab_size), B = size_t(in.batch), T = size_t(in.seq_len), BT = B * T;
  const size_t padded = in.partition.buffer_size(), owned = in.partition.owned().size();
  const char* param_depends = in.partition.sharded ? "ranks*chunk (padded)" : "parameters";
  const char* owned_depends = in.partition.sharded ? "chunk (ZeRO-1)" : "parameters";
  // The buckets go one after another through one staging buffer of the largest packed bucket (the
  // last layer's 12 slices and lnf: about 12C^2); their pack and unpack spans sit in one table.
  const std::vector<BucketTransfer> transfers =
      in.overlap_buckets ? plan_bucket_transfers(cfg, in.partition) : std::vector<BucketTransfer>{};
  const size_t largest_bucket = largest_staging(transfers);
  size_t bucket_spans = 0;
  for (const BucketTransfer& t : transfers) bucket_spans += t.pack.size() + t.unpack.size();
  // -r 2 recomputes ln1/ln2 into one slot; -r 1 and 2 recompute the GELU into one slot, as the
  // backward's GELU kernel writes it with LLMC_FP8_GELU=epilogue.
  const bool gelu_by_backward = in.fp8 && in.fp8_gelu_epilogue;
  const size_t ln_slots = in.recompute >= 2 ? 1 : L, gelu_slots = in.recompute >= 1 || gelu_by_backward ? 1 : L;
  const char* ln_depends = in.recompute >= 2 ? "B*T*C (-r 2)" : "L*B*T*C";
  const char* gelu_depends = in.recompute >= 1 ? "B*T*4C (-r >= 1)"
                             : gelu_by_backward ? "B*T*4C (LLMC_FP8_GELU)"
                                                : "L*B*T*4C";
  // One chunk of rows of logits at a time.
  const size_t chunk_rows = logits_rows(in);
  const char* logits_depends = chunk_rows < BT ? "chunk*Vp" : "B*T*Vp";
  const size_t scores = B * NH * T * T;  // one layer's attention matrix (fallback)
  const Fp8Layout fp8(cfg, fp8_linears(cfg, in.fp8_lm_head));
  // The FP8 operand buffer: B*T rows of the layers' widest operand, or with the LM head in FP8 a
  // chunk of d(logits)' rows where that is more.
  const bool fp8_head = in.fp8_lm_head;
  const size_t fp8_operand = std::max(BT * fp8.operand_width(), fp8_head ? chunk_rows * Vp : 0);
  const char* fp8_operand_depends = fp8_head && chunk_rows * Vp > BT * fp8.operand_width()
                                        ? "chunk*Vp (LLMC_FP8_LM_HEAD)"
                                        : "B*T*4C (the widest)";
  // The LayerNorm and bias gradients take turns in one fp32 scratch, the larger of the two needs.
  const size_t partial_sums = std::max(layernorm_backward_scratch_floats(cfg.channels),
                                       matmul_bias_grad_scratch_floats(int(BT), int(H)));
  const size_t cudnn_bytes = in.cudnn_workspace_bytes > 0
                                 ? in.cudnn_workspace_bytes
                                 : cudnn_workspace_estimate(cfg, in.batch, in.seq_len, in.cudnn_backward);
  const char* cudnn_depends = in.cudnn_workspace_bytes > 0                           ? "cuDNN's answer"
                              : in.cudnn_backward == CudnnBackward::kDeterministic ? "B*NH*T*T (estimate)"
                                                                                    : "B*T*C (estimate)";

  BufferFacts plan_facts;
  plan_facts.bf16 = in.precision == Precision::kBf16;
  plan_facts.host_staging = in.host_staging;
  plan_facts.overlap_buckets = in.overlap_buckets;
  plan_facts.cudnn = in.attention == AttentionKind::kCudnn;
  plan_facts.fp8 = in.fp8;
  plan_facts.fp8_lm_head = in.fp8_lm_head;
  MemoryPlan plan;
#define LLMC_BUFFER(id, field, element, when, name, elements, depends_on) \
  if (plan_facts.satisfy(BufferCondition::when))                          \
    plan.buffers.push_back({BufferId::id, name, elements, sizeof(element), depends_on});
#include "llmc/cuda/buffer_table.def"
  return plan;
}

}  // namespace

MemoryPlan plan_memory(const MemoryPlanInputs& in) {
  check_plan_inputs(in);
  return in.precision == Precision::kBf16 ? list_buffers<uint16_t>(in) : list_buffers<float>(in);
}

void take_speed_switches(MemoryPlanInputs& in, const SpeedSwitches& speed) {
  in.cudnn_backward = speed.cudnn_backward;
  in.fp8_lm_head = speed.fp8_lm_head == Fp8LmHead::kOn;
  in.fp8_gelu_epilogue = speed.fp8_gelu == Fp8Gelu::kEpilogue;
}

}  // namespace llmc
