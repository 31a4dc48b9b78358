// The CUDA backend's device buffers and the one sequence that allocates them, over a
// PlannedAllocator (llmc/cuda/planned_allocator.h): sizes come from the memory plan, the element
// types and which buffers exist from the backend's own use of them. A template over the floatX type
// in plain C++, so that the unit tests run the very sequence the backend runs (FloatX = uint16_t for
// bf16, float for fp32) with a recording allocator and compare it with the plan.
#pragma once
#include "llmc/cuda/attention_scratch.h"
#include "llmc/cuda/memory_plan.h"
#include "llmc/cuda/planned_allocator.h"
#include "llmc/dist/gradient_buckets.h"

namespace llmc {

// Parameters and optimizer state are each one contiguous buffer in checkpoint order; master, m and
// v hold only the owned range (element owned.begin is their element 0). Per-layer activations are
// L consecutive slots of B*T rows (fewer slots where -r recomputes them).
template <class FloatX>
struct BackendBuffers {
  FloatX* params = nullptr;
  float* master = nullptr;  // fp32 master weights (bf16 build; in fp32 the parameters are the master)
  FloatX* grads = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  float* staging_dev = nullptr;  // fp32 copy of the padded buffers for collectives through host memory
  FloatX* bucket_staging = nullptr;  // --overlap over NCCL: the packed messages of one gradient bucket
  CopySpan* bucket_span_table = nullptr;  // every bucket's pack spans, then its unpack spans
  FloatX* residual = nullptr;    // (L+1) slots x C
  FloatX* ln1 = nullptr;         // L slots (1 with recompute 2) x C
  FloatX* ln2 = nullptr;         // likewise
  float *ln1_mean = nullptr, *ln1_rstd = nullptr, *ln2_mean = nullptr, *ln2_rstd = nullptr;  // L slots x 1
  float *lnf_mean = nullptr, *lnf_rstd = nullptr;
  FloatX* qkv = nullptr;       // L slots x 3C
  FloatX* atty = nullptr;      // L slots x C
  FloatX* res2 = nullptr;      // L slots x C
  FloatX* fch = nullptr;       // L slots x 4C: the pre-GELU
  FloatX* fch_gelu = nullptr;  // L slots (1 with recompute >= 1) x 4C
  FloatX* branch = nullptr;    // B*T x C: attproj and fcproj outputs, consumed at once
  FloatX* lnf = nullptr;       // B*T x C
  FloatX* logits = nullptr;    // B*T x Vp, then their gradient
  float* losses = nullptr;     // B*T
  float* att_stats = nullptr;  // cuDNN: L slots x NH log-sum-exp rows
  FloatX* att = nullptr;       // fallback: L slots x NH x T probabilities
  AttentionScratch<FloatX> att_buffers{};
  // Backward: dres is the gradient of the residual stream; d_ln and d_big are reused per layer.
  FloatX* dres = nullptr;    // B*T x C
  FloatX* d_ln = nullptr;    // B*T x C
  FloatX* d_big = nullptr;   // B*T x 4C (the fc pre-activation gradient, then dqkv)
  float* scratch = nullptr;  // fp32 partial sums of the LayerNorm and bias gradients (never both at once)
  float* scalars = nullptr;  // kScalarSlots scalars, then the global norm's partial sums
  int* tokens_dev = nullptr;   // inputs (B*T) then targets (B*T)
  int* buckets_dev = nullptr;  // encoder backward buckets, up to 3*B*T + 1 ints
  void* blas_workspace = nullptr;
  void* cudnn_workspace = nullptr;
};

// Allocates every buffer the backend uses, in the plan's order, then checks that the plan lists
// nothing more. Which buffers exist is decided here from what the backend does (a master copy only
// when FloatX is 2 bytes, the attention kind's buffers), apart from the plan's own decision, so a
// disagreement throws std::logic_error; the staging buffers follow the plan (their conditions involve
// the ranks, NCCL and --overlap, which the plan's caller knows).
template <class FloatX>
void allocate_backend_buffers(PlannedAllocator& a, BackendBuffers<FloatX>& b, AttentionKind attention) {
  using F = float;
  b.params = a.take<FloatX>(BufferId::kParams);
  if (sizeof(FloatX) == 2) b.master = a.take<F>(BufferId::kMaster);
  b.grads = a.take<FloatX>(BufferId::kGrads);
  b.m = a.take<F>(BufferId::kAdamM);
  b.v = a.take<F>(BufferId::kAdamV);
  if (a.plan().find(BufferId::kStaging) != nullptr) b.staging_dev = a.take<F>(BufferId::kStaging);
  if (a.plan().find(BufferId::kBucketStaging) != nullptr) {
    b.bucket_staging = a.take<FloatX>(BufferId::kBucketStaging);
    b.bucket_span_table = a.take<CopySpan>(BufferId::kBucketSpans);
  }
  b.residual = a.take<FloatX>(BufferId::kResidual);
  b.ln1 = a.take<FloatX>(BufferId::kLn1);
  b.ln2 = a.take<FloatX>(BufferId::kLn2);
  b.ln1_mean = a.take<F>(BufferId::kLn1Mean);
  b.ln1_rstd = a.take<F>(BufferId::kLn1Rstd);
  b.ln2_mean = a.take<F>(BufferId::kLn2Mean);
  b.ln2_rstd = a.take<F>(BufferId::kLn2Rstd);
  b.lnf_mean = a.take<F>(BufferId::kLnfMean);
  b.lnf_rstd = a.take<F>(BufferId::kLnfRstd);
  b.qkv = a.take<FloatX>(BufferId::kQkv);
  b.atty = a.take<FloatX>(BufferId::kAtty);
  b.res2 = a.take<FloatX>(BufferId::kRes2);
  b.fch = a.take<FloatX>(BufferId::kFch);
  b.fch_gelu = a.take<FloatX>(BufferId::kFchGelu);
  b.branch = a.take<FloatX>(BufferId::kBranch);
  b.lnf = a.take<FloatX>(BufferId::kLnf);
  b.logits = a.take<FloatX>(BufferId::kLogits);
  b.losses = a.take<F>(BufferId::kLosses);
  if (attention == AttentionKind::kCudnn) {
    b.att_stats = a.take<F>(BufferId::kAttStats);
  } else {
    b.att = a.take<FloatX>(BufferId::kAttProbs);
    b.att_buffers.q = a.take<FloatX>(BufferId::kAttQ);
    b.att_buffers.k = a.take<FloatX>(BufferId::kAttK);
    b.att_buffers.v = a.take<FloatX>(BufferId::kAttV);
    b.att_buffers.vaccum = a.take<FloatX>(BufferId::kAttVaccum);
    b.att_buffers.dq = a.take<FloatX>(BufferId::kAttDq);
    b.att_buffers.dk = a.take<FloatX>(BufferId::kAttDk);
    b.att_buffers.dv = a.take<FloatX>(BufferId::kAttDv);
    b.att_buffers.scratch = a.take<FloatX>(BufferId::kAttScores);
  }
  b.dres = a.take<FloatX>(BufferId::kDres);
  b.d_ln = a.take<FloatX>(BufferId::kDln);
  b.d_big = a.take<FloatX>(BufferId::kDbig);
  b.scratch = a.take<F>(BufferId::kScratch);
  b.scalars = a.take<F>(BufferId::kScalars);
  b.tokens_dev = a.take<int>(BufferId::kTokens);
  b.buckets_dev = a.take<int>(BufferId::kBuckets);
  b.blas_workspace = a.take<unsigned char>(BufferId::kBlasWorkspace);
  if (attention == AttentionKind::kCudnn) b.cudnn_workspace = a.take<unsigned char>(BufferId::kCudnnWorkspace);
  a.check_all_taken();
}

}  // namespace llmc
