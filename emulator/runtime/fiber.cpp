// The context switch (x86-64 System V) and the sanitizer annotations around it.
#include "emulator/runtime/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <new>
#include <stdexcept>

// The emulator's own code is not instrumented by either sanitizer. The ASan build defines
// LLMC_EMU_ASAN for it: it tells ASan of every switch between fibers, and poisons what kernels must
// not touch (instrumenting it would only slow the kernels' runs: it is no code under test).
#if defined(LLMC_EMU_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif
// Nor by TSan (its bookkeeping would make every CUDA thread of a block look ordered after every
// other); the TSan build defines LLMC_EMU_TSAN for it instead.
#if defined(LLMC_EMU_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

#if !defined(__x86_64__)
#error "the emulated GPU's context switch is written for x86-64"
#endif

// emu_switch(save, load): pushes the callee-saved registers, stores the stack pointer in *save,
// loads `load` as the stack pointer and pops the same registers from there. A fresh fiber's stack
// is laid out (prepare_context) so that the final `ret` lands in emu_fiber_start with the entry
// function in r12 and its argument in r13.
asm(R"(
    .text
    .globl emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch

    .globl emu_fiber_start
    .type emu_fiber_start, @function
emu_fiber_start:
    movq %r13, %rdi
    callq *%r12
    ud2
    .size emu_fiber_start, .-emu_fiber_start
    .section .note.GNU-stack,"",@progbits
    .text
)");

extern "C" void emu_switch(void** save, void* load);
extern "C" void emu_fiber_start();

namespace emu {

FiberStack::FiberStack(size_t bytes) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  size_ = (bytes + page - 1) / page * page;
  mapping_bytes_ = size_ + page;
  mapping_ = mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping_ == MAP_FAILED) throw std::bad_alloc();
  if (mprotect(mapping_, page, PROT_NONE) != 0) {
    munmap(mapping_, mapping_bytes_);
    throw std::runtime_error("emulated GPU: cannot protect a fiber stack's guard page");
  }
  bottom_ = static_cast<char*>(mapping_) + page;
}

FiberStack::~FiberStack() { munmap(mapping_, mapping_bytes_); }

void prepare_context(Context& fiber, const FiberStack& stack, void (*entry)(void*), void* arg) {
  const uintptr_t top = (reinterpret_cast<uintptr_t>(stack.bottom()) + stack.size()) & ~uintptr_t(15);
  // The return slot sits 8 bytes off a 16-byte boundary, so that after `ret` pops it the stack is
  // 16-byte aligned at emu_fiber_start's call, as the ABI wants at a call instruction.
  uint64_t* ret_slot = reinterpret_cast<uint64_t*>(top - 24);
  uint64_t* frame = ret_slot - 7;  // control words, r15, r14, r13, r12, rbx, rbp
  const uint32_t mxcsr = 0x1F80;   // all exceptions masked, round to nearest
  const uint16_t x87_control = 0x037F;
  std::memcpy(reinterpret_cast<char*>(frame), &mxcsr, 4);
  std::memcpy(reinterpret_cast<char*>(frame) + 4, &x87_control, 2);
  frame[1] = 0;                                  // r15
  frame[2] = 0;                                  // r14
  frame[3] = reinterpret_cast<uint64_t>(arg);    // r13
  frame[4] = reinterpret_cast<uint64_t>(entry);  // r12
  frame[5] = 0;                                  // rbx
  frame[6] = 0;                                  // rbp
  *ret_slot = reinterpret_cast<uint64_t>(&emu_fiber_start);
  ret_slot[1] = 0;
  fiber.sp = frame;
  fiber.stack_bottom = stack.bottom();
  fiber.stack_size = stack.size();
  fiber.asan_fake_stack = nullptr;
#if defined(LLMC_EMU_TSAN)
  if (!fiber.tsan_fiber) fiber.tsan_fiber = __tsan_create_fiber(0);
#endif
}

void init_worker_context(Context& worker) {
  worker = Context{};
#if defined(LLMC_EMU_TSAN)
  worker.tsan_fiber = __tsan_get_current_fiber();
#endif
}

void switch_context(Context& from, Context& to) {
#if defined(LLMC_EMU_ASAN)
  __sanitizer_start_switch_fiber(&from.asan_fake_stack, to.stack_bottom, to.stack_size);
#endif
#if defined(LLMC_EMU_TSAN)
  // no_sync: the switch itself orders nothing, so that TSan sees the CUDA threads of a block as
  // concurrent; barriers and shuffles say what they order with __tsan_release/__tsan_acquire.
  __tsan_switch_to_fiber(to.tsan_fiber, __tsan_switch_to_fiber_no_sync);
#endif
  emu_switch(&from.sp, to.sp);
#if defined(LLMC_EMU_ASAN)
  const void* previous_bottom = nullptr;
  size_t previous_size = 0;
  __sanitizer_finish_switch_fiber(from.asan_fake_stack, &previous_bottom, &previous_size);
#endif
}

void fiber_started([[maybe_unused]] Context& came_from) {
#if defined(LLMC_EMU_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &came_from.stack_bottom, &came_from.stack_size);
#endif
}

void destroy_context([[maybe_unused]] Context& fiber) {
#if defined(LLMC_EMU_TSAN)
  if (fiber.tsan_fiber) __tsan_destroy_fiber(fiber.tsan_fiber);
  fiber.tsan_fiber = nullptr;
#endif
}

}  // namespace emu
