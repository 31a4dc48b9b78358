// Start-up: the model (-e), the flag checks that need it, and trainer_main.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <string>
#include <unistd.h>

#include "llmc/dist/abort_hooks.h"
#include "llmc/train/trainer.h"
#include "llmc/train/trainer_main.h"
#include "llmc/train/watched_communicator.h"
#include "llmc/train/watchdog.h"

namespace llmc {

namespace {

// -e names no file and no descriptor (a typo such as d13): say both, with the names it could be.
void check_model_exists(const std::string& model) {
  if (!is_descriptor(model) && !std::filesystem::exists(model))
    throw std::runtime_error(fmt::format("'{}' is neither a model file (no such file) nor a model descriptor ({} or "
                                         "L<layers>H<heads>C<channels>[T<seq>])",
                                         model, named_shape_list(", ")));
}

}  // namespace

ModelFile resolve_model(const TrainOptions& o) {
  return blame("-e", [&] {
    check_model_exists(o.model);
    if (!is_descriptor(o.model)) return load_model(o.model);
    ModelFile model;
    model.config = config_from_descriptor(o.model);
    model.params = init_parameters(model.config, o.seed);
    return model;
  });
}

GPT2Config resolve_model_config(const TrainOptions& o) {
  return blame("-e", [&] {
    check_model_exists(o.model);
    return is_descriptor(o.model) ? config_from_descriptor(o.model) : load_model_config(o.model);
  });
}

void check_options_for_model(const TrainOptions& o, const GPT2Config& config) {
  if (o.seq_len > config.max_seq_len)
    throw FlagError(fmt::format("-t: sequence length {} exceeds the model's max_seq_len {} (-e {})", o.seq_len,
                                config.max_seq_len, o.model));
  if (int64_t(o.batch_size) * o.seq_len > INT32_MAX)
    throw FlagError(fmt::format("-b: B*T = {}*{} tokens per micro-batch is more than the backends' limit of {}",
                                o.batch_size, o.seq_len, INT32_MAX));
  if (o.checkpoint_every > 0 && o.output_dir.empty())
    throw FlagError("-n: checkpoints need an output dir (-o)");
  if (o.resume && o.output_dir.empty()) throw FlagError("-y: resuming needs the output dir (-o) of the checkpoints");
}

namespace {

// The watchdog's stop action. It runs on the watchdog's thread while the main thread is stuck, in
// a collective or waiting for the GPU: the message goes straight to stderr's descriptor (the stuck
// thread may hold stdio's lock), the NCCL communicators are aborted first (ncclCommAbort, through
// the abort hooks) so that no GPU stays blocked in a collective, then every rank ends.
[[noreturn]] void stop_stuck_job(ProcessGroup& group, const std::string& message) {
  const std::string line = fmt::format("error: {}\n", message);
  (void)!::write(2, line.data(), line.size());
  abort_hooks().run();
  group.abort_from_any_thread(kStepTimeoutExitCode);
}

// The CPU trainer has no device memory, no FP8 or TF32 tensor cores and no GEMM epilogues: these flags
// belong to train_gpt2cu (which plans without a GPU).
void reject_device_flags(const TrainOptions& o) {
  if (o.dry_run_ranks > 0)
    throw FlagError("--dry-run: this trainer has no GPU memory to plan; ./train_gpt2cu --dry-run N prints the GPU "
                    "memory plan per rank, and runs without a GPU");
  if (o.device_memory > 0)
    throw FlagError("--device-memory: this trainer runs on the CPU, without device memory; the flag is train_gpt2cu's");
  if (o.fp8)
    throw FlagError("--fp8: FP8 matmuls run on a GPU's FP8 tensor cores (train_gpt2cu); this trainer computes in "
                    "fp32: leave --fp8 at 0");
  if (o.gelu_fusion >= 0)
    throw FlagError("-ge: GELU fusion chooses cuBLASLt epilogues of train_gpt2cu's GEMMs; this trainer computes GELU "
                    "on the CPU: leave -ge out");
  if (o.tf32 >= 0)
    throw FlagError("-f: TF32 is a GPU tensor-core format (train_gpt2cu); this trainer's matmuls are full fp32 on the "
                    "CPU: leave -f out");
}

// -pi, -pf, -ps, -pn, -pr, -pg: how ProcessGroup starts the ranks.
RankOptions rank_options(const TrainOptions& o) {
  RankOptions r;
  r.method = o.init_method == "tcp" ? InitMethod::kTcp : o.init_method == "fs" ? InitMethod::kFs : InitMethod::kMpi;
  r.fs_dir = o.fs_dir;
  r.server = o.server;
  r.num_processes = o.num_processes;
  r.process_rank = o.process_rank;
  r.gpus_per_node = o.gpus_per_node;
  return r;
}

// --help is printed once: by the process that is, or will be, rank 0.
bool first_process(const TrainOptions& o) {
  if (o.process_rank >= 0) return o.process_rank == 0;
  return detect_process_layout().rank == 0;
}

}  // namespace

int trainer_main(int argc, const char* const* argv, const BackendFactory& make_backend,
                 const MemoryPlanner& plan_memory) {
  // Past `ulimit -f` a write should fail with EFBIG (reported, .tmp removed) instead of the
  // default SIGXFSZ killing the process mid-checkpoint with a core dump.
  std::signal(SIGXFSZ, SIG_IGN);
  std::unique_ptr<ProcessGroup> group;
  try {
    // The flags first: -pi and its companions say how to start the ranks.
    const TrainOptions options = parse_train_options(argc, argv);
    if (options.help) {
      if (first_process(options)) fmt::print("{}", train_usage(argc > 0 ? argv[0] : "train"));
      return 0;
    }
    group = std::make_unique<ProcessGroup>(rank_options(options));
    if (!plan_memory) reject_device_flags(options);
    if (options.dry_run_ranks > 0) {
      const GPT2Config config = resolve_model_config(options);
      check_options_for_model(options, config);
      if (group->rank() == 0) fmt::print("{}", plan_memory(config, options, options.dry_run_ranks));
      return 0;
    }
    ProcessGroup& ranks = *group;
    Watchdog watchdog(options.step_timeout, ranks.world_size() > 1 ? fmt::format("rank {}: ", ranks.rank()) : "",
                      [&ranks](const std::string& message) { stop_stuck_job(ranks, message); });
    WatchedCommunicator host(ranks.communicator(), watchdog);
    Trainer trainer(options, resolve_model(options), host, ranks.layout(), watchdog);
    trainer.run(make_backend);
    return 0;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    const bool many = group && group->world_size() > 1;
    fmt::print(stderr, "error: {}{}\n", many ? fmt::format("rank {}: ", group->rank()) : "", e.what());
    // The other ranks may be waiting in a collective for this one: end them all.
    if (many) group->abort(1);
    return 1;
  }
}

}  // namespace llmc
