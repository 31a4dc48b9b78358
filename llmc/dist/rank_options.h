// How a process learns its rank and finds its peers: llm.c's flags -pi, -pf, -ps, -pn, -pr, -pg
// (the trainer's flag table, llmc/train/options.cpp, fills RankOptions; docs/multi-gpu.md, "Ranks
// without MPI").
//   -pi mpi  (the default) rank and size from the launcher's variables (mpirun, srun), the ranks
//            talk over MPI; no launcher is one process.
//   -pi tcp  rank 0 listens at -ps host[:port] (port kDefaultRendezvousPort unless given), the
//            others connect there; no MPI at all.
//   -pi fs   rank 0 listens on any free port and writes its addresses into a file in the folder
//            -pf that every rank sees; the others read it and connect.
// With tcp and fs the rank and size are -pr and -pn, or where those are not given the launcher's
// (srun without MPI: SLURM_PROCID, SLURM_NTASKS); the local rank (the GPU) is the launcher's, or
// else rank % -pg.
#pragma once
#include <string>

#include "llmc/dist/process_layout.h"

namespace llmc {

enum class InitMethod { kMpi, kTcp, kFs };
const char* init_method_name(InitMethod method);  // "mpi", "tcp", "fs"

// llm.c's port for -pi tcp (f1e2ace, llmc/zero.cuh).
constexpr int kDefaultRendezvousPort = 12345;
// How long the ranks wait for each other at start-up unless LLMC_RENDEZVOUS_TIMEOUT (seconds) says.
constexpr double kDefaultRendezvousTimeout = 300.0;

struct RankOptions {
  InitMethod method = InitMethod::kMpi;  // -pi
  std::string fs_dir;                    // -pf: "" = not given
  std::string server;                    // -ps: host or host:port, "" = not given
  int num_processes = 0;                 // -pn: 0 = not given
  int process_rank = -1;                 // -pr: -1 = not given
  int gpus_per_node = 8;                 // -pg
};

// What the flags and the environment decide, checked.
struct RankPlan {
  InitMethod method = InitMethod::kMpi;
  ProcessLayout layout;        // rank, world size, local rank; launcher = whose variables were read
  std::string host;            // -pi tcp: rank 0's address
  int port = 0;                // -pi tcp: its port
  std::string fs_dir;          // -pi fs
  double rendezvous_timeout = kDefaultRendezvousTimeout;
};

// Combines the flags with the launcher's variables (detect_process_layout) and
// LLMC_RENDEZVOUS_TIMEOUT. Throws std::runtime_error naming the flag or variable for every
// combination that cannot work: -pi tcp|fs without a size or a rank, -pr not below -pn, -pn or
// -pr that contradict the launcher, -pi mpi with -pn > 1 and no launcher, -ps or -pf given to a
// method that does not use it or missing where it is needed, -pf not a folder, a bad port.
RankPlan plan_ranks(const RankOptions& options, const EnvLookup& env);

}  // namespace llmc
