#include "llmc/test_hooks.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

namespace llmc {

void test_hook_pause_before_rename() {
  const char* ms = std::getenv("LLMC_TEST_PAUSE_BEFORE_RENAME_MS");
  if (ms != nullptr && std::atoi(ms) > 0) std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
}

void test_hook_stall_at_step(int step) {
  static const char* const stall_step = std::getenv("LLMC_TEST_STALL_AT_STEP");
  if (stall_step == nullptr || *stall_step == '\0' || std::atoi(stall_step) != step) return;
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

int test_hook_fp8_stale_amax_shift() {
  static const char* const shift = std::getenv("LLMC_TEST_FP8_STALE_AMAX");
  return shift == nullptr ? 0 : std::atoi(shift);
}

std::optional<float> test_hook_poisoned_gradient(int step) {
  static const char* const poison = std::getenv("LLMC_TEST_POISON_GRADIENT");
  if (poison == nullptr || *poison == '\0' || std::atoi(poison) != step) return std::nullopt;
  const bool inf = std::strstr(poison, ":inf") != nullptr;
  return inf ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
}

}  // namespace llmc
