#include "llmc/dist/process_group.h"

#include <cstdio>
#include <cstdlib>

#include "llmc/dist/mpi_launch.h"
#include "llmc/dist/rendezvous.h"
#include "llmc/dist/socket_communicator.h"

namespace llmc {

ProcessGroup::ProcessGroup(const RankOptions& options) {
  const RankPlan plan =
      plan_ranks(options, [](const char* name) { return static_cast<const char*>(std::getenv(name)); });
  layout_ = plan.layout;
  method_ = plan.method;
  if (method_ == InitMethod::kMpi && layout_.launcher != Launcher::kNone) {
    communicator_ = start_mpi(layout_, finalize_mpi_);
    mpi_ = true;
  } else if (layout_.world_size > 1) {
    communicator_ = std::make_unique<SocketCommunicator>(layout_.rank, layout_.world_size, rendezvous(plan));
  } else {
    communicator_ = std::make_unique<SingleProcessCommunicator>();
  }
}

ProcessGroup::~ProcessGroup() {
  communicator_.reset();
  if (finalize_mpi_) finalize_mpi();
}

void ProcessGroup::abort(int exit_code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (mpi_) abort_mpi(exit_code);
  std::exit(exit_code);
}

void ProcessGroup::abort_from_any_thread(int exit_code) {
  if (mpi_) abort_mpi(exit_code);
  std::_Exit(exit_code);
}

}  // namespace llmc
