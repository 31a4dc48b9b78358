#include "llmc/dist/rank_options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <stdexcept>
#include <sys/stat.h>

namespace llmc {

namespace {

// The variable a launcher's size and rank came from, for messages.
const char* size_variable(Launcher l) { return l == Launcher::kOpenMpi ? "OMPI_COMM_WORLD_SIZE" : "SLURM_NTASKS"; }
const char* rank_variable(Launcher l) { return l == Launcher::kOpenMpi ? "OMPI_COMM_WORLD_RANK" : "SLURM_PROCID"; }

// -pi mpi: the launcher decides; -pn and -pr may only repeat what it says.
void check_mpi_flags(const RankOptions& o, const ProcessLayout& launched) {
  if (launched.launcher == Launcher::kNone) {
    if (o.num_processes > 1)
      throw std::runtime_error(fmt::format(
          "-pn {}: with -pi mpi (the default) the processes come from a launcher, and none started this one: run "
          "`mpirun -np {} ...`, or start each process yourself with -pi tcp -ps <rank 0's address> (or -pi fs -pf "
          "<shared folder>) and its own -pr",
          o.num_processes, o.num_processes));
    if (o.process_rank > 0)
      throw std::runtime_error(fmt::format(
          "-pr {}: with -pi mpi (the default) the rank comes from a launcher, and none started this process: use "
          "-pi tcp or -pi fs with -pn to start ranks yourself",
          o.process_rank));
    return;
  }
  if (o.num_processes > 0 && o.num_processes != launched.world_size)
    throw std::runtime_error(fmt::format("-pn {}: {} started {} processes ({}={})", o.num_processes,
                                         launcher_name(launched.launcher), launched.world_size,
                                         size_variable(launched.launcher), launched.world_size));
  if (o.process_rank >= 0 && o.process_rank != launched.rank)
    throw std::runtime_error(fmt::format("-pr {}: {} says this process is rank {} ({}={})", o.process_rank,
                                         launcher_name(launched.launcher), launched.rank,
                                         rank_variable(launched.launcher), launched.rank));
}

// -pi tcp|fs: -pn and -pr, or the launcher's variables where a flag is missing.
ProcessLayout layout_from_flags(const RankOptions& o, const ProcessLayout& launched) {
  const char* method = init_method_name(o.method);
  const bool from_launcher = launched.launcher != Launcher::kNone;
  ProcessLayout layout = launched;
  if (o.num_processes > 0) {
    if (from_launcher && o.num_processes != launched.world_size)
      throw std::runtime_error(fmt::format("-pn {}: {} started {} processes ({}={})", o.num_processes,
                                           launcher_name(launched.launcher), launched.world_size,
                                           size_variable(launched.launcher), launched.world_size));
    layout.world_size = o.num_processes;
  } else if (!from_launcher) {
    throw std::runtime_error(fmt::format(
        "-pi {}: -pn (the number of processes) is not given, and no launcher's variables (SLURM_NTASKS, "
        "OMPI_COMM_WORLD_SIZE) say it",
        method));
  }
  if (o.process_rank >= 0) {
    if (from_launcher && o.process_rank != launched.rank)
      throw std::runtime_error(fmt::format("-pr {}: {} says this process is rank {} ({}={})", o.process_rank,
                                           launcher_name(launched.launcher), launched.rank,
                                           rank_variable(launched.launcher), launched.rank));
    layout.rank = o.process_rank;
  } else if (!from_launcher) {
    throw std::runtime_error(fmt::format(
        "-pi {}: -pr (this process's rank, 0 to {}) is not given, and no launcher's variables (SLURM_PROCID, "
        "OMPI_COMM_WORLD_RANK) say it",
        method, layout.world_size - 1));
  }
  if (layout.rank >= layout.world_size)
    throw std::runtime_error(fmt::format("-pr {}: not a rank of -pn {} (the ranks are 0 to {})", layout.rank,
                                         layout.world_size, layout.world_size - 1));
  if (!from_launcher) layout.local_rank = layout.rank % o.gpus_per_node;
  return layout;
}

// "host" or "host:port"; an address with several ':' (IPv6) is a host without a port.
void split_server(const std::string& server, std::string& host, int& port) {
  const size_t colon = server.find(':');
  if (colon == std::string::npos || server.find(':', colon + 1) != std::string::npos) {
    host = server;
    port = kDefaultRendezvousPort;
    return;
  }
  host = server.substr(0, colon);
  const std::string text = server.substr(colon + 1);
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < 1 || value > 65535)
    throw std::runtime_error(fmt::format("-ps {}: port '{}' is not a number from 1 to 65535", server, text));
  if (host.empty()) throw std::runtime_error(fmt::format("-ps {}: no host before the port", server));
  port = int(value);
}

double rendezvous_timeout(const EnvLookup& env) {
  const char* text = env("LLMC_RENDEZVOUS_TIMEOUT");
  if (text == nullptr) return kDefaultRendezvousTimeout;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (*text == '\0' || *end != '\0' || !std::isfinite(seconds) || seconds <= 0.0)
    throw std::runtime_error(
        fmt::format("LLMC_RENDEZVOUS_TIMEOUT: '{}' is not a number of seconds greater than 0", text));
  return seconds;
}

}  // namespace

const char* init_method_name(InitMethod method) {
  switch (method) {
    case InitMethod::kTcp: return "tcp";
    case InitMethod::kFs: return "fs";
    case InitMethod::kMpi: break;
  }
  return "mpi";
}

RankPlan plan_ranks(const RankOptions& o, const EnvLookup& env) {
  RankPlan plan;
  plan.method = o.method;
  if (!o.fs_dir.empty() && o.method != InitMethod::kFs)
    throw std::runtime_error(fmt::format("-pf {}: only -pi fs uses a shared folder (this run is -pi {})", o.fs_dir,
                                         init_method_name(o.method)));
  if (!o.server.empty() && o.method != InitMethod::kTcp)
    throw std::runtime_error(fmt::format("-ps {}: only -pi tcp uses a server address (this run is -pi {})", o.server,
                                         init_method_name(o.method)));
  const ProcessLayout launched = detect_process_layout(env);
  if (o.method == InitMethod::kMpi) {
    check_mpi_flags(o, launched);
    plan.layout = launched;
    return plan;
  }
  plan.layout = layout_from_flags(o, launched);
  plan.rendezvous_timeout = rendezvous_timeout(env);
  if (plan.layout.world_size == 1) return plan;
  if (o.method == InitMethod::kTcp) {
    if (o.server.empty())
      throw std::runtime_error("-pi tcp: -ps (the address of rank 0's machine, where rank 0 listens) is not given");
    split_server(o.server, plan.host, plan.port);
    return plan;
  }
  if (o.fs_dir.empty())
    throw std::runtime_error("-pi fs: -pf (a folder every rank sees, for rank 0's address file) is not given");
  struct stat st{};
  if (stat(o.fs_dir.c_str(), &st) != 0)
    throw std::runtime_error(fmt::format("-pf {}: no such folder (every rank needs it: a shared file system)", o.fs_dir));
  if (!S_ISDIR(st.st_mode)) throw std::runtime_error(fmt::format("-pf {}: not a folder", o.fs_dir));
  plan.fs_dir = o.fs_dir;
  return plan;
}

}  // namespace llmc
