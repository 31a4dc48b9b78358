// Device memory on the emulated GPU: cudaMalloc and cudaFree, pinned host memory, copies, fills and
// the free-memory query (less what LLMC_EMU_MEMORY_TAKEN says another process holds). Device memory
// is host memory from the allocator, filled with 0xFF bytes (NaN in fp32 and bf16) as a real
// cudaMalloc leaves it uninitialised; under ASan an allocation is poisoned except while the device
// runs work that was given it (a DeviceWorkBatch, while the host waits in the runtime), so host
// code that touches it directly, or a kernel that reaches into an allocation it was not given, is
// reported.
// Copies and fills are queued on their streams; which copies the host waits for follows the
// runtime's documented synchronisation rules (pinned or pageable host memory, synchronous or
// asynchronous call).
#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "emulator/runtime/device_memory.h"
#include "emulator/runtime/emulator.h"
#include "emulator/runtime/runtime_state.h"
#include "emulator/runtime/stream_capture.h"
#include "emulator/runtime/stream_order.h"

#if defined(LLMC_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace emu {
namespace {

void poison([[maybe_unused]] const void* p, [[maybe_unused]] size_t bytes) {
#if defined(LLMC_EMU_ASAN)
  __asan_poison_memory_region(p, bytes);
#endif
}
void unpoison([[maybe_unused]] const void* p, [[maybe_unused]] size_t bytes) {
#if defined(LLMC_EMU_ASAN)
  __asan_unpoison_memory_region(p, bytes);
#endif
}

// LLMC_EMU_MEMORY_TAKEN=<MiB>: device memory that another process holds, as on a GPU shared with
// one: cudaMemGetInfo's free memory and what cudaMalloc can get shrink by it. Read at every call, so
// that a test may set it around one check; a malformed value stops the program, naming the variable.
size_t memory_taken() {
  const char* env = std::getenv("LLMC_EMU_MEMORY_TAKEN");
  if (env == nullptr || *env == '\0') return 0;
  char* end = nullptr;
  const unsigned long long mib = std::strtoull(env, &end, 10);
  if (*end != '\0' || !std::isdigit(static_cast<unsigned char>(*env)) || mib > (kGlobalMemory >> 20)) {
    std::fprintf(stderr, "emulated GPU: LLMC_EMU_MEMORY_TAKEN is '%s'; it must be a whole number of MiB, at most %zu\n",
                 env, kGlobalMemory >> 20);
    std::exit(2);
  }
  return size_t(mib) << 20;
}

size_t size_of(const Allocation& a) { return a.bytes; }
size_t size_of(size_t bytes) { return bytes; }

// The allocation of `allocs` (a map of start -> its size, or an Allocation; const or not) that
// holds [p, p + bytes) whole (at least p itself), or null.
template <class Map>
auto holding(Map& allocs, const void* p, size_t bytes) -> decltype(&*allocs.begin()) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = allocs.upper_bound(a);
  if (it == allocs.begin()) return nullptr;
  --it;
  if (a + std::max<size_t>(bytes, 1) > it->first + size_of(it->second)) return nullptr;
  return &*it;
}

// The device allocation that holds [p, p + bytes), or null.
const std::pair<const uintptr_t, Allocation>* device_range(const void* p, size_t bytes) {
  return holding(std::as_const(state().allocations), p, bytes);
}

bool is_device(const void* p) {
  std::lock_guard<std::mutex> lock(state().mutex);
  return device_range(p, 0) != nullptr;
}

// Whether [p, p + bytes) is pinned host memory (cudaMallocHost); other host memory is pageable.
bool is_pinned(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(state().mutex);
  return holding(state().host_allocations, p, bytes) != nullptr;
}

// Checks one side of a copy: device memory holding the whole range, or (is_device false) not
// device memory at all.
cudaError_t check_side(const char* call, const char* side, const void* p, size_t bytes, bool want_device) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (want_device && !device_range(p, bytes))
    return fail(cudaErrorInvalidValue, std::string(call) + ": " + side + " " + pointer_text(p) + " (+" +
                                           std::to_string(bytes) + " bytes) is not inside one device allocation");
  if (!want_device && device_range(p, 0))
    return fail(cudaErrorInvalidValue,
                std::string(call) + ": " + side + " " + pointer_text(p) + " is device memory, not host memory");
  return cudaSuccess;
}

