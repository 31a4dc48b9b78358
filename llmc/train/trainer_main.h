// The one training loop both trainers run (DESIGN.md §3): data, LR schedule, gradient
// accumulation, clipping, validation, sampling, checkpoints, resume and logs. A backend
// (llmc/backend.h) supplies the kernels; train_gpt2.cpp passes the CPU backend, train_gpt2.cu the
// CUDA one. Training semantics and file formats: docs/training.md. Implemented by train_main.cpp
// (start-up, mains), train_loop.cpp (the loop and the step), train_checkpointing.cpp and
// train_eval.cpp.
#pragma once
#include <functional>
#include <memory>

#include "llmc/backend.h"
#include "llmc/gpt2.h"
#include "llmc/dist/process_group.h"
#include "llmc/train/evaluation.h"  // evaluate_multiple_choice (-h)
#include "llmc/train/options.h"
#include "llmc/dist/zero_sharding.h"

namespace llmc {

// -e: a descriptor is initialised from --seed, anything else is loaded as a model file. Throws
// std::runtime_error starting with "-e:".
ModelFile resolve_model(const TrainOptions& options);

// Checks the flags that need the model (-t against max_seq_len) or each other (-n and -y need
// -o); throws FlagError naming the flag.
void check_options_for_model(const TrainOptions& options, const GPT2Config& config);

// Where a rank's backend runs and what it holds: the factory builds the backend for this.
struct BackendPlacement {
  ProcessLayout process;          // rank, world size, local rank (the GPU), launcher
  OptimizerPartition partition;   // the optimizer state this rank keeps (-z)
  Communicator* host = nullptr;   // the ranks' host communicator (carries NCCL's id on GPUs)
};

using BackendFactory =
    std::function<std::unique_ptr<Backend>(const GPT2Config&, const TrainOptions&, const BackendPlacement&)>;

// A trainer's whole main: sets up the ranks (ProcessGroup: mpirun, srun or a single process),
// parses argv (printing --help), resolves and checks the model, builds the backend and trains.
// Ignores SIGXFSZ, so that a write past `ulimit -f` fails with a message. Errors are printed as
// "error: ..." to stderr (prefixed with the rank when there are several); with several ranks the
// failing rank then ends the whole job (ProcessGroup::abort) so that no rank waits forever in a
// collective. A first SIGINT/SIGTERM during the run stops it after the current step with a
// checkpoint (when -o is set) and exit code 0; a second one exits the process at once with status
// 128 + signal. Returns the exit code.
int trainer_main(int argc, const char* const* argv, const BackendFactory& make_backend);

}  // namespace llmc
