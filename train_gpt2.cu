// The CUDA trainer: the shared training loop (llmc/train/trainer.h, entered through trainer_main.h)
// driving the GPU backend, one GPU per rank under mpirun/srun (or one process). Flags:
// ./train_gpt2cu --help; semantics: docs/training.md; backend: docs/cuda-trainer.md; ranks: docs/multi-gpu.md.
// LLMC_ATTENTION=fallback selects the plain attention kernels instead of cuDNN's (bf16 build); unset,
// a cuDNN that rejects the attention graph at start-up gives the plain kernels too, with one line.
// The speed switches (LLMC_GELU and the others of llmc/cuda/speed_switches.def) choose how a step is
// computed; the `cuda:` line prints them. llm.c's -ge sets LLMC_GELU and -f is checked against the
// build (llmc/train/gpu_flags.h). LLMC_PROFILE=on times every kernel, GEMM and cuDNN call of
// the training steps after the first with CUDA events and prints a `profile:` table at the end
// (rank 0; llmc/cuda/launch_profile.h).
// LLMC_COMMUNICATOR=nccl|mpi forces the gradient/parameter collectives onto NCCL (also for one
// rank) or onto MPI with host staging; by default NCCL is used when there are several ranks and
// each has a GPU of its own, MPI when ranks share a GPU (NCCL refuses that) or when the build has no
// NCCL (NO_MULTI_GPU=1).
// LLMC_PEAK_TFLOPS=<dense TFLOP/s> sets the peak the step line's MFU is counted against, for a GPU
// that llmc/mfu.h's table does not know (no MFU is shown then) or for the FP32 build.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "llmc/cuda/cuda_backend.h"
#include "llmc/cuda/launch_profile.h"
#include "llmc/cuda/memory_fit.h"
#include "llmc/cuda/memory_plan.h"
#include "llmc/mfu.h"
#include "llmc/train/gpu_flags.h"
#include "llmc/train/trainer_main.h"

namespace {

// Every rank's "host/GPU uuid", in rank order (one broadcast per rank, at start-up only).
std::vector<std::string> gpu_keys(llmc::Communicator& host, int device) {
  char name[64] = {};
  gethostname(name, sizeof name - 1);
  const std::string mine = fmt::format("{}/{}", name, llmc::cuda_device_uuid(device));
  std::vector<std::string> keys;
  for (int r = 0; r < host.world_size(); ++r) {
    char buffer[160] = {};
    if (r == host.rank()) std::strncpy(buffer, mine.c_str(), sizeof buffer - 1);
    host.broadcast(buffer, sizeof buffer, r);
    keys.emplace_back(buffer);
  }
  return keys;
}

// Whether the ranks talk over NCCL; the same answer on every rank (they all see every key).
bool use_nccl(llmc::Communicator& host, int device) {
  const char* env = std::getenv("LLMC_COMMUNICATOR");
  const std::string choice = env ? env : "";
  if (choice != "" && choice != "nccl" && choice != "mpi")
    throw std::runtime_error(fmt::format("LLMC_COMMUNICATOR: '{}' is neither 'nccl' nor 'mpi'", choice));
  if (choice == "mpi") return false;
  if (!llmc::cuda_build_has_nccl()) {
    if (choice == "nccl")
      throw std::runtime_error("LLMC_COMMUNICATOR=nccl: this train_gpt2cu was built without NCCL (NO_MULTI_GPU=1); "
                               "its ranks sum through host memory (LLMC_COMMUNICATOR=mpi)");
    return false;
  }
  const std::vector<std::string> keys = gpu_keys(host, device);
  for (size_t a = 0; a < keys.size(); ++a)
    for (size_t b = a + 1; b < keys.size(); ++b)
      if (keys[a] == keys[b]) {
        if (choice == "nccl")
          throw std::runtime_error(fmt::format("LLMC_COMMUNICATOR=nccl: ranks {} and {} share GPU {}, and NCCL needs "
                                               "a GPU per rank (use LLMC_COMMUNICATOR=mpi)", a, b, keys[a]));
        return false;
      }
  return choice == "nccl" || host.world_size() > 1;
}

// --dry-run N: rank 0's plan (the largest ZeRO-1 chunk) for this build's precision and attention,
// checked against --device-memory, else the free memory of a GPU if this machine has one. Several
// ranks are planned with one GPU each, talking over NCCL, as the launch scripts run them (through
// host staging in a build without NCCL). -r auto
// is planned as the backend would choose it: the least recompute that fits the budget, or, with no
// budget to fit, none.
std::string dry_run_plan(const llmc::GPT2Config& config, const llmc::TrainOptions& o, int ranks) {
  const bool auto_recompute = o.recompute == llmc::kRecomputeAuto;
  llmc::check_tf32_flag(o, llmc::cuda_precision() == llmc::Precision::kFp32);
  const llmc::SpeedSwitches speed = llmc::cuda_speed_switches(o);
  const int most = llmc::max_recompute(speed);
  llmc::MemoryPlanInputs in =
      llmc::inputs_for_ranks(config, o.batch_size, o.seq_len, auto_recompute ? most : o.recompute, o.zero_stage,
                             ranks, o.overlap, llmc::cuda_precision(), llmc::default_attention_kind());
  llmc::take_speed_switches(in, speed);
  in.fp8 = o.fp8;
  const bool nccl = ranks > 1 && llmc::cuda_build_has_nccl();
  if (ranks > 1 && !nccl) {
    in.host_staging = true;
    in.overlap_buckets = false;
  }
  std::optional<llmc::MemoryBudget> budget;
  if (o.device_memory > 0) budget = llmc::budget_from_device_memory(o.device_memory, nccl);
  else if (const std::optional<size_t> free_bytes = llmc::cuda_free_memory())
    budget = llmc::budget_from_free_memory(*free_bytes, nccl);
  if (auto_recompute) in.recompute = budget ? llmc::least_recompute_that_fits(in, *budget, most) : 0;
  const llmc::MemoryPlan plan = llmc::plan_memory(in);
  const std::string text = (auto_recompute ? fmt::format("-r auto: recompute {}\n", in.recompute) : std::string()) +
                           llmc::describe_plan(in, plan, ranks);
  if (budget) return text + llmc::fit_report(in, plan, ranks, *budget);
  return text + fmt::format("no limit given (no --device-memory, no GPU here): it needs {} per rank; "
                            "--device-memory 80GiB checks it against an 80 GiB card\n",
                            llmc::format_bytes(plan.total_bytes()));
}

}  // namespace

