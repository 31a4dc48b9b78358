// The cost of one switch between two user-level contexts: the emulated GPU's own switch
// (emulator/runtime/fiber.h) against ucontext's swapcontext, side by side in one run.
//   make emu-switch-cost      (built without sanitizers; prints ns per switch for each)
#include <ucontext.h>

#include <chrono>
#include <cstdio>

#include "emulator/runtime/fiber.h"

namespace {

constexpr long kRounds = 2000000;  // each round is two switches: there and back

emu::Context main_context, fiber_context;

void own_fiber(void*) {
  emu::fiber_started(main_context);
  for (;;) emu::switch_context(fiber_context, main_context);
}

ucontext_t main_uc, fiber_uc;

void ucontext_fiber() {
  for (;;) swapcontext(&fiber_uc, &main_uc);
}

template <class F>
double ns_per_switch(F&& round) {
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < kRounds; ++i) round();
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  return ns / (2.0 * kRounds);
}

}  // namespace

int main() {
  emu::FiberStack stack(64 * 1024);
  emu::init_worker_context(main_context);
  emu::prepare_context(fiber_context, stack, own_fiber, nullptr);

  emu::FiberStack uc_stack(64 * 1024);
  getcontext(&fiber_uc);
  fiber_uc.uc_stack.ss_sp = uc_stack.bottom();
  fiber_uc.uc_stack.ss_size = uc_stack.size();
  fiber_uc.uc_link = nullptr;
  makecontext(&fiber_uc, ucontext_fiber, 0);

  // Alternating measurements, so that both see the same machine state.
  for (int rep = 0; rep < 3; ++rep) {
    const double own = ns_per_switch([] { emu::switch_context(main_context, fiber_context); });
    const double uc = ns_per_switch([] { swapcontext(&main_uc, &fiber_uc); });
    std::printf("emulator switch %6.1f ns   ucontext swapcontext %6.1f ns   ratio %.1fx\n", own, uc, uc / own);
  }
  return 0;
}
