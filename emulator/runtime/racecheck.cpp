// The emulated GPU's own shared-memory race check, the role compute-sanitizer's racecheck plays on a
// GPU, for kernels too large for ThreadSanitizer (docs/cuda-emulator.md). The kernels are compiled
// with -fsanitize=thread, which calls __tsan_read4(addr), __tsan_write16(addr), ... before every
// memory access; this file defines those hooks instead of linking ThreadSanitizer's runtime. An
// access outside the running block's shared memory costs a range compare. Inside it, each 4-byte
// word keeps its last write and last read (thread, barriers and warp operations completed then),
// and an access by another thread that no barrier (or, within a warp, no warp operation) ordered
// after a conflicting one is a race: read after write, write after read, write after write.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "emulator/runtime/shared_view.h"

namespace emu {
namespace {

struct Access {
  uint64_t block = 0;  // shared_view.block when it happened; another value: no access yet
  int thread = 0;
  uint32_t barriers = 0;
  uint32_t warp_syncs = 0;
};

struct Word {
  Access write, read;  // the last of each
  // Another thread read the word too, unordered with `read` and in the same barrier interval: a
  // write in that interval races with one of them (within a warp, this may be overcautious).
  bool other_readers = false;
};

thread_local std::vector<Word> shadow;

Access now() {
  const SharedView& v = shared_view;
  return {v.block, v.thread, v.barriers, v.warp_syncs[v.thread / kWarp]};
}

// Did `before` (an access of this block) happen, as the GPU orders it, before what the current
// thread does now?
bool ordered(const Access& before, const Access& current) {
  if (before.thread == current.thread) return true;
  if (before.barriers < current.barriers) return true;
  return before.thread / kWarp == current.thread / kWarp && before.warp_syncs < current.warp_syncs;
}

void race(const char* kind, size_t offset, const Access& other) {
  report_shared_race(std::string("shared memory race (") + kind + ") at byte " + std::to_string(offset) +
                     " of the block's shared memory, with thread " + std::to_string(other.thread) +
                     " (linear index), no __syncthreads or __syncwarp between");
}

void access(const void* p, size_t bytes, bool is_write) {
  const SharedView& v = shared_view;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (v.thread < 0 || a < v.begin || a >= v.end) return;
  const size_t words = (v.end - v.begin + 3) / 4;
  if (shadow.size() < words) shadow.resize(words);
  const Access current = now();
  const size_t last = std::min(words - 1, (a + bytes - 1 - v.begin) / 4);
  for (size_t i = (a - v.begin) / 4; i <= last; ++i) {
    Word& w = shadow[i];
    const bool written = w.write.block == v.block, read = w.read.block == v.block;
    if (written && !ordered(w.write, current))
      return race(is_write ? "write after write" : "read after write", i * 4, w.write);
    if (is_write) {
      if (read && (!ordered(w.read, current) || (w.other_readers && w.read.barriers == current.barriers)))
        return race("write after read", i * 4, w.read);
      w.write = current;
      w.read.block = 0;
      w.other_readers = false;
    } else {
      const bool concurrent = read && w.read.thread != current.thread && !ordered(w.read, current);
      w.other_readers = concurrent || (read && w.other_readers && w.read.barriers == current.barriers);
      w.read = current;
    }
  }
}

}  // namespace
}  // namespace emu

// The hooks -fsanitize=thread instruments with. Atomics are not races: they only do what they say.
extern "C" {
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_read_range(void* p, unsigned long n) { emu::access(p, n, false); }
void __tsan_write_range(void* p, unsigned long n) { emu::access(p, n, true); }
#define EMU_ACCESS_HOOKS(N)                                                   \
  void __tsan_read##N(void* p) { emu::access(p, N, false); }                  \
  void __tsan_write##N(void* p) { emu::access(p, N, true); }                  \
  void __tsan_unaligned_read##N(void* p) { emu::access(p, N, false); }        \
  void __tsan_unaligned_write##N(void* p) { emu::access(p, N, true); }
EMU_ACCESS_HOOKS(1)
EMU_ACCESS_HOOKS(2)
EMU_ACCESS_HOOKS(4)
EMU_ACCESS_HOOKS(8)
EMU_ACCESS_HOOKS(16)
#undef EMU_ACCESS_HOOKS

// The instrumented atomics pass the memory order as an int (the __ATOMIC_* values).
#define EMU_ATOMIC_HOOKS(N, T)                                                                          \
  T __tsan_atomic##N##_load(const volatile T* p, int order) { return __atomic_load_n(p, order); }       \
  void __tsan_atomic##N##_store(volatile T* p, T v, int order) { __atomic_store_n(p, v, order); }      \
  T __tsan_atomic##N##_exchange(volatile T* p, T v, int order) { return __atomic_exchange_n(p, v, order); } \
  T __tsan_atomic##N##_fetch_add(volatile T* p, T v, int order) { return __atomic_fetch_add(p, v, order); } \
  T __tsan_atomic##N##_fetch_sub(volatile T* p, T v, int order) { return __atomic_fetch_sub(p, v, order); } \
  T __tsan_atomic##N##_fetch_and(volatile T* p, T v, int order) { return __atomic_fetch_and(p, v, order); } \
  T __tsan_atomic##N##_fetch_or(volatile T* p, T v, int order) { return __atomic_fetch_or(p, v, order); }   \
  T __tsan_atomic##N##_fetch_xor(volatile T* p, T v, int order) { return __atomic_fetch_xor(p, v, order); } \
  int __tsan_atomic##N##_compare_exchange_strong(volatile T* p, T* expected, T desired, int order, int fail) { \
    return __atomic_compare_exchange_n(p, expected, desired, false, order, fail);                        \
  }                                                                                                     \
  int __tsan_atomic##N##_compare_exchange_weak(volatile T* p, T* expected, T desired, int order, int fail) { \
    return __atomic_compare_exchange_n(p, expected, desired, true, order, fail);                         \
  }                                                                                                     \
  T __tsan_atomic##N##_compare_exchange_val(volatile T* p, T expected, T desired, int order, int fail) {  \
    __atomic_compare_exchange_n(p, &expected, desired, false, order, fail);                              \
    return expected;                                                                                    \
  }
EMU_ATOMIC_HOOKS(8, uint8_t)
EMU_ATOMIC_HOOKS(16, uint16_t)
EMU_ATOMIC_HOOKS(32, uint32_t)
EMU_ATOMIC_HOOKS(64, uint64_t)
#undef EMU_ATOMIC_HOOKS
void __tsan_atomic_thread_fence(int order) { __atomic_thread_fence(order); }
void __tsan_atomic_signal_fence(int order) { __atomic_signal_fence(order); }
}
