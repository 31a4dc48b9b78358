// Who this process is among the ranks (rank, world size, rank on this node), as the launcher that
// started it says in its environment variables, OpenMPI's first (mpirun sets them, and inside a
// Slurm allocation it inherits Slurm's too, which then describe the allocation and not this
// process):
//   OpenMPI  OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
//   Slurm    SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID   (srun, one task per GPU)
//   none     one process: rank 0 of 1.
// The flags -pi/-pn/-pr/-pg (llmc/dist/rank_options.h) may set or override these.
#pragma once
#include <functional>

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

}  // namespace llmc
