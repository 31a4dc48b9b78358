#include "llmc/dist/process_group.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <mpi.h>
#include <stdexcept>

#include "llmc/dist/mpi_communicator.h"

namespace llmc {

namespace {

struct LauncherVariables {
  Launcher launcher;
  const char* rank;
  const char* size;
  const char* local_rank;
};

// In order of precedence (see the header for why OpenMPI's come first).
constexpr LauncherVariables kLaunchers[] = {
    {Launcher::kOpenMpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {Launcher::kSlurm, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

int read_int(const EnvLookup& env, const char* name, Launcher launcher) {
  const char* text = env(name);
  if (text == nullptr)
    throw std::runtime_error(fmt::format("{}: not set, but the other variables of a {} launch are", name,
                                         launcher_name(launcher)));
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*text < '0' || *text > '9' || *end != '\0' || errno != 0 || value > 1000000000L)
    throw std::runtime_error(fmt::format("{}: '{}' is not a non-negative integer", name, text));
  return int(value);
}

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

const char* launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::kOpenMpi: return "OpenMPI";
    case Launcher::kSlurm: return "Slurm";
    case Launcher::kNone: break;
  }
  return "no launcher";
}

ProcessLayout detect_process_layout(const EnvLookup& env) {
  for (const LauncherVariables& v : kLaunchers) {
    if (env(v.rank) == nullptr && env(v.size) == nullptr) continue;
    ProcessLayout layout;
    layout.launcher = v.launcher;
    layout.rank = read_int(env, v.rank, v.launcher);
    layout.world_size = read_int(env, v.size, v.launcher);
    layout.local_rank = read_int(env, v.local_rank, v.launcher);
    if (layout.world_size < 1) throw std::runtime_error(fmt::format("{}: a world of 0 processes", v.size));
    if (layout.rank >= layout.world_size)
      throw std::runtime_error(fmt::format("{}={} is not a rank of {}={}", v.rank, layout.rank, v.size, layout.world_size));
    if (layout.local_rank >= layout.world_size)
      throw std::runtime_error(fmt::format("{}={} is not a rank of {}={}", v.local_rank, layout.local_rank, v.size,
                                           layout.world_size));
    return layout;
  }
  return ProcessLayout{};
}

ProcessLayout detect_process_layout() {
  return detect_process_layout([](const char* name) { return static_cast<const char*>(std::getenv(name)); });
}

ProcessGroup::ProcessGroup() : layout_(detect_process_layout()) {
  if (layout_.launcher == Launcher::kNone) {
    communicator_ = std::make_unique<SingleProcessCommunicator>();
    return;
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    prefer_bandwidth_algorithms_for_non_blocking_sums();
    // Only the main thread calls MPI (OpenMP threads never do).
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      throw std::runtime_error(fmt::format("MPI_Init failed under {}", launcher_name(layout_.launcher)));
    finalize_mpi_ = true;
  }
  int mpi_rank = 0, mpi_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  if (mpi_rank != layout_.rank || mpi_size != layout_.world_size) {
    if (finalize_mpi_) MPI_Finalize();
    throw std::runtime_error(fmt::format(
        "{} says rank {} of {} but MPI says rank {} of {}: the launcher started the processes without MPI "
        "support (with Slurm use `srun --mpi=pmix`, see docs/multi-gpu.md)",
        launcher_name(layout_.launcher), layout_.rank, layout_.world_size, mpi_rank, mpi_size));
  }
  communicator_ = std::make_unique<MpiCommunicator>();
}

ProcessGroup::~ProcessGroup() {
  communicator_.reset();
  if (finalize_mpi_) MPI_Finalize();
}

void ProcessGroup::abort(int exit_code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (layout_.launcher != Launcher::kNone) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);
}

void ProcessGroup::abort_from_any_thread(int exit_code) {
  // MPI is initialised with MPI_THREAD_FUNNELED, which promises nothing for a call from a second
  // thread. We rely on what Open MPI 4.1 does instead of asking for MPI_THREAD_MULTIPLE (which
  // would put locks on every message of every collective for this one call): MPI_Abort only reads
  // MPI_COMM_WORLD's group and asks the runtime (ORTE/PMIx, which has its own progress thread) to
  // kill the job; it never enters the point-to-point layer that a main thread blocked in a
  // collective is polling. tests/dist/check_watchdog.sh checks it: a rank whose peer is SIGSTOPped calls
  // this from its watchdog while its main thread waits in MPI_Allreduce, and the whole job ends.
  if (layout_.launcher != Launcher::kNone) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

}  // namespace llmc
