// Process setup for multi-rank training: who am I (rank, world size, rank on this node) and the
// communicator (llmc/dist/communicator.h) that connects the ranks. RankOptions (the flags -pi, -pf,
// -ps, -pn, -pr, -pg; llmc/dist/rank_options.h) and the launcher's variables
// (llmc/dist/process_layout.h) decide both:
//   -pi mpi, no launcher    one process: rank 0 of 1, SingleProcessCommunicator, no MPI call at all;
//   -pi mpi, mpirun/srun    MPI is initialised and the ranks talk through MpiCommunicator; MPI's own
//                           rank and size must agree with the variables (they do not when e.g. srun
//                           starts tasks without MPI support, which would otherwise train W
//                           independent copies silently);
//   -pi tcp|fs              no MPI: the ranks meet (llmc/dist/rendezvous.h) and talk through
//                           SocketCommunicator; one process needs no connection.
//
// Linking: the normal build links libmpi into every binary (the Makefile's MPI section), so one
// binary runs with mpirun, with -pi tcp|fs and alone; `make NO_USE_MPI=1` builds without MPI
// (llmc/dist/mpi_launch.h), and there -pi mpi under a launcher is an error that says what to use.
#pragma once
#include <memory>
#include <string>

#include "llmc/dist/communicator.h"
#include "llmc/dist/process_layout.h"
#include "llmc/dist/rank_options.h"

namespace llmc {

class ProcessGroup {
 public:
  // Plans the ranks (plan_ranks) from `options` and the environment, then starts MPI or meets the
  // other ranks. Throws std::runtime_error naming the flag or variable on any mismatch, and when
  // the other ranks do not come in time.
  explicit ProcessGroup(const RankOptions& options = RankOptions());
  // Finalises MPI if this object initialised it. Every rank must get here: a rank leaving on an
  // error while the others wait in a collective would hang them, so mains call abort() instead.
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  const ProcessLayout& layout() const { return layout_; }
  int rank() const { return layout_.rank; }
  int world_size() const { return layout_.world_size; }
  int local_rank() const { return layout_.local_rank; }
  InitMethod method() const { return method_; }
  Communicator& communicator() { return *communicator_; }

  // Ends every rank of the job with this exit code. For the error path of a main: after printing
  // "error: ...", so that no rank hangs waiting. Over MPI: MPI_Abort. Over -pi tcp|fs: this
  // process exits, its connections close, and each other rank fails at its next collective
  // ("rank 0 closed its connection ...") and exits too.
  [[noreturn]] void abort(int exit_code);
  // abort() for a thread other than the main one (the watchdog, llmc/train/watchdog.h), while the
  // main thread may be stuck inside a collective: no stdio flush and no exit handlers, which could
  // wait on what the stuck thread holds; the process ends with std::_Exit.
  [[noreturn]] void abort_from_any_thread(int exit_code);

 private:
  ProcessLayout layout_;
  InitMethod method_ = InitMethod::kMpi;
  bool mpi_ = false;           // the ranks talk over MPI
  bool finalize_mpi_ = false;  // this object initialised it
  std::unique_ptr<Communicator> communicator_;
};

}  // namespace llmc
