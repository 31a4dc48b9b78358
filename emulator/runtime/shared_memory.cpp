// Shared memory on the emulated GPU: each worker's arena, fresh for every block it runs, and the
// device functions that hand out its dynamic part and its static arrays (LLMC_SHARED).
#include <sys/mman.h>

#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "emulator/runtime/block_worker.h"

#if defined(LLMC_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#endif
#if defined(LLMC_EMU_TSAN)
// In libtsan, not in its header: accesses (and intercepted memset) by the current fiber are not seen.
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
#endif

namespace emu {

namespace {

// The largest per-block shared memory of any GPU the project targets (H100: 227 KiB opt-in).
constexpr size_t kArenaBytes = kOptInSharedPerBlock;
// Between shared arrays: an access past one array's end lands here, where ASan reports it.
constexpr size_t kSharedRedzone = 256;

size_t round16(size_t n) { return (n + 15) / 16 * 16; }

unsigned char* map_arena() {
  void* p = mmap(nullptr, kArenaBytes + kSharedRedzone, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return static_cast<unsigned char*>(p);
}

}  // namespace

SharedArena::SharedArena() : bytes_(map_arena()) { poison(0, kArenaBytes + kSharedRedzone); }

SharedArena::~SharedArena() {
  unpoison(0, kArenaBytes + kSharedRedzone);
  munmap(bytes_, kArenaBytes + kSharedRedzone);
}

void SharedArena::begin_block(size_t dynamic_bytes, size_t limit) {
  limit_ = limit;
  dynamic_bytes_ = dynamic_bytes;
  statics_.clear();
  static_bytes_ = 0;
#if defined(LLMC_EMU_TSAN)
  // A new mapping over what the previous block used is how TSan forgets its fibers' accesses
  // (TSan's AnnotateNewMemory does nothing): to TSan too, this block's shared memory is new.
  const size_t page = 4096, dirty = (used_ + page - 1) / page * page;
  if (dirty > 0 &&
      mmap(bytes_, dirty, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != bytes_)
    throw std::runtime_error("emulated GPU: cannot renew the shared memory arena");
#endif
  used_ = round16(dynamic_bytes) + kSharedRedzone;
  fresh(0, dynamic_bytes);
}

void SharedArena::end_block() { poison(0, used_); }

size_t SharedArena::capacity() const { return kArenaBytes; }

void* SharedArena::allocate_static(const void* tag, size_t bytes) {
  for (const auto& s : statics_)
    if (s.first == tag) return bytes_ + s.second;
  const size_t offset = used_;
  if (dynamic_bytes_ + static_bytes_ + bytes > limit_ || offset + bytes + kSharedRedzone > kArenaBytes)
    device_fault(cudaErrorInvalidValue, "shared memory: " + std::to_string(dynamic_bytes_) + " dynamic + " +
                                            std::to_string(static_bytes_ + bytes) +
                                            " static bytes exceed the block's limit of " + std::to_string(limit_));
  statics_.push_back({tag, offset});
  static_bytes_ += bytes;
  used_ = offset + round16(bytes) + kSharedRedzone;
  fresh(offset, bytes);
  return bytes_ + offset;
}

// Uninitialised, as on a GPU: 0xFF bytes (NaN in fp32 and bf16); under ASan usable exactly. TSan
// does not see the fill: it is no CUDA thread's write.
void SharedArena::fresh(size_t offset, size_t bytes) {
  unpoison(offset, bytes);
#if defined(LLMC_EMU_TSAN)
  __tsan_ignore_thread_begin();
  std::memset(bytes_ + offset, 0xFF, bytes);
  __tsan_ignore_thread_end();
#else
  std::memset(bytes_ + offset, 0xFF, bytes);
#endif
}

void SharedArena::poison([[maybe_unused]] size_t offset, [[maybe_unused]] size_t bytes) {
#if defined(LLMC_EMU_ASAN)
  __asan_poison_memory_region(bytes_ + offset, bytes);
#endif
}

void SharedArena::unpoison([[maybe_unused]] size_t offset, [[maybe_unused]] size_t bytes) {
#if defined(LLMC_EMU_ASAN)
  __asan_unpoison_memory_region(bytes_ + offset, bytes);
#endif
}

void* dynamic_shared() { return worker("shared memory").arena().dynamic(); }

void* static_shared(const void* tag, size_t bytes) {
  return worker("shared memory").arena().allocate_static(tag, bytes);
}

}  // namespace emu
