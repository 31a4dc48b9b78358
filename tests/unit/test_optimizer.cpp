// The optimizer interface's checks (llmc/optim/optimizer.h): the registration lookup, the state a
// backend accepts, and the step count, each through the CPU backend where a backend takes them.
#include <doctest/doctest.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "llmc/cpu/cpu_backend.h"
#include "llmc/optim/optimizer.h"

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("find_optimizer: adamw is the default; an unknown name is refused with the registered ones") {
  CHECK(llmc::default_optimizer().name == "adamw");
  CHECK(llmc::find_optimizer("adamw").state_names == std::vector<std::string>{"m", "v"});
  const std::string e = error_of([] { llmc::find_optimizer("lion"); });
  CHECK(e.find("unknown optimizer 'lion'") != std::string::npos);
  CHECK(e.find("registered: adamw") != std::string::npos);
}

TEST_CASE("CPU backend: set_optimizer_state refuses other names, order or sizes, and keeps what it accepts") {
  const llmc::GPT2Config c = llmc::config_from_descriptor("L1H2C16T32");
  llmc::CpuBackend backend(c);
  const size_t n = backend.partition().owned().size();
  const std::vector<float> m(n, 1.0f), v(n, 2.0f);
  CHECK(error_of([&] { backend.set_optimizer_state({{"v", v}, {"m", m}}); }).find("[v, m], but adamw keeps [m, v]") !=
        std::string::npos);
  CHECK(error_of([&] { backend.set_optimizer_state({{"m", m}}); }).find("[m], but adamw keeps [m, v]") !=
        std::string::npos);
  CHECK(error_of([&] { backend.set_optimizer_state({{"m", m}, {"v", std::vector<float>(n - 1)}}); })
            .find("'v' has " + std::to_string(n - 1) + " values, not " + std::to_string(n)) != std::string::npos);
  backend.set_optimizer_state({{"m", m}, {"v", v}});
  const std::vector<llmc::OptimizerTensor> got = backend.get_optimizer_state();
  REQUIRE(got.size() == 2);
  CHECK(got[0].values == m);
  CHECK(got[1].values == v);
}

TEST_CASE("CPU backend: an optimizer step count below 1 is refused (the bias corrections divide by 1 - beta^t)") {
  llmc::CpuBackend backend(llmc::config_from_descriptor("L1H2C16T32"));
  llmc::OptimizerStep step;
  step.t = 0;
  CHECK(error_of([&] { backend.optimizer_step(step); }).find("step count must be >= 1, got 0") != std::string::npos);
}
