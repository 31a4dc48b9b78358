// The CUDA backend's memory plan: every device buffer one rank allocates, worked out on the host
// before anything is allocated (plain C++, no CUDA headers, so a dry run and the unit tests need no
// GPU). The backend allocates exactly these buffers with these sizes (llmc/cuda/backend_buffers.h),
// so the plan and the allocations cannot drift apart; only cuDNN's workspace may grow later, for a
// shape cuDNN asks more for (PlannedAllocator::regrow). What each buffer holds: docs/cuda-trainer.md.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "llmc/cuda/speed_switches.h"
#include "llmc/dist/zero_sharding.h"
#include "llmc/gpt2.h"

namespace llmc {

enum class AttentionKind {
  kCudnn,     // cuDNN flash attention (bf16 builds only)
  kFallback,  // llmc/cuda/attention.cuh: explicit T x T scores, exact; the only kind in the FP32 build
};

// The build's precision: bf16 keeps parameters, gradients and activations in bf16 and adds fp32
// master weights; fp32 (PRECISION=FP32) keeps everything in fp32 and has no master copy.
enum class Precision { kBf16, kFp32 };

// Every device buffer of the backend, in allocation order (llmc/cuda/buffer_table.def).
enum class BufferId {
#define LLMC_BUFFER(id, ...) id,
#include "llmc/cuda/buffer_table.def"
};

// When a rank allocates a buffer (the table's `when` column).
enum class BufferCondition { kAlways, kBf16, kHostStaging, kOverlapBuckets, kCudnn, kFallback, kFp8, kFp8LmHead };

// What the conditions test. The plan takes these facts from its inputs; the backend's allocation
// sequence takes the precision and the attention kind from its own build and options instead, so
// that a plan made for another one is caught (llmc/cuda/backend_buffers.h).
struct BufferFacts {
  bool bf16 = false;             // bf16 parameters with fp32 master weights
  bool host_staging = false;     // MemoryPlanInputs::host_staging
  bool overlap_buckets = false;  // MemoryPlanInputs::overlap_buckets
  bool cudnn = false;            // cuDNN attention, else the fallback
  bool fp8 = false;              // FP8 matmuls (--fp8 1)
  bool fp8_lm_head = false;      // and the LM head's (LLMC_FP8_LM_HEAD=on)

