// The build without MPI (NO_USE_MPI=1): ranks start with -pi tcp or -pi fs only.
#include <fmt/format.h>
#include <stdexcept>

#include "llmc/dist/mpi_launch.h"

namespace llmc {

bool built_with_mpi() { return false; }

std::unique_ptr<Communicator> start_mpi(const ProcessLayout& layout, bool&) {
  throw std::runtime_error(fmt::format(
      "-pi mpi: {} started this process as rank {} of {}, but this binary was built without MPI (make "
      "NO_USE_MPI=1): start every rank with -pi tcp -ps <rank 0's address> or -pi fs -pf <shared folder> "
      "(docs/multi-gpu.md, \"Ranks without MPI\"), or rebuild without NO_USE_MPI",
      launcher_name(layout.launcher), layout.rank, layout.world_size));
}

void finalize_mpi() {}

void abort_mpi(int) {}

}  // namespace llmc