// A copy, checked when issued, run in stream order. When the host waits for it follows the
// runtime's documented synchronisation behaviour:
//   - from pageable host memory, the source is read when the call is made (staged);
//   - to pageable host memory, the call returns once the copy has run;
//   - cudaMemcpy (synchronous, on the legacy default stream) returns once the copy has run,
//     except between device buffers;
//   - cudaMemcpyAsync with pinned memory, and between device buffers, returns at once;
//   - host to host is a plain copy, at once.
// On a capturing stream the copy is recorded: it reads and writes host memory, pinned or not, when
// the graph runs, as a graph's memcpy node does; a synchronous cudaMemcpy is potentially unsafe
// then (stream_capture.h).
cudaError_t copy(const char* call, void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream,
                 bool synchronous) {
  if (cudaError_t e = sticky_error()) return e;
  if (synchronous)
    if (cudaError_t e = capture_allows_unsafe_call(call)) return e;
  if (count == 0) return cudaSuccess;
  if (kind == cudaMemcpyDefault)
    kind = is_device(dst) ? (is_device(src) ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                          : (is_device(src) ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyHostToHost)
    return fail(cudaErrorInvalidMemcpyDirection, std::string(call) + ": copy kind " + std::to_string(int(kind)));
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (cudaError_t e = check_side(call, "destination", dst, count, dst_device)) return e;
  if (cudaError_t e = check_side(call, "source", src, count, src_device)) return e;
  if (kind == cudaMemcpyHostToHost) {
    std::memmove(dst, src, count);
    return cudaSuccess;
  }
  // The host side's kind of memory: pinned host memory is read or written when the copy runs.
  const bool host_pinned = kind == cudaMemcpyHostToDevice   ? is_pinned(src, count)
                           : kind == cudaMemcpyDeviceToHost ? is_pinned(dst, count)
                                                            : false;
  const bool captured = stream_capturing(stream);
  cudaError_t issued = cudaSuccess;
  if (kind == cudaMemcpyHostToDevice && !host_pinned && !captured) {
    std::vector<unsigned char> staged(static_cast<const unsigned char*>(src),
                                      static_cast<const unsigned char*>(src) + count);
    issued = device_work(stream, [dst, staged = std::move(staged)] {
      with_device_memory({dst}, [&] { std::memcpy(dst, staged.data(), staged.size()); });
    });
  } else {
    issued = device_work(stream, [=] { with_device_memory({dst, src}, [&] { std::memmove(dst, src, count); }); });
  }
  if (issued != cudaSuccess) return issued;
  const bool host_waits = kind == cudaMemcpyDeviceToHost   ? synchronous || !host_pinned
                          : kind == cudaMemcpyHostToDevice ? synchronous && host_pinned
                                                           : false;
  if (host_waits && !captured) finish_stream(stream);
  return sticky_error();
}

// cudaMemset[Async] on device memory: queued, the host does not wait.
cudaError_t fill(const char* call, void* p, int value, size_t count, cudaStream_t stream) {
  if (cudaError_t e = sticky_error()) return e;
  if (count == 0) return cudaSuccess;
  if (cudaError_t e = check_side(call, "destination", p, count, true)) return e;
  return device_work(stream, [=] { with_device_memory({p}, [&] { std::memset(p, value, count); }); });
}

}  // namespace

// An allocation is usable from the first work of a batch that uses it to the batch's end:
// `batch_depth` counts the batches open (nested when a library call's work runs inside the
// scheduler's), Allocation::open says which allocations work has unpoisoned. Under state().mutex.
namespace {
int batch_depth = 0;
}  // namespace

DeviceWorkBatch::DeviceWorkBatch() {
  std::lock_guard<std::mutex> lock(state().mutex);
  ++batch_depth;
}

DeviceWorkBatch::~DeviceWorkBatch() {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (--batch_depth > 0) return;
  for (auto& [start, a] : state().allocations)
    if (a.open) {
      poison(reinterpret_cast<void*>(start), a.bytes);
      a.open = false;
    }
}

void with_kernel_memory(const void* args, size_t bytes, const std::function<void()>& work) {
  const DeviceWorkBatch batch;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    for (size_t at = 0; at + sizeof(uintptr_t) <= bytes; at += sizeof(uintptr_t)) {
      uintptr_t word;
      std::memcpy(&word, static_cast<const char*>(args) + at, sizeof word);
      auto* held = holding(state().allocations, reinterpret_cast<const void*>(word), 0);
      if (!held || held->second.open) continue;
      unpoison(reinterpret_cast<void*>(held->first), held->second.bytes);
      held->second.open = true;
    }
  }
  work();
}

