// User-level contexts for the emulated GPU: every CUDA thread of a block is a fiber with its own
// stack, switched to and from its worker's own context by a few instructions (fiber.cpp), so a
// barrier or a shuffle can suspend one CUDA thread and run the next.
//
// Why a switch of our own rather than ucontext: swapcontext saves and restores the signal mask with
// a system call on every switch (docs/cuda-emulator.md has the measured cost); the switch here saves
// only what the x86-64 System V ABI says a callee must preserve (rbx, rbp, r12-r15, the stack
// pointer, MXCSR and the x87 control word). The sanitizers are told of every switch
// (__sanitizer_start_switch_fiber for ASan, __tsan_switch_to_fiber for TSan).
#pragma once
#include <cstddef>

namespace emu {

// A saved context: where its stack pointer was left, and what the sanitizers need to know of it.
struct Context {
  void* sp = nullptr;
  const void* stack_bottom = nullptr;  // lowest usable address (null for a worker's own stack)
  size_t stack_size = 0;
  void* asan_fake_stack = nullptr;
  void* tsan_fiber = nullptr;
};

// A fiber's stack: mmap'ed with a guard page below it, so an overflow faults instead of
// overwriting another fiber's stack.
class FiberStack {
 public:
  explicit FiberStack(size_t bytes);
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;
  void* bottom() const { return bottom_; }
  size_t size() const { return size_; }

 private:
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  void* bottom_ = nullptr;
  size_t size_ = 0;
};

// Sets `fiber` up so that the next switch to it calls entry(arg) on `stack` (entry never returns).
void prepare_context(Context& fiber, const FiberStack& stack, void (*entry)(void*), void* arg);

// The calling worker thread's own context, to switch back to (and its TSan identity).
void init_worker_context(Context& worker);

// Saves the running context into `from` and resumes `to`; returns when something switches back.
void switch_context(Context& from, Context& to);

// Called first thing by a fiber's entry function: completes the switch that started it, and
// records in `came_from` (the worker's context) the stack ASan must be told of to switch back.
void fiber_started(Context& came_from);

// Releases a fiber context's TSan identity.
void destroy_context(Context& fiber);

}  // namespace emu