  bool satisfy(BufferCondition condition) const {
    switch (condition) {
      case BufferCondition::kAlways: return true;
      case BufferCondition::kBf16: return bf16;
      case BufferCondition::kHostStaging: return host_staging;
      case BufferCondition::kOverlapBuckets: return overlap_buckets;
      case BufferCondition::kCudnn: return cudnn;
      case BufferCondition::kFallback: return !cudnn;
      case BufferCondition::kFp8: return fp8;
      case BufferCondition::kFp8LmHead: return fp8 && fp8_lm_head;
    }
    return false;
  }
};

// 32 MiB: what cuBLASLt's Hopper kernels ask for at GPT-2 shapes (shared with cuBLAS proper).
constexpr size_t kBlasWorkspaceBytes = size_t(32) << 20;
// The backend's fp32 scalars before the global norm's partial sums: the step's loss accumulator,
// the squared norm, two spare.
constexpr size_t kScalarSlots = 4;
// The part of cuDNN's attention workspace the engine itself asks for, which only the GPU can tell
// (CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE): the fused flash-attention engines ask for little or
// nothing beyond the fp32 dQ accumulator and row sums that llmc/cuda/cudnn_attention.cu adds; 16 MiB
// is the allowance the plan makes for it until a GPU run measures it (the start-up line prints the
// planned and the allocated MiB).
constexpr size_t kCudnnEngineWorkspaceEstimate = size_t(16) << 20;

// The floats of one layer's slice of the cuDNN attention statistics (one fp32 log-sum-exp per row
// of B*T*NH): B*T*NH rounded up to a multiple of 4, so that every layer's slice starts 16 bytes
// aligned, as its cuDNN tensor descriptor declares (CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT), even when
// B*T*NH is odd (d48 has NH=25). The buffer holds L such slices.
constexpr size_t att_stats_layer_floats(size_t bt, size_t num_heads) { return (bt * num_heads + 3) / 4 * 4; }

// The classifier's rows per chunk (llmc/cuda/forward_backward.cu): d12 at B=64 T=1024 runs
// four chunks through a logits buffer of a quarter of B*T*Vp. Each chunk's GEMMs keep 16,384 rows
// (the M of the logits and input-gradient GEMMs, the K of wte's gradient), and the read and write
// of wte's gradient that each chunk adds (4 Vp C bytes in bf16) come with
// 2 * 16384 * C * Vp FLOPs of that GEMM: a byte per 8,192 FLOPs, where a GPU's memory feeds a few
// hundred, so that GEMM stays bound by its arithmetic.
constexpr int kClassifierChunkRows = 16384;

// What one rank runs: the model, the batch it is allocated for, recompute, ZeRO, precision,
// attention and how the collectives travel.
struct MemoryPlanInputs {
  GPT2Config config;
  int batch = 4;     // B (-b)
  int seq_len = 64;  // T (-t)
  int recompute = 1;  // -r 0/1/2
  Precision precision = Precision::kBf16;
  AttentionKind attention = AttentionKind::kCudnn;
  // The optimizer state this rank keeps (-z): unsharded, or a ZeRO-1 chunk with padded buffers.
  OptimizerPartition partition;
  // The collectives stage through a device fp32 buffer (the MPI path: ranks sharing a GPU, or -z 1
  // on one rank without NCCL) instead of running over NCCL on the bf16 buffers.
  bool host_staging = false;
  // The gradient sums overlap the backward pass over NCCL (--overlap with several ranks): a
  // staging buffer of the largest packed gradient bucket and the buckets' span table
  // (llmc/dist/gradient_buckets.h).
  bool overlap_buckets = false;
  // cuDNN's real workspace bytes once the GPU has told them; 0 = the estimate
  // (cudnn_workspace_estimate).
  size_t cudnn_workspace_bytes = 0;
  // cuDNN's attention backward graph (LLMC_CUDNN_BACKWARD), on which its workspace depends.
  CudnnBackward cudnn_backward = CudnnBackward::kDefault;
  // FP8 matmuls (--fp8 1): the weights' FP8 copies, an FP8 operand buffer and the scaling state.
  bool fp8 = false;
  // With fp8, the LM head's GEMMs in FP8 too (LLMC_FP8_LM_HEAD=on): lnf's FP8 copy, and the operand
  // buffer holds a chunk of d(logits)' rows.
  bool fp8_lm_head = false;
  // With fp8, the GELU's bf16 output written by the backward, a layer at a time
  // (LLMC_FP8_GELU=epilogue): one layer's slot, as at -r >= 1.
  bool fp8_gelu_epilogue = false;
  // The classifier's rows per chunk: the logits buffer holds at most this many of the B*T rows.
  int classifier_chunk_rows = kClassifierChunkRows;
};

// The rows of logits the buffer holds: B*T, at most classifier_chunk_rows; the backend runs the
// classifier in chunks of this many rows.
size_t logits_rows(const MemoryPlanInputs& inputs);

// Rank 0's inputs for -z `zero_stage` over `ranks` ranks (rank 0's chunk is the largest, so its
// plan is every rank's upper bound); host_staging as the trainer picks it with one GPU per rank:
// NCCL for several ranks, the staging buffer for -z 1 on one rank; overlap_buckets as the loop
// decides it from --overlap (`overlap`): only several ranks have sums to overlap.
MemoryPlanInputs inputs_for_ranks(const GPT2Config& config, int batch, int seq_len, int recompute, int zero_stage,
                                  int ranks, bool overlap, Precision precision, AttentionKind attention);

// cuDNN's workspace at (B, T) for `config` before the GPU is asked: the backward's need, which
// covers the forward's (training and B=1 sampling: the engine's part alone). It is the engine's
// part (the estimate above) plus the fp32 dQ accumulator (B*NH*T*HS floats) and row sums
// (B*NH*T floats) that cudnn_attention.cu places after it, each start rounded up to 256 bytes.
// The deterministic graph has no accumulator; its engine part adds a bf16 dS of B*NH*T*T with T
// rounded up to 64 (cudnn_deterministic_ds_bytes).
size_t cudnn_workspace_estimate(const GPT2Config& config, int batch, int seq_len, CudnnBackward backward);
// The dS buffer cuDNN's deterministic attention backward keeps in its engine workspace: B*NH*T'*T'
// bf16 values, T' = T rounded up to 64 (cudnn-frontend 1.23's required_dp_workspace_bytes for this
// graph, node/scaled_dot_product_flash_attention.h).
size_t cudnn_deterministic_ds_bytes(const GPT2Config& config, int batch, int seq_len);

struct PlannedBuffer {
  BufferId id;
  const char* name;
  size_t elements;
  size_t element_bytes;
  const char* depends_on;  // what its size scales with, e.g. "L*B*T*4C"
  size_t bytes() const { return elements * element_bytes; }
};

// Nothing else is allocated on the device for the run's lifetime, nor for a moment, apart from
// NCCL's own memory and its 8-byte scalar (the budget's NCCL reserve, llmc/cuda/memory_fit.h):
// loading the parameters stages them through the logits buffer (CudaBackend::set_parameters), and
// a cuDNN workspace that grows releases the old one first.
struct MemoryPlan {
  std::vector<PlannedBuffer> buffers;  // what the backend allocates and keeps, in allocation order

  // The planned buffer `id`, or null when this configuration does not allocate it.
  const PlannedBuffer* find(BufferId id) const;
  size_t total_bytes() const;  // what CudaBackend::device_bytes() reports until a workspace grows
};

// Throws std::invalid_argument for inputs the backend rejects (non-positive B or T, T above
// max_seq_len, recompute outside 0..2, cuDNN attention or FP8 in fp32, a classifier chunk of no
// rows); the backend checks them so too.
void check_plan_inputs(const MemoryPlanInputs& inputs);
// Checks the inputs (check_plan_inputs), then lists the buffers.
MemoryPlan plan_memory(const MemoryPlanInputs& inputs);
// The speed switches the plan depends on (cuDNN's backward graph, the FP8 LM head and GELU
// epilogue), into `inputs`: the backend's plan and --dry-run's take them alike.
void take_speed_switches(MemoryPlanInputs& inputs, const SpeedSwitches& speed);

const char* attention_kind_name(AttentionKind kind);
const char* precision_name(Precision precision);

}  // namespace llmc
