#include "llmc/optim/optimizer.h"

#include <fmt/format.h>
#include <stdexcept>

#include "llmc/optim/registry.h"

namespace llmc {

namespace {

template <class... Optimizers>
std::vector<OptimizerSpec> specs_of(OptimizerList<Optimizers...>) {
  return {OptimizerSpec{Optimizers::kName,
                        std::vector<std::string>(Optimizers::kStateNames.begin(), Optimizers::kStateNames.end())}...};
}

// "a, b, c". (Not fmt::join: with GCC 12 at -O3, fmt 9's join trips -Wstringop-overflow, a false
// positive that the -Werror CUDA host build stops on.)
std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

}  // namespace

const std::vector<OptimizerSpec>& registered_optimizers() {
  static const std::vector<OptimizerSpec> specs = specs_of(RegisteredOptimizers{});
  return specs;
}

const OptimizerSpec& default_optimizer() { return registered_optimizers().front(); }

std::string registered_optimizer_names() {
  std::vector<std::string> names;
  for (const OptimizerSpec& s : registered_optimizers()) names.push_back(s.name);
  return joined(names);
}

const OptimizerSpec& find_optimizer(const std::string& name) {
  for (const OptimizerSpec& s : registered_optimizers())
    if (s.name == name) return s;
  throw std::invalid_argument(
      fmt::format("unknown optimizer '{}' (registered: {})", name, registered_optimizer_names()));
}

std::vector<OptimizerTensor> zero_optimizer_state(const OptimizerSpec& spec, size_t n) {
  std::vector<OptimizerTensor> state;
  for (const std::string& name : spec.state_names) state.push_back({name, std::vector<float>(n, 0.0f)});
  return state;
}

void check_optimizer_state(const OptimizerSpec& spec, const std::vector<OptimizerTensor>& state, size_t n,
                           const std::string& who) {
  std::vector<std::string> names;
  for (const OptimizerTensor& t : state) {
    if (t.values.size() != n)
      throw std::invalid_argument(fmt::format("{}: optimizer state tensor '{}' has {} values, not {}", who, t.name,
                                              t.values.size(), n));
    names.push_back(t.name);
  }
  if (names != spec.state_names)
    throw std::invalid_argument(fmt::format("{}: optimizer state tensors [{}], but {} keeps [{}]", who,
                                            joined(names), spec.name, joined(spec.state_names)));
}

void check_optimizer_step(const OptimizerStep& step) {
  if (step.t < 1) throw std::invalid_argument(fmt::format("optimizer step count must be >= 1, got {}", step.t));
}

}  // namespace llmc
