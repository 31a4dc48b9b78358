// Fit checks and advice for the CUDA memory plan (llmc/cuda/memory_fit.h).
#include "llmc/cuda/memory_fit.h"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>
#include <vector>

#include "llmc/backend.h"

namespace llmc {

namespace {

constexpr double kMiB = 1024.0 * 1024.0, kGiB = kMiB * 1024.0;

MemoryBudget budget_after_reserve(size_t memory, const std::string& what, size_t reserve, const std::string& reserved_for) {
  MemoryBudget b;
  b.available = memory > reserve ? memory - reserve : 0;
  b.source = fmt::format("{} {} less {} for {}", what, format_bytes(memory), format_bytes(reserve), reserved_for);
  return b;
}

// The same run with B, -r or the ZeRO partition changed. A changed B drops cuDNN's measured
// workspace for the estimate at the new shape.
MemoryPlanInputs with_batch(MemoryPlanInputs in, int batch) {
  if (batch != in.batch) in.cudnn_workspace_bytes = 0;
  in.batch = batch;
  return in;
}
MemoryPlanInputs with_recompute(MemoryPlanInputs in, int recompute) {
  in.recompute = recompute;
  return in;
}
// ZeRO-1 over `ranks` ranks, rank 0's chunk (the largest); several ranks talk over NCCL.
MemoryPlanInputs with_zero1(MemoryPlanInputs in, int ranks) {
  in.partition = optimizer_partition(in.partition.num_elements(), 1, ranks, 0);
  return in;
}

size_t needs(const MemoryPlanInputs& in) { return plan_memory(in).total_bytes(); }

// The largest B in 1..in.batch whose plan fits, or 0 when not even B=1 does. The peak grows with B.
int largest_batch(const MemoryPlanInputs& in, size_t available) {
  int lo = 0, hi = in.batch;  // lo fits (0: nothing known to), every B above hi is not tried
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (needs(with_batch(in, mid)) <= available)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// One line of advice for an alternative run: what it needs, what it saves against `needed`, and
// whether it fits (else the largest -b that does with it).
std::string alternative(const char* what, const MemoryPlanInputs& alt, size_t needed, size_t available) {
  const size_t alt_peak = needs(alt);
  const std::string saving = alt_peak < needed ? fmt::format("saves {}", format_bytes(needed - alt_peak))
                                               : std::string("saves nothing");
  if (alt_peak <= available)
    return fmt::format("  {}: {}, needs {}: fits\n", what, saving, format_bytes(alt_peak));
  const int b = largest_batch(alt, available);
  return fmt::format("  {}: {}, needs {}: does not fit either{}\n", what, saving, format_bytes(alt_peak),
                     b > 0 ? fmt::format("; with it the largest -b that fits is {}", b) : std::string());
}

}  // namespace

MemoryBudget budget_from_device_memory(size_t device_memory, bool nccl_pending) {
  const size_t reserve = kContextReserveBytes + (nccl_pending ? kNcclReserveBytes : 0);
  return budget_after_reserve(device_memory, "--device-memory", reserve,
                              nccl_pending ? "the CUDA context, cuBLAS, cuDNN and NCCL" : "the CUDA context, cuBLAS and cuDNN");
}

MemoryBudget budget_from_free_memory(size_t free_bytes, bool nccl_pending) {
  const size_t reserve = kLibraryReserveBytes + (nccl_pending ? kNcclReserveBytes : 0);
  return budget_after_reserve(free_bytes, "the GPU's free", reserve,
                              nccl_pending ? "library kernels and NCCL" : "library kernels");
}

MemoryBudget tighter(const MemoryBudget& a, const MemoryBudget& b) { return b.available < a.available ? b : a; }

std::string format_bytes(size_t bytes) {
  const double b = double(bytes);
  return b < 10.0 * kGiB ? fmt::format("{:.1f} MiB", b / kMiB) : fmt::format("{:.2f} GiB", b / kGiB);
}

std::string describe_plan(const MemoryPlanInputs& in, const MemoryPlan& plan, int ranks) {
  const OptimizerPartition& p = in.partition;
  const size_t chunk_rows = logits_rows(in);
  std::string text = fmt::format(
      "memory plan per rank: {}, {} parameters; B={} T={} -r {} -z {} over {} rank{}; {}, {} attention{}{}\n",
      describe_shape(in.config), p.num_elements(), in.batch, in.seq_len, in.recompute, p.sharded ? 1 : 0, ranks,
      ranks == 1 ? "" : "s", precision_name(in.precision), attention_kind_name(in.attention),
      in.host_staging ? ", collectives staged through host memory" : "",
      chunk_rows < size_t(in.batch) * size_t(in.seq_len) ? fmt::format(", logits in chunks of {} rows", chunk_rows)
                                                         : std::string());
  text += fmt::format("  {:<28} {:>14} {:>3} {:>12}  {}\n", "buffer", "elements", "B", "MiB", "scales with");
  const auto row = [&](const PlannedBuffer& b) {
    text += fmt::format("  {:<28} {:>14} {:>3} {:>12.1f}  {}\n", b.name, b.elements, b.element_bytes,
                        double(b.bytes()) / kMiB, b.depends_on);
  };
  for (const PlannedBuffer& b : plan.buffers) row(b);
  text += fmt::format("  {:<28} {:>14} {:>3} {:>12.1f}  ({})\n", "total", "", "", double(plan.total_bytes()) / kMiB,
                      format_bytes(plan.total_bytes()));
  return text;
}

std::string fit_report(const MemoryPlanInputs& in, const MemoryPlan& plan, int ranks, const MemoryBudget& budget) {
  const size_t needed = plan.total_bytes(), available = budget.available;
  const std::string figures = fmt::format("needs {} per rank, {} available ({})", format_bytes(needed),
                                          format_bytes(available), budget.source);
  if (needed <= available)
    return fmt::format("fits: {}; {} to spare\n", figures, format_bytes(available - needed));

  std::string text = fmt::format("does not fit: {}; {} short\n", figures, format_bytes(needed - available));
  std::vector<PlannedBuffer> biggest = plan.buffers;
  std::sort(biggest.begin(), biggest.end(),
            [](const PlannedBuffer& a, const PlannedBuffer& b) { return a.bytes() > b.bytes(); });
  biggest.resize(std::min<size_t>(biggest.size(), 4));
  text += "  biggest buffers:";
  for (size_t i = 0; i < biggest.size(); ++i)
    text += fmt::format("{} {} {}", i == 0 ? "" : ",", biggest[i].name, format_bytes(biggest[i].bytes()));
  text += "\n";
  const int b = largest_batch(in, available);
  text += b > 0 ? fmt::format("  largest -b that fits: {} (asked -b {}; -d keeps the tokens per step by accumulating)\n",
                              b, in.batch)
                : std::string("  not even -b 1 fits\n");
  if (in.recompute < 2) text += alternative("-r 2", with_recompute(in, 2), needed, available);
  if (!in.partition.sharded) {
    if (ranks > 1) {
      text += alternative("-z 1", with_zero1(in, ranks), needed, available);
      if (in.recompute < 2) text += alternative("-r 2 -z 1", with_zero1(with_recompute(in, 2), ranks), needed, available);
    } else {
      text += "  -z 1: no help with one rank (nothing to shard the optimizer state over)\n";
    }
  }
  return text;
}

int least_recompute_that_fits(const MemoryPlanInputs& in, const MemoryBudget& budget, int most) {
  for (int r = 0; r < most; ++r)
    if (plan_memory(with_recompute(in, r)).total_bytes() <= budget.available) return r;
  return most;
}

void check_memory_fits(const MemoryPlanInputs& in, const MemoryPlan& plan, int ranks, const MemoryBudget& budget) {
  if (plan.total_bytes() <= budget.available) return;
  throw std::runtime_error(fmt::format(
      "not enough GPU memory for B={} T={} -r {} -z {} over {} rank(s) ({}, {} attention); stopped before "
      "allocating: {}  (./train_gpt2cu --dry-run {} with the same flags prints the whole plan)",
      in.batch, in.seq_len, in.recompute, in.partition.sharded ? 1 : 0, ranks, precision_name(in.precision),
      attention_kind_name(in.attention), fit_report(in, plan, ranks, budget), ranks));
}

}  // namespace llmc