int main(int argc, char** argv) {
  return llmc::trainer_main(argc, argv, [](const llmc::GPT2Config& config, const llmc::TrainOptions& o,
                                           const llmc::BackendPlacement& placement) {
    llmc::CudaBackendOptions options;
    options.max_batch = o.batch_size;
    options.max_seq_len = o.seq_len;
    options.recompute = o.recompute;
    options.attention = llmc::default_attention_kind();
    options.attention_fallback = !llmc::attention_kind_forced();
    llmc::check_tf32_flag(o, llmc::cuda_precision() == llmc::Precision::kFp32);
    options.speed = llmc::cuda_speed_switches(o);
    // Every rank reads LLMC_PROFILE (a bad value stops them all); rank 0 times and prints the table.
    const bool profile = llmc::profile_from_env();
    options.profile = profile && placement.process.rank == 0;
    options.fp8 = o.fp8;
    options.seed = static_cast<unsigned>(o.seed);
    options.device = llmc::cuda_device_for_local_rank(placement.process.local_rank);
    options.world_size = placement.process.world_size;
    options.device_memory = o.device_memory;
    if (use_nccl(*placement.host, options.device)) options.nccl_host = placement.host;
    options.overlap_gradients = placement.overlap_gradients;
    options.optimizer = llmc::find_optimizer(o.optimizer);
    auto backend = std::make_unique<llmc::CudaBackend>(config, options, placement.partition);
    if (placement.process.rank == 0) {
      const int W = placement.process.world_size;
      const double mib = 1024.0 * 1024.0;
      fmt::print("cuda: {} | precision {}{} | attention {} | {} | recompute {} | {:.1f} MiB planned, {:.1f} MiB "
                 "allocated | {}\n",
                 llmc::cuda_device_description(), llmc::cuda_precision_name(), o.fp8 ? ", FP8 matmuls" : "",
                 llmc::attention_kind_name(backend->attention()), llmc::speed_switches_summary(options.speed),
                 o.recompute == llmc::kRecomputeAuto ? fmt::format("{} (auto)", backend->recompute())
                                                     : std::to_string(backend->recompute()),
                 double(backend->planned_bytes()) / mib, double(backend->device_bytes()) / mib,
                 options.nccl_host ? fmt::format("{} rank(s) over NCCL", W)
                 : W > 1           ? fmt::format("{} ranks over {}, staged through host memory", W,
                                                 o.init_method == "mpi" ? "MPI" : "sockets (-pi " + o.init_method + ")")
                                   : std::string("one rank"));
      fmt::print("cuda libraries: {}\n", llmc::cuda_library_versions());
      fmt::print("mfu: {:.0f} FLOPs per token (6N + 6LCT at T={}) against {}\n",
                 llmc::model_flops_per_token(config, o.seq_len), o.seq_len, backend->peak().source);
      if (llmc::cuda_device_emulated())
        fmt::print("emulated GPU: every kernel runs on the CPU, thousands of times slower than a GPU; for checking "
                   "and debugging (docs/cuda-emulator.md)\n");
      std::fflush(stdout);
    }
    return backend;
  }, dry_run_plan);
}
