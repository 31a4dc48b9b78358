// Process setup for multi-rank training: who am I (rank, world size, rank on this node) and the
// communicator (llmc/dist/communicator.h) that connects the ranks.
//
// The launcher is recognised from its environment variables, OpenMPI's first (mpirun sets them,
// and inside a Slurm allocation it inherits Slurm's too, which then describe the allocation and
// not this process):
//   OpenMPI  OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
//   Slurm    SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID   (srun --mpi=pmix, one task per GPU)
//   none     one process: rank 0 of 1, no MPI calls at all.
// Under a launcher MPI is initialised and the ranks talk through MpiCommunicator; MPI's own rank
// and size must then agree with the variables (they do not when e.g. srun starts tasks without
// MPI support, which would otherwise train W independent copies silently).
//
// Linking: every binary built from build/libllmc.a links libmpi (the Makefile's MPI section), so
// one binary runs both with and without mpirun; without a launcher MPI is never initialised.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "llmc/dist/communicator.h"

namespace llmc {

enum class Launcher { kNone, kOpenMpi, kSlurm };
const char* launcher_name(Launcher launcher);

struct ProcessLayout {
  Launcher launcher = Launcher::kNone;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // rank among the processes on this node: the GPU this rank drives
};

// Returns the value of an environment variable or nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

// Reads the layout from the variables above. Throws std::runtime_error naming the variable when a
// launcher's variable is missing or is not a non-negative integer, or when the rank does not fit
// the world size.
ProcessLayout detect_process_layout(const EnvLookup& env);
ProcessLayout detect_process_layout();  // from the process environment

class ProcessGroup {
 public:
  // Detects the layout; under a launcher initialises MPI (unless already initialised) and checks
  // that MPI agrees with the launcher's variables. Throws std::runtime_error on any mismatch.
  ProcessGroup();
  // Finalises MPI if this object initialised it. Every rank must get here: a rank leaving on an
  // error while the others wait in a collective would hang them, so mains call abort() instead.
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  const ProcessLayout& layout() const { return layout_; }
  int rank() const { return layout_.rank; }
  int world_size() const { return layout_.world_size; }
  int local_rank() const { return layout_.local_rank; }
  Communicator& communicator() { return *communicator_; }

  // Ends every rank of the job with this exit code (MPI_Abort under a launcher, exit otherwise).
  // For the error path of a main: after printing "error: ...", so that no rank hangs waiting.
  [[noreturn]] void abort(int exit_code);
  // abort() for a thread other than the main one (the watchdog, llmc/train/watchdog.h), while the
  // main thread may be stuck inside a collective: no stdio flush and no exit handlers, which could
  // wait on what the stuck thread holds; the process ends with std::_Exit.
  [[noreturn]] void abort_from_any_thread(int exit_code);

 private:
  ProcessLayout layout_;
  bool finalize_mpi_ = false;
  std::unique_ptr<Communicator> communicator_;
};

}  // namespace llmc
