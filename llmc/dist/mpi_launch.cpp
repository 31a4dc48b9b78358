#include "llmc/dist/mpi_launch.h"

#include <cstdlib>
#include <fmt/format.h>
#include <mpi.h>
#include <stdexcept>

#include "llmc/dist/mpi_communicator.h"

namespace llmc {

namespace {

// The gradient buckets go out as non-blocking sums (llmc/dist/gradient_buckets.h), which Open MPI
// runs in its libnbc component. For few ranks libnbc picks binomial trees, which move every byte
// through the root: on 2 ranks of one machine an MPI_Iallreduce of 64 MB took 1.6x as long as
// MPI_Allreduce, and a 2-rank CPU step with the buckets was 14% slower than without. Its ring
// all-reduce and chain reduce are bandwidth-optimal and make the buckets as fast as the blocking
// sum (faster once they overlap). Open MPI reads these variables in MPI_Init; one the user set is
// kept, and other MPIs ignore them.
void prefer_bandwidth_algorithms_for_non_blocking_sums() {
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);  // 1 = ring
  setenv("OMPI_MCA_coll_libnbc_ireduce_algorithm", "1", 0);     // 1 = chain
}

}  // namespace

bool built_with_mpi() { return true; }

std::unique_ptr<Communicator> start_mpi(const ProcessLayout& layout, bool& finalize) {
  finalize = false;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    prefer_bandwidth_algorithms_for_non_blocking_sums();
    // Only the main thread calls MPI (OpenMP threads never do).
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      throw std::runtime_error(fmt::format("MPI_Init failed under {}", launcher_name(layout.launcher)));
    finalize = true;
  }
  int mpi_rank = 0, mpi_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  if (mpi_rank != layout.rank || mpi_size != layout.world_size) {
    if (finalize) MPI_Finalize();
    finalize = false;
    throw std::runtime_error(fmt::format(
        "{} says rank {} of {} but MPI says rank {} of {}: the launcher started the processes without MPI "
        "support (with Slurm use `srun --mpi=pmix`, or -pi tcp|fs without MPI; see docs/multi-gpu.md)",
        launcher_name(layout.launcher), layout.rank, layout.world_size, mpi_rank, mpi_size));
  }
  return std::make_unique<MpiCommunicator>();
}

void finalize_mpi() { MPI_Finalize(); }

// MPI is initialised with MPI_THREAD_FUNNELED, which promises nothing for a call from a second
// thread. We rely on what Open MPI 4.1 does instead of asking for MPI_THREAD_MULTIPLE (which
// would put locks on every message of every collective for this one call): MPI_Abort only reads
// MPI_COMM_WORLD's group and asks the runtime (ORTE/PMIx, which has its own progress thread) to
// kill the job; it never enters the point-to-point layer that a main thread blocked in a
// collective is polling. tests/dist/check_watchdog.sh checks it: a rank whose peer is SIGSTOPped calls
// this from its watchdog while its main thread waits in MPI_Allreduce, and the whole job ends.
void abort_mpi(int exit_code) { MPI_Abort(MPI_COMM_WORLD, exit_code); }

}  // namespace llmc
