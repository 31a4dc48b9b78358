#include "llmc/dist/process_layout.h"

#include <cerrno>
#include <cstdlib>
#include <fmt/format.h>
#include <stdexcept>

namespace llmc {

namespace {

struct LauncherVariables {
  Launcher launcher;
  const char* rank;
  const char* size;
  const char* local_rank;
};

// In order of precedence (see the header for why OpenMPI's come first).
constexpr LauncherVariables kLaunchers[] = {
    {Launcher::kOpenMpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {Launcher::kSlurm, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

int read_int(const EnvLookup& env, const char* name, Launcher launcher) {
  const char* text = env(name);
  if (text == nullptr)
    throw std::runtime_error(fmt::format("{}: not set, but the other variables of a {} launch are", name,
                                         launcher_name(launcher)));
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*text < '0' || *text > '9' || *end != '\0' || errno != 0 || value > 1000000000L)
    throw std::runtime_error(fmt::format("{}: '{}' is not a non-negative integer", name, text));
  return int(value);
}

}  // namespace

const char* launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::kOpenMpi: return "OpenMPI";
    case Launcher::kSlurm: return "Slurm";
    case Launcher::kNone: break;
  }
  return "no launcher";
}

ProcessLayout detect_process_layout(const EnvLookup& env) {
  for (const LauncherVariables& v : kLaunchers) {
    if (env(v.rank) == nullptr && env(v.size) == nullptr) continue;
    ProcessLayout layout;
    layout.launcher = v.launcher;
    layout.rank = read_int(env, v.rank, v.launcher);
    layout.world_size = read_int(env, v.size, v.launcher);
    layout.local_rank = read_int(env, v.local_rank, v.launcher);
    if (layout.world_size < 1) throw std::runtime_error(fmt::format("{}: a world of 0 processes", v.size));
    if (layout.rank >= layout.world_size)
      throw std::runtime_error(fmt::format("{}={} is not a rank of {}={}", v.rank, layout.rank, v.size, layout.world_size));
    if (layout.local_rank >= layout.world_size)
      throw std::runtime_error(fmt::format("{}={} is not a rank of {}={}", v.local_rank, layout.local_rank, v.size,
                                           layout.world_size));
    return layout;
  }
  return ProcessLayout{};
}

ProcessLayout detect_process_layout() {
  return detect_process_layout([](const char* name) { return static_cast<const char*>(std::getenv(name)); });
}

}  // namespace llmc
