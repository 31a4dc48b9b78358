// Whether a memory plan (llmc/cuda/memory_plan.h) fits a GPU, and what to change when it does not:
// the largest -b that fits, and what -r 2 and -z 1 would save. Used by the dry run
// (train_gpt2cu --dry-run N) and by CudaBackend before its first allocation, so both give the same
// figures and the same advice. Plain C++.
#pragma once
#include <cstddef>
#include <string>

#include "llmc/cuda/memory_plan.h"

namespace llmc {

// Device memory the plan cannot have, beside its own buffers (estimates: no GPU has measured them
// yet; test_gpt2cu prints the drop in free memory a backend causes):
// - planning against a card's total memory (--device-memory): the CUDA context with its lazily
//   loaded kernels (about 0.5 GiB on Hopper), the cuBLAS/cuBLASLt and cuDNN handles and the
//   kernels they load (about 0.3 GiB), and allocator granularity: 1 GiB;
constexpr size_t kContextReserveBytes = size_t(1) << 30;
// - planning against free memory asked once the context exists: the library kernels loaded at
//   first use and allocator granularity: 256 MiB;
constexpr size_t kLibraryReserveBytes = size_t(256) << 20;
// - either way, when NCCL is still to start (several ranks): its communicator's buffers (4 MiB
//   per channel and peer by default): 512 MiB.
constexpr size_t kNcclReserveBytes = size_t(512) << 20;

// The memory a plan's peak must fit in, and where the figure comes from.
struct MemoryBudget {
  size_t available = 0;
  std::string source;  // e.g. "--device-memory 40.00 GiB less 1536.0 MiB for the CUDA context, ..."
};

// A card of `device_memory` bytes in all (--device-memory), with nothing allocated yet.
MemoryBudget budget_from_device_memory(size_t device_memory, bool nccl_pending);
// `free_bytes` as cudaMemGetInfo reported it, with the CUDA context already created.
MemoryBudget budget_from_free_memory(size_t free_bytes, bool nccl_pending);
// The smaller of the two.
MemoryBudget tighter(const MemoryBudget& a, const MemoryBudget& b);

// "1234.5 MiB" for sizes below 10 GiB, "12.34 GiB" above.
std::string format_bytes(size_t bytes);

// The plan as a table (one row per buffer: elements, bytes per element, MiB, what it scales with),
// and its total, after a header line naming the run (`ranks` ranks).
std::string describe_plan(const MemoryPlanInputs& inputs, const MemoryPlan& plan, int ranks);

// "fits: ..." with the margin, or "does not fit: ..." with the figures (needed vs available), the
// biggest buffers, the largest -b that fits and what -r 2 and -z 1 would save and whether they
// fit. `ranks` is the number of ranks, for -z 1.
std::string fit_report(const MemoryPlanInputs& inputs, const MemoryPlan& plan, int ranks, const MemoryBudget& budget);

// -r auto: the least recompute in 0..most whose plan fits `budget`; `most` when none does (the fit
// check then says what would).
int least_recompute_that_fits(const MemoryPlanInputs& inputs, const MemoryBudget& budget, int most);

// Throws std::runtime_error naming the run, with fit_report's text, when plan.total_bytes() >
// budget.available.
void check_memory_fits(const MemoryPlanInputs& inputs, const MemoryPlan& plan, int ranks, const MemoryBudget& budget);

}  // namespace llmc
