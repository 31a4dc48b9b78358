// Start-up of ranks without MPI (-pi tcp, -pi fs; llmc/dist/rank_options.h): rank 0 listens, every
// other rank connects to it and says who it is; once all have come, rank 0 confirms to each. The
// connections stay open and carry the collectives (llmc/dist/socket_communicator.h).
//
// -pi tcp: rank 0 listens on plan.host:plan.port. -pi fs: rank 0 listens on a free port of every
// address and writes them, with a random job token, into <-pf>/llmc_rendezvous.txt (a temporary
// name renamed into place, so a reader never sees half a file); the others wait for the file and
// connect to the first address that answers. Rank 0 deletes the file once all ranks have come.
//
// Greeting (each field little-endian, as the ranks' floats are): "LLMCRANK", the protocol version,
// the world size, the rank and the job token. Rank 0 refuses a greeting from another program, a
// different world size or token, a rank outside the world and a rank that came twice.
// Every wait ends at plan.rendezvous_timeout with an error that says who did not come.
#pragma once
#include <vector>

#include "llmc/dist/rank_options.h"
#include "llmc/dist/tcp_socket.h"

namespace llmc {

// The file -pi fs exchanges, in plan.fs_dir.
constexpr const char* kRendezvousFileName = "llmc_rendezvous.txt";

// Returns the connections: on rank 0, one per rank (index = rank; index 0 unused); on the
// others, one (index 0, to rank 0). Throws std::runtime_error for any failure.
std::vector<TcpSocket> rendezvous(const RankPlan& plan);

}  // namespace llmc
