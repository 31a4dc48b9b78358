// LLMC_PROFILE's variable and table (llmc/cuda/launch_profile.h).
#include "llmc/cuda/launch_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace llmc {

bool profile_from_env() {
  const char* env = std::getenv("LLMC_PROFILE");
  const std::string value = env ? env : "";
  if (value.empty() || value == "off") return false;
  if (value == "on") return true;
  throw std::runtime_error(fmt::format("LLMC_PROFILE: '{}' is neither 'on' nor 'off' (times every kernel launch, "
                                       "GEMM and cuDNN call of a training step with CUDA events)",
                                       value));
}

std::vector<std::string> profile_table(std::vector<ProfileRow> rows, int steps, int warmup_steps) {
  if (steps <= 0)
    return {fmt::format("profile: no training step after the {} warm-up step(s): nothing to show", warmup_steps)};
  std::stable_sort(rows.begin(), rows.end(), [](const ProfileRow& a, const ProfileRow& b) { return a.ms > b.ms; });
  double total_ms = 0.0;
  long long calls = 0;
  for (const ProfileRow& r : rows) {
    total_ms += r.ms;
    calls += r.calls;
  }
  std::vector<std::string> lines;
  lines.push_back(fmt::format("profile: {} step(s) after {} warm-up: {:g} calls, {:.3f} ms of GPU time per step "
                              "(CUDA events around each call, summed over the streams)",
                              steps, warmup_steps, double(calls) / steps, total_ms / steps));
  lines.push_back("profile:    ms/step   share  calls/step  name");
  for (const ProfileRow& r : rows)
    lines.push_back(fmt::format("profile: {:10.3f} {:6.2f}% {:11g}  {}", r.ms / steps,
                                total_ms > 0 ? 100.0 * r.ms / total_ms : 0.0, double(r.calls) / steps, r.name));
  return lines;
}

}  // namespace llmc
