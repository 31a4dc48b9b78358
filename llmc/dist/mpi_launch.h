// MPI's part of ProcessGroup (llmc/dist/process_group.h), in files of its own: the normal build
// compiles mpi_launch.cpp, a build without MPI (make NO_USE_MPI=1, the Makefile's MPI section)
// mpi_launch_absent.cpp instead, whose start_mpi says to start the ranks with -pi tcp or -pi fs.
#pragma once
#include <memory>

#include "llmc/dist/communicator.h"
#include "llmc/dist/process_layout.h"

namespace llmc {

// Whether this binary was built with MPI.
bool built_with_mpi();
// Under a launcher (layout.launcher != kNone): initialises MPI (unless it already is), checks that
// MPI's rank and size equal the launcher's variables and returns an MpiCommunicator. Sets
// `finalize` when this call initialised MPI. Throws std::runtime_error on a mismatch, or when the
// binary has no MPI.
std::unique_ptr<Communicator> start_mpi(const ProcessLayout& layout, bool& finalize);
void finalize_mpi();
// MPI_Abort on MPI_COMM_WORLD: ends every rank of the job (see ProcessGroup::abort_from_any_thread
// for why a second thread may call it).
void abort_mpi(int exit_code);

}  // namespace llmc
