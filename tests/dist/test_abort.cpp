// The error path of a multi-rank main (tests/dist/check_mpi.sh): the last rank fails while the others
// wait in a barrier for it; ProcessGroup::abort must end the whole job instead of leaving them
// hanging. Exits with status 3 from the failing rank; the check runs it under a timeout.
#include <cstdio>

#include "llmc/dist/process_group.h"

int main() {
  llmc::ProcessGroup group;
  if (group.rank() == group.world_size() - 1) {
    std::fprintf(stderr, "error: rank %d: a deliberate failure\n", group.rank());
    group.abort(3);
  }
  group.communicator().barrier();
  std::printf("rank %d left the barrier: the failing rank did not stop the job\n", group.rank());
  return 0;
}
