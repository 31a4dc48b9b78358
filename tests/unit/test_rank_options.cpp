// plan_ranks (llmc/dist/rank_options.h): -pi/-pf/-ps/-pn/-pr/-pg with and without a launcher's
// variables, and every refusal naming its flag. The runs over sockets: tests/dist/check_nompi.sh.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "llmc/dist/rank_options.h"

using namespace llmc;

namespace {

RankPlan plan(const RankOptions& o, const std::map<std::string, std::string>& vars = {}) {
  return plan_ranks(o, [&vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

RankOptions tcp(int pn, int pr, const std::string& server = "10.0.0.1") {
  RankOptions o;
  o.method = InitMethod::kTcp;
  o.num_processes = pn;
  o.process_rank = pr;
  o.server = server;
  return o;
}

const std::map<std::string, std::string> kSlurm = {{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"}};

}  // namespace

TEST_CASE("rank options: -pi mpi (the default) takes the launcher's layout") {
  RankPlan p = plan(RankOptions());
  CHECK(p.method == InitMethod::kMpi);
  CHECK(p.layout.world_size == 1);
  p = plan(RankOptions(), kSlurm);
  CHECK(p.layout.launcher == Launcher::kSlurm);
  CHECK(p.layout.rank == 3);
  CHECK(p.layout.local_rank == 1);
  RankOptions o;
  o.num_processes = 4;
  o.process_rank = 3;
  CHECK(plan(o, kSlurm).layout.world_size == 4);
}

TEST_CASE("rank options: -pi tcp from -pn/-pr, the GPU rank % -pg, the port") {
  RankOptions o = tcp(16, 11);
  o.gpus_per_node = 8;
  RankPlan p = plan(o);
  CHECK(p.method == InitMethod::kTcp);
  CHECK(p.layout.launcher == Launcher::kNone);
  CHECK(p.layout.rank == 11);
  CHECK(p.layout.world_size == 16);
  CHECK(p.layout.local_rank == 3);
  CHECK(p.host == "10.0.0.1");
  CHECK(p.port == kDefaultRendezvousPort);
  CHECK(p.rendezvous_timeout == kDefaultRendezvousTimeout);
  p = plan(tcp(2, 1, "node7:23456"), {{"LLMC_RENDEZVOUS_TIMEOUT", "2.5"}});
  CHECK(p.host == "node7");
  CHECK(p.port == 23456);
  CHECK(p.rendezvous_timeout == 2.5);
  CHECK(plan(tcp(2, 0, "fe80::1")).host == "fe80::1");
  CHECK(plan(tcp(1, 0, "")).layout.world_size == 1);  // one process: no address needed
}

TEST_CASE("rank options: -pi tcp takes rank and size from srun's variables where the flags are missing") {
  RankPlan p = plan(tcp(0, -1), kSlurm);
  CHECK(p.layout.launcher == Launcher::kSlurm);
  CHECK(p.layout.rank == 3);
  CHECK(p.layout.world_size == 4);
  CHECK(p.layout.local_rank == 1);  // SLURM_LOCALID, not rank % -pg
  CHECK(plan(tcp(4, 3), kSlurm).layout.rank == 3);
}

TEST_CASE("rank options: the refusals name the flag") {
  CHECK_THROWS_WITH(plan(tcp(0, 0)), doctest::Contains("-pi tcp: -pn (the number of processes) is not given"));
  CHECK_THROWS_WITH(plan(tcp(2, -1)), doctest::Contains("-pi tcp: -pr (this process's rank, 0 to 1) is not given"));
  CHECK_THROWS_WITH(plan(tcp(2, 2)), "-pr 2: not a rank of -pn 2 (the ranks are 0 to 1)");
  CHECK_THROWS_WITH(plan(tcp(2, 0, "")), doctest::Contains("-pi tcp: -ps (the address of rank 0's machine"));
  CHECK_THROWS_WITH(plan(tcp(2, 0, "host:0")), "-ps host:0: port '0' is not a number from 1 to 65535");
  CHECK_THROWS_WITH(plan(tcp(2, 0, "host:99999")), "-ps host:99999: port '99999' is not a number from 1 to 65535");
  CHECK_THROWS_WITH(plan(tcp(2, 0, ":80")), "-ps :80: no host before the port");
  CHECK_THROWS_WITH(plan(tcp(8, 3), kSlurm), "-pn 8: Slurm started 4 processes (SLURM_NTASKS=4)");
  CHECK_THROWS_WITH(plan(tcp(4, 2), kSlurm), "-pr 2: Slurm says this process is rank 3 (SLURM_PROCID=3)");
  CHECK_THROWS_WITH(plan(tcp(2, 1), {{"LLMC_RENDEZVOUS_TIMEOUT", "0"}}),
                    "LLMC_RENDEZVOUS_TIMEOUT: '0' is not a number of seconds greater than 0");

  RankOptions o;
  o.num_processes = 2;
  CHECK_THROWS_WITH(plan(o), doctest::Contains("-pn 2: with -pi mpi (the default) the processes come from a launcher, "
                                               "and none started this one: run `mpirun -np 2 ...`"));
  o = RankOptions();
  o.process_rank = 1;
  CHECK_THROWS_WITH(plan(o), doctest::Contains("-pr 1: with -pi mpi (the default) the rank comes from a launcher"));
  o = RankOptions();
  o.server = "10.0.0.1";
  CHECK_THROWS_WITH(plan(o), "-ps 10.0.0.1: only -pi tcp uses a server address (this run is -pi mpi)");
  o = tcp(2, 0);
  o.fs_dir = "/tmp";
  CHECK_THROWS_WITH(plan(o), "-pf /tmp: only -pi fs uses a shared folder (this run is -pi tcp)");

  o = RankOptions();
  o.method = InitMethod::kFs;
  o.num_processes = 2;
  o.process_rank = 1;
  CHECK_THROWS_WITH(plan(o), doctest::Contains("-pi fs: -pf (a folder every rank sees"));
  o.fs_dir = "/nonexistent/llmc";
  CHECK_THROWS_WITH(plan(o), "-pf /nonexistent/llmc: no such folder (every rank needs it: a shared file system)");
  o.fs_dir = "/proc/self/status";
  CHECK_THROWS_WITH(plan(o), "-pf /proc/self/status: not a folder");
  o.fs_dir = "/tmp";
  CHECK(plan(o).fs_dir == "/tmp");
}
