// The trainers' entry point: train_gpt2.cpp passes a factory of CPU backends, train_gpt2.cu one of
// CUDA backends, and trainer_main does the rest (ranks, flags, model, the Trainer of
// llmc/train/trainer.h, which builds the backend and runs the shared loop). Training semantics
// and file formats: docs/training.md and docs/contract.md.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "llmc/backend.h"
#include "llmc/dist/process_group.h"
#include "llmc/dist/zero_sharding.h"
#include "llmc/gpt2.h"
#include "llmc/io/model_file.h"
#include "llmc/train/options.h"

namespace llmc {

// -e: a descriptor is initialised from --seed, anything else is loaded as a model file. Throws
// std::runtime_error starting with "-e:".
ModelFile resolve_model(const TrainOptions& options);
// -e's shape only: a descriptor's, or a model file's checked header (no parameters are read or
// initialised). Throws std::runtime_error starting with "-e:".
GPT2Config resolve_model_config(const TrainOptions& options);

// Checks the flags that need the model (-t against max_seq_len) or each other (-n and -y need
// -o); throws FlagError naming the flag.
void check_options_for_model(const TrainOptions& options, const GPT2Config& config);

// Where a rank's backend runs and what it holds: the Trainer builds its backend for this, after
// every check that needs the model, the data or the output dir, so a bad run fails before the
// backend allocates anything.
struct BackendPlacement {
  ProcessLayout process;          // rank, world size, local rank (the GPU), launcher
  OptimizerPartition partition;   // the optimizer state this rank keeps (-z)
  Communicator* host = nullptr;   // the ranks' host communicator (carries NCCL's id on GPUs)
  // The loop calls begin/finish_gradient_sync (--overlap 1 with several ranks): a backend that
  // needs buffers or streams for it sets them up now.
  bool overlap_gradients = false;
};

// The exit status of a job that --step-timeout ended (llmc/train/watchdog.h); 1 is any other error.
constexpr int kStepTimeoutExitCode = 3;

using BackendFactory =
    std::function<std::unique_ptr<Backend>(const GPT2Config&, const TrainOptions&, const BackendPlacement&)>;

// What --dry-run N prints for a main whose backend has device memory (train_gpt2cu): the memory
// plan per rank for `ranks` ranks and whether it fits --device-memory (or the GPU's free memory).
// Called without a device being needed, without data files, MPI or the model's parameters.
using MemoryPlanner = std::function<std::string(const GPT2Config&, const TrainOptions&, int ranks)>;

// A trainer's whole main: sets up the ranks (ProcessGroup: mpirun, srun or a single process),
// parses argv (printing --help), resolves the model and trains with a backend from make_backend.
// Ignores SIGXFSZ, so that a write past `ulimit -f` fails with a message. Errors are printed as
// "error: ..." to stderr (prefixed with the rank when there are several); with several ranks the
// failing rank then ends the whole job (ProcessGroup::abort) so that no rank waits forever in a
// collective. A first SIGINT/SIGTERM during the run stops it after the current step with a
// checkpoint (when -o is set) and exit code 0; a second one exits the process at once with status
// 128 + signal. A rank that makes no progress for --step-timeout seconds prints where it waits and
// ends the whole job with kStepTimeoutExitCode (llmc/train/watchdog.h). Returns the exit code.
// With --dry-run N, prints plan_memory's text for N ranks (rank 0 only) and returns 0 without
// training; a main without a planner (the CPU trainer) rejects --dry-run, --device-memory, --fp8,
// -ge and -f with a FlagError that points to train_gpt2cu.
int trainer_main(int argc, const char* const* argv, const BackendFactory& make_backend,
                 const MemoryPlanner& plan_memory = nullptr);

}  // namespace llmc