// The pointers, laid out one after another, are words of arguments like a kernel's.
void with_device_memory(std::initializer_list<const void*> pointers, const std::function<void()>& work) {
  with_kernel_memory(pointers.begin(), pointers.size() * sizeof(const void*), work);
}

bool inside_device_allocation(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(state().mutex);
  return device_range(p, bytes) != nullptr;
}

std::vector<size_t> live_allocation_sizes() {
  std::lock_guard<std::mutex> lock(state().mutex);
  std::map<uint64_t, size_t> by_call;
  for (const auto& [start, a] : state().allocations) by_call[a.serial] = a.bytes;
  std::vector<size_t> sizes;
  for (const auto& [serial, bytes] : by_call) sizes.push_back(bytes);
  return sizes;
}

}  // namespace emu

using namespace emu;

extern "C" {

cudaError_t cudaMalloc(void** ptr, size_t size) {
  if (cudaError_t e = sticky_error()) return e;
  if (cudaError_t e = capture_allows_unsafe_call("cudaMalloc")) return e;
  if (!ptr) return fail(cudaErrorInvalidValue, "cudaMalloc: null result pointer");
  *ptr = nullptr;
  if (size == 0) return cudaSuccess;
  std::lock_guard<std::mutex> lock(state().mutex);
  void* p = nullptr;
  if (state().allocated + memory_taken() + size > kGlobalMemory || posix_memalign(&p, 256, size) != 0)
    return fail(cudaErrorMemoryAllocation, "cudaMalloc of " + std::to_string(size) + " bytes");
  std::memset(p, 0xFF, size);
  poison(p, size);
  state().allocations[reinterpret_cast<uintptr_t>(p)] = Allocation{size, ++state().malloc_calls};
  state().allocated += size;
  *ptr = p;
  return cudaSuccess;
}

// cudaFree and cudaFreeHost wait for the device to finish, as the runtime's do.
cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  if (cudaError_t e = capture_allows_unsafe_call("cudaFree")) return e;
  finish_all();
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == state().allocations.end())
    return fail(cudaErrorInvalidValue, "cudaFree: " + pointer_text(ptr) + " is not the start of a device allocation");
  unpoison(ptr, it->second.bytes);
  state().allocated -= it->second.bytes;
  state().allocations.erase(it);
  std::free(ptr);
  return state().sticky;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  if (!ptr) return fail(cudaErrorInvalidValue, "cudaMallocHost: null result pointer");
  if (cudaError_t e = capture_allows_unsafe_call("cudaMallocHost")) return e;
  void* p = nullptr;
  if (posix_memalign(&p, 4096, size ? size : 1) != 0)
    return fail(cudaErrorMemoryAllocation, "cudaMallocHost of " + std::to_string(size) + " bytes");
  std::lock_guard<std::mutex> lock(state().mutex);
  state().host_allocations[reinterpret_cast<uintptr_t>(p)] = size ? size : 1;
  *ptr = p;
  return cudaSuccess;
}

// cudaMallocHost's C++ overload (with flags) calls this; every flag gives the same pinned memory here.
cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int) { return cudaMallocHost(ptr, size); }

cudaError_t cudaFreeHost(void* ptr) {
  if (!ptr) return cudaSuccess;
  if (cudaError_t e = capture_allows_unsafe_call("cudaFreeHost")) return e;
  finish_all();
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!state().host_allocations.erase(reinterpret_cast<uintptr_t>(ptr)))
    return fail(cudaErrorInvalidValue, "cudaFreeHost: " + pointer_text(ptr) + " is not from cudaMallocHost");
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  return copy("cudaMemcpy", dst, src, count, kind, nullptr, true);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
  if (cudaError_t e = check_stream("cudaMemcpyAsync", stream)) return e;
  return copy("cudaMemcpyAsync", dst, src, count, kind, stream, false);
}

cudaError_t cudaMemset(void* p, int value, size_t count) {
  if (cudaError_t e = capture_allows_unsafe_call("cudaMemset")) return e;
  return fill("cudaMemset", p, value, count, nullptr);
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t count, cudaStream_t stream) {
  if (cudaError_t e = check_stream("cudaMemsetAsync", stream)) return e;
  return fill("cudaMemsetAsync", p, value, count, stream);
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (cudaError_t e = sticky_error()) return e;
  std::lock_guard<std::mutex> lock(state().mutex);
  *free_bytes = kGlobalMemory - std::min(kGlobalMemory, state().allocated + memory_taken());
  *total_bytes = kGlobalMemory;
  return cudaSuccess;
}

}  // extern "C"
