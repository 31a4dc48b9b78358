#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "llmc/dist/communicator.h"
#include "llmc/dist/process_group.h"

using namespace llmc;

namespace {

ProcessLayout detect(const std::map<std::string, std::string>& vars) {
  return detect_process_layout([&vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

const std::map<std::string, std::string> kOmpi = {
    {"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}};
const std::map<std::string, std::string> kSlurm = {{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "3"}};

}  // namespace

TEST_CASE("process layout: no launcher is one process") {
  const ProcessLayout l = detect({{"HOME", "/root"}});
  CHECK(l.launcher == Launcher::kNone);
  CHECK(l.rank == 0);
  CHECK(l.world_size == 1);
  CHECK(l.local_rank == 0);
}

TEST_CASE("process layout: OpenMPI's and Slurm's variables") {
  ProcessLayout l = detect(kOmpi);
  CHECK(l.launcher == Launcher::kOpenMpi);
  CHECK(l.rank == 5);
  CHECK(l.world_size == 8);
  CHECK(l.local_rank == 1);
  l = detect(kSlurm);
  CHECK(l.launcher == Launcher::kSlurm);
  CHECK(l.rank == 3);
  CHECK(l.world_size == 16);
  CHECK(l.local_rank == 3);
}

TEST_CASE("process layout: mpirun inside a Slurm allocation is OpenMPI's layout") {
  auto vars = kSlurm;
  vars.insert(kOmpi.begin(), kOmpi.end());
  const ProcessLayout l = detect(vars);
  CHECK(l.launcher == Launcher::kOpenMpi);
  CHECK(l.rank == 5);
  CHECK(l.world_size == 8);
}

TEST_CASE("process layout: bad variables are named") {
  auto vars = kOmpi;
  vars["OMPI_COMM_WORLD_RANK"] = "x1";
  CHECK_THROWS_WITH(detect(vars), "OMPI_COMM_WORLD_RANK: 'x1' is not a non-negative integer");
  vars["OMPI_COMM_WORLD_RANK"] = "-1";
  CHECK_THROWS_WITH(detect(vars), "OMPI_COMM_WORLD_RANK: '-1' is not a non-negative integer");
  vars["OMPI_COMM_WORLD_RANK"] = "2 ";
  CHECK_THROWS_WITH(detect(vars), "OMPI_COMM_WORLD_RANK: '2 ' is not a non-negative integer");
  vars["OMPI_COMM_WORLD_RANK"] = "8";
  CHECK_THROWS_WITH(detect(vars), "OMPI_COMM_WORLD_RANK=8 is not a rank of OMPI_COMM_WORLD_SIZE=8");
  vars = kSlurm;
  vars.erase("SLURM_LOCALID");
  CHECK_THROWS_WITH(detect(vars), "SLURM_LOCALID: not set, but the other variables of a Slurm launch are");
  vars = kSlurm;
  vars["SLURM_NTASKS"] = "0";
  CHECK_THROWS_WITH(detect(vars), "SLURM_NTASKS: a world of 0 processes");
  vars = kSlurm;
  vars["SLURM_LOCALID"] = "16";
  CHECK_THROWS_WITH(detect(vars), "SLURM_LOCALID=16 is not a rank of SLURM_NTASKS=16");
}

TEST_CASE("single-process communicator: sums over one rank are the inputs") {
  SingleProcessCommunicator c;
  CHECK(c.rank() == 0);
  CHECK(c.world_size() == 1);
  std::vector<float> buf = {1.5f, -2.0f, 3.25f};
  c.all_reduce_sum(buf.data(), buf.size());
  CHECK(buf == std::vector<float>{1.5f, -2.0f, 3.25f});
  CHECK(c.all_reduce_sum(2.5) == 2.5);
  CHECK(c.all_reduce_sum(0.1f) == 0.1f);
  std::vector<float> out(3, 0.0f);
  c.reduce_scatter_sum(buf.data(), out.data(), 3);
  CHECK(out == buf);
  std::fill(out.begin(), out.end(), 0.0f);
  c.all_gather(buf.data(), out.data(), 3);
  CHECK(out == buf);
  int x = 7;
  c.broadcast(&x, sizeof x, 0);
  CHECK(x == 7);
  CHECK_THROWS_AS(c.broadcast(&x, sizeof x, 1), std::invalid_argument);
  c.barrier();
}
