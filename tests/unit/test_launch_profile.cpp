// LLMC_PROFILE's CUDA-free parts (llmc/cuda/launch_profile.h): the variable, kernel names parsed
// from the signatures g++ (nvcc's host compiler) and clang print, and the `profile:` table.
#include <doctest/doctest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "llmc/cuda/launch_profile.h"
#include "tests/unit/test_support.h"

using namespace llmc;
using test_support::contains;

TEST_CASE("launch profile: kernel names from g++'s and clang's signatures") {
  // As g++ prints them under nvcc and in the emulated build (checked by hand with both).
  CHECK(kernel_name_from_signature("const string& llmc::kernel_name() [with auto Kernel = "
                                   "layernorm_forward_kernel<__nv_bfloat16, true>; std::string = "
                                   "std::__cxx11::basic_string<char>]") == "layernorm_forward_kernel<__nv_bfloat16, true>");
  CHECK(kernel_name_from_signature("const char* llmc::name() [with auto Kernel = llmc::{anonymous}::accumulate_loss_kernel]") ==
        "accumulate_loss_kernel");
  CHECK(kernel_name_from_signature("f() [Kernel = &llmc::convert_kernel<float, llmc::bf16>]") ==
        "convert_kernel<float, llmc::bf16>");
  CHECK(kernel_name_from_signature("f() [with auto Kernel = (& llmc::bar_kernel)]") == "bar_kernel");
  CHECK(kernel_name_from_signature("no parameter here") == "no parameter here");
}

TEST_CASE("launch profile: the table, per step, most time first, shares summing to 100%") {
  const std::vector<std::string> lines =
      profile_table({{"small", 4, 2.0}, {"big kernel<float>", 2, 6.0}, {"gemm m=1 n=2 k=3 TN +=", 6, 0.0}}, 2, 1);
  REQUIRE(lines.size() == 5);
  // 12 calls, 8 ms over 2 steps: 6 calls and 4 ms per step.
  CHECK(lines[0] == "profile: 2 step(s) after 1 warm-up: 6 calls, 4.000 ms of GPU time per step (CUDA events "
                    "around each call, summed over the streams)");
  CHECK(lines[1] == "profile:    ms/step   share  calls/step  name");
  CHECK(lines[2] == "profile:      3.000  75.00%           1  big kernel<float>");
  CHECK(lines[3] == "profile:      1.000  25.00%           2  small");
  CHECK(lines[4] == "profile:      0.000   0.00%           3  gemm m=1 n=2 k=3 TN +=");
  const std::vector<std::string> none = profile_table({{"x", 1, 1.0}}, 0, 1);
  REQUIRE(none.size() == 1);
  CHECK(contains(none[0], "profile: no training step after the 1 warm-up step(s)"));
}

TEST_CASE("launch profile: LLMC_PROFILE on, off or unset; anything else named") {
  ::unsetenv("LLMC_PROFILE");
  CHECK_FALSE(profile_from_env());
  ::setenv("LLMC_PROFILE", "on", 1);
  CHECK(profile_from_env());
  ::setenv("LLMC_PROFILE", "off", 1);
  CHECK_FALSE(profile_from_env());
  ::setenv("LLMC_PROFILE", "1", 1);
  try {
    profile_from_env();
    FAIL("LLMC_PROFILE=1 was accepted");
  } catch (const std::runtime_error& e) {
    CHECK(contains(e.what(), "LLMC_PROFILE: '1' is neither 'on' nor 'off'"));
  }
  ::unsetenv("LLMC_PROFILE");
}
