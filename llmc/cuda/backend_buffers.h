// The CUDA backend's device buffers and the one sequence that allocates them, over a
// PlannedAllocator (llmc/cuda/planned_allocator.h), both expanded from the rows of
// llmc/cuda/buffer_table.def: sizes come from the memory plan, element types and conditions from the
// rows. A template over the floatX type in plain C++, so that the unit tests run the very sequence
// the backend runs (FloatX = uint16_t for bf16, float for fp32) with a recording allocator and
// compare it with the plan.
#pragma once
#include "llmc/cuda/attention_scratch.h"
#include "llmc/cuda/memory_plan.h"
#include "llmc/cuda/planned_allocator.h"
#include "llmc/dist/gradient_buckets.h"

namespace llmc {

// A pointer per LLMC_BUFFER row, null where this rank does not allocate it; the fallback
// attention's scratch (the LLMC_ATTENTION_SCRATCH rows) in att_buffers.
template <class FloatX>
struct BackendBuffers {
#define LLMC_BUFFER(id, field, element, ...) element* field = nullptr;
#define LLMC_ATTENTION_SCRATCH(...)
#include "llmc/cuda/buffer_table.def"
  AttentionScratch<FloatX> att_buffers{};
};

// Allocates every buffer the backend uses, in the plan's order, then checks that the plan lists
// nothing more. Which buffers exist is decided here from what the backend is (a master copy only
// when FloatX is 2 bytes, the attention kind's buffers, FP8's), apart from the plan's own decision, so a
// disagreement throws std::logic_error; the staging buffers follow the plan (their conditions involve
// the ranks, NCCL and --overlap, which the plan's caller knows).
template <class FloatX>
void allocate_backend_buffers(PlannedAllocator& a, BackendBuffers<FloatX>& b, AttentionKind attention, bool fp8,
                              bool fp8_lm_head) {
  BufferFacts backend_facts;
  backend_facts.bf16 = sizeof(FloatX) == 2;
  backend_facts.host_staging = a.plan().find(BufferId::kStaging) != nullptr;
  backend_facts.overlap_buckets = a.plan().find(BufferId::kBucketStaging) != nullptr;
  backend_facts.cudnn = attention == AttentionKind::kCudnn;
  backend_facts.fp8 = fp8;
  backend_facts.fp8_lm_head = fp8_lm_head;
#define LLMC_BUFFER(id, field, element, when, ...) \
  if (backend_facts.satisfy(BufferCondition::when)) b.field = a.take<element>(BufferId::id);
#define LLMC_ATTENTION_SCRATCH(id, field, element, when, ...) \
  if (backend_facts.satisfy(BufferCondition::when)) b.att_buffers.field = a.take<element>(BufferId::id);
#include "llmc/cuda/buffer_table.def"
  a.check_all_taken();
}

}  // namespace llmc
