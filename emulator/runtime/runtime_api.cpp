// The CUDA runtime API calls the project makes, on the emulated GPU, with the declarations of the
// toolkit's own cuda_runtime_api.h. Device memory is host memory from the allocator, filled with
// 0xFF bytes (NaN in fp32 and bf16) as a real cudaMalloc leaves it uninitialised; under ASan it is
// poisoned except while a kernel or a copy uses it, so host code that touches it directly is
// reported. Kernels, copies and fills are queued on their streams and run when stream_order.h's
// order says; which copies the host waits for follows the runtime's documented synchronisation
// rules (pinned or pageable host memory, synchronous or asynchronous call). A kernel fault is a
// sticky error, returned by every later call, as a GPU context's is.
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "emulator/runtime/block_runner.h"
#include "emulator/runtime/device_memory.h"
#include "emulator/runtime/kernel_launch.h"
#include "emulator/runtime/stream_order.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

struct CUstream_st {
  unsigned flags;
};
struct CUevent_st {
  unsigned flags;
  bool recorded;  // a record has run
  bool pending;   // a record is queued and has not run yet
  std::chrono::steady_clock::time_point when;
};

namespace emu {
namespace {

// The limits of the device the emulator stands for: an H100 SXM.
constexpr size_t kDefaultSharedPerBlock = 48 * 1024;
constexpr size_t kOptInSharedPerBlock = 232448;  // 227 KiB
constexpr size_t kGlobalMemory = 80ull << 30;

struct Allocation {
  size_t bytes;
  uint64_t serial;  // which cudaMalloc call made it: the order live_allocation_sizes reports
};

struct State {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> allocations;  // device memory by start address
  uint64_t malloc_calls = 0;
  size_t allocated = 0;
  std::map<uintptr_t, size_t> host_allocations;  // pinned memory (cudaMallocHost): start -> bytes
  std::set<cudaStream_t> streams;
  std::set<cudaEvent_t> events;
  std::map<const void*, int> max_dynamic_shared;  // cudaFuncSetAttribute
  cudaError_t sticky = cudaSuccess;
};
State& state() {
  static State* s = new State();  // never destroyed: cudaFree may run from static destructors
  return *s;
}
thread_local cudaError_t last_error = cudaSuccess;

// Every failing call goes through here: the error is printed with the call that made it, and is
// what cudaGetLastError reports next.
cudaError_t fail(cudaError_t code, const std::string& what) {
  std::fprintf(stderr, "emulated GPU: %s (%s)\n", what.c_str(), cudaGetErrorString(code));
  last_error = code;
  return code;
}

cudaError_t sticky_error() {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().sticky != cudaSuccess) last_error = state().sticky;
  return state().sticky;
}

void poison([[maybe_unused]] const void* p, [[maybe_unused]] size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
  __asan_poison_memory_region(p, bytes);
#endif
}
void unpoison([[maybe_unused]] const void* p, [[maybe_unused]] size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
  __asan_unpoison_memory_region(p, bytes);
#endif
}

size_t size_of(const Allocation& a) { return a.bytes; }
size_t size_of(size_t bytes) { return bytes; }

// The allocation of `allocs` (start -> its size, or an Allocation) that holds [p, p + bytes) whole
// (at least p itself), or null.
template <class V>
const std::pair<const uintptr_t, V>* holding(const std::map<uintptr_t, V>& allocs, const void* p, size_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = allocs.upper_bound(a);
  if (it == allocs.begin()) return nullptr;
  --it;
  if (a + std::max<size_t>(bytes, 1) > it->first + size_of(it->second)) return nullptr;
  return &*it;
}

// The device allocation that holds [p, p + bytes), or null.
const std::pair<const uintptr_t, Allocation>* device_range(const void* p, size_t bytes) {
  return holding(state().allocations, p, bytes);
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

std::string pointer_text(const void* p) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", p);
  return text;
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

// The allocation that holds a copy's device side, usable for the copy's lifetime (under ASan). Whole
// allocations are unpoisoned and poisoned again, so that no partly poisoned granule is left behind.
class UsableAllocation {
 public:
  UsableAllocation([[maybe_unused]] const void* p, [[maybe_unused]] bool device) {
#if defined(__SANITIZE_ADDRESS__)
    if (!device) return;
    std::lock_guard<std::mutex> lock(state().mutex);
    const auto* a = device_range(p, 0);
    begin_ = reinterpret_cast<const void*>(a->first);
    bytes_ = a->second.bytes;
    unpoison(begin_, bytes_);
#endif
  }
  ~UsableAllocation() { poison(begin_, bytes_); }
  UsableAllocation(const UsableAllocation&) = delete;
  UsableAllocation& operator=(const UsableAllocation&) = delete;

 private:
  const void* begin_ = nullptr;
  size_t bytes_ = 0;
};

bool context_failed() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().sticky != cudaSuccess;
}

}  // namespace

void device_work(cudaStream_t stream, std::function<void()> work) {
  enqueue(stream, [work = std::move(work)] {
    if (!context_failed()) work();
  });
}

namespace {

// A copy, checked when issued, run in stream order. When the host waits for it follows the
// runtime's documented synchronisation behaviour:
//   - from pageable host memory, the source is read when the call is made (staged);
//   - to pageable host memory, the call returns once the copy has run;
//   - cudaMemcpy (synchronous, on the legacy default stream) returns once the copy has run,
//     except between device buffers;
//   - cudaMemcpyAsync with pinned memory, and between device buffers, returns at once;
//   - host to host is a plain copy, at once.
cudaError_t copy(const char* call, void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream,
                 bool synchronous) {
  if (cudaError_t e = sticky_error()) return e;
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
  if (kind == cudaMemcpyHostToDevice && !host_pinned) {
    std::vector<unsigned char> staged(static_cast<const unsigned char*>(src),
                                      static_cast<const unsigned char*>(src) + count);
    device_work(stream, [dst, staged = std::move(staged)] {
      const UsableAllocation to(dst, true);
      std::memcpy(dst, staged.data(), staged.size());
    });
  } else {
    device_work(stream, [=] {
      const UsableAllocation to(dst, dst_device), from(src, src_device);
      std::memmove(dst, src, count);
    });
  }
  const bool host_waits = kind == cudaMemcpyDeviceToHost   ? synchronous || !host_pinned
                          : kind == cudaMemcpyHostToDevice ? synchronous && host_pinned
                                                           : false;
  if (host_waits) finish_stream(stream);
  return sticky_error();
}

// cudaMemset[Async] on device memory: queued, the host does not wait.
cudaError_t fill(const char* call, void* p, int value, size_t count, cudaStream_t stream) {
  if (cudaError_t e = sticky_error()) return e;
  if (count == 0) return cudaSuccess;
  if (cudaError_t e = check_side(call, "destination", p, count, true)) return e;
  device_work(stream, [=] {
    const UsableAllocation to(p, true);
    std::memset(p, value, count);
  });
  return cudaSuccess;
}

cudaError_t check_stream(const char* call, cudaStream_t stream) {
  if (!valid_stream(stream))
    return fail(cudaErrorInvalidResourceHandle,
                std::string(call) + ": stream " + pointer_text(stream) + " was not created or is destroyed");
  return cudaSuccess;
}

cudaError_t check_event(const char* call, cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!state().events.count(event))
    return fail(cudaErrorInvalidResourceHandle,
                std::string(call) + ": event " + pointer_text(event) + " was not created or is destroyed");
  return cudaSuccess;
}

}  // namespace

// Makes all device memory usable while a kernel or a library call runs, poisoned again afterwards
// (under ASan).
void with_device_memory(const std::function<void()>& work) {
#if defined(__SANITIZE_ADDRESS__)
  std::lock_guard<std::mutex> lock(state().mutex);
  for (const auto& a : state().allocations) unpoison(reinterpret_cast<void*>(a.first), a.second.bytes);
  work();
  for (const auto& a : state().allocations) poison(reinterpret_cast<void*>(a.first), a.second.bytes);
#else
  work();
#endif
}

bool inside_device_allocation(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(state().mutex);
  return device_range(p, bytes) != nullptr;
}

bool valid_stream(cudaStream_t stream) {
  if (stream == nullptr) return true;
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().streams.count(stream) != 0;
}

cudaError_t context_error() { return sticky_error(); }

std::vector<size_t> live_allocation_sizes() {
  std::lock_guard<std::mutex> lock(state().mutex);
  std::map<uint64_t, size_t> by_call;
  for (const auto& [start, a] : state().allocations) by_call[a.serial] = a.bytes;
  std::vector<size_t> sizes;
  for (const auto& [serial, bytes] : by_call) sizes.push_back(bytes);
  return sizes;
}

namespace {
// The context's first fault stays its error, as a GPU's does.
void make_sticky(cudaError_t code) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().sticky == cudaSuccess) state().sticky = code;
  last_error = state().sticky;
}
}  // namespace

void library_fault(cudaError_t code, const std::string& what) {
  fail(code, what);
  make_sticky(code);
}

cudaError_t launch_kernel(const void* kernel, const char* name, dim3 grid, dim3 block, size_t shared,
                          cudaStream_t stream, void (*invoke)(const void*), std::shared_ptr<const void> args) {
  if (cudaError_t e = sticky_error()) return e;
  const std::string launch = std::string("launch of ") + name + " with grid " + dim_text(grid) + ", block " + dim_text(block);
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  if (block.x == 0 || block.y == 0 || block.z == 0 || block.x > 1024 || block.y > 1024 || block.z > 64 ||
      threads > 1024)
    return fail(cudaErrorInvalidConfiguration,
                launch + ": a block holds at most 1024 threads, at most (1024,1024,64) in each dimension");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535)
    return fail(cudaErrorInvalidConfiguration, launch + ": a grid is at most (2147483647,65535,65535) blocks");
  if (cudaError_t e = check_stream(name, stream)) return e;
  size_t limit = kDefaultSharedPerBlock;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    auto it = state().max_dynamic_shared.find(kernel);
    if (it != state().max_dynamic_shared.end()) limit = std::max(limit, size_t(it->second));
  }
  if (shared > limit)
    return fail(cudaErrorInvalidValue,
                launch + ": " + std::to_string(shared) + " bytes of dynamic shared memory, over the " +
                    std::to_string(limit) + " allowed" +
                    (limit == kDefaultSharedPerBlock
                         ? " without cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize)"
                         : " by cudaFuncSetAttribute"));
  const size_t total_limit = limit == kDefaultSharedPerBlock ? kDefaultSharedPerBlock : kOptInSharedPerBlock;
  device_work(stream, [=, args = std::move(args)] {
    cudaError_t result = cudaSuccess;
    with_device_memory([&] { result = run_kernel(KernelJob{name, grid, block, shared, total_limit, invoke, args.get()}); });
    if (result != cudaSuccess) make_sticky(result);
  });
  return cudaSuccess;
}

}  // namespace emu

using namespace emu;

extern "C" {

cudaError_t cudaMalloc(void** ptr, size_t size) {
  if (cudaError_t e = sticky_error()) return e;
  if (!ptr) return fail(cudaErrorInvalidValue, "cudaMalloc: null result pointer");
  *ptr = nullptr;
  if (size == 0) return cudaSuccess;
  std::lock_guard<std::mutex> lock(state().mutex);
  void* p = nullptr;
  if (state().allocated + size > kGlobalMemory || posix_memalign(&p, 256, size) != 0)
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

cudaError_t cudaMemset(void* p, int value, size_t count) { return fill("cudaMemset", p, value, count, nullptr); }

cudaError_t cudaMemsetAsync(void* p, int value, size_t count, cudaStream_t stream) {
  if (cudaError_t e = check_stream("cudaMemsetAsync", stream)) return e;
  return fill("cudaMemsetAsync", p, value, count, stream);
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (cudaError_t e = sticky_error()) return e;
  std::lock_guard<std::mutex> lock(state().mutex);
  *free_bytes = kGlobalMemory - state().allocated;
  *total_bytes = kGlobalMemory;
  return cudaSuccess;
}

// The scheduler's lock is never taken under the state's (queued work takes the state's).
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  *stream = new CUstream_st{flags};
  stream_created(*stream, (flags & cudaStreamNonBlocking) == 0);
  std::lock_guard<std::mutex> lock(state().mutex);
  state().streams.insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (cudaError_t e = check_stream("cudaStreamDestroy", stream)) return e;
  if (!stream) return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: the default stream");
  stream_destroyed(stream);
  std::lock_guard<std::mutex> lock(state().mutex);
  state().streams.erase(stream);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (cudaError_t e = check_stream("cudaStreamSynchronize", stream)) return e;
  finish_stream(stream);
  return sticky_error();
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (cudaError_t e = check_stream("cudaStreamQuery", stream)) return e;
  const bool idle = stream_idle(stream);
  if (cudaError_t e = sticky_error()) return e;
  return idle ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  if (cudaError_t e = check_stream("cudaStreamWaitEvent", stream)) return e;
  if (cudaError_t e = check_event("cudaStreamWaitEvent", event)) return e;
  wait_event(stream, event);
  return sticky_error();
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  std::lock_guard<std::mutex> lock(state().mutex);
  *event = new CUevent_st{flags, false, false, {}};
  state().events.insert(*event);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (cudaError_t e = check_event("cudaEventDestroy", event)) return e;
  event_destroyed(event);
  std::lock_guard<std::mutex> lock(state().mutex);
  state().events.erase(event);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (cudaError_t e = check_event("cudaEventRecord", event)) return e;
  if (cudaError_t e = check_stream("cudaEventRecord", stream)) return e;
  event->pending = true;
  record_event(event, stream, [event] {
    event->recorded = true;
    event->pending = false;
    event->when = std::chrono::steady_clock::now();
  });
  return sticky_error();
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (cudaError_t e = check_event("cudaEventSynchronize", event)) return e;
  finish_event(event);
  return sticky_error();
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (cudaError_t e = check_event("cudaEventQuery", event)) return e;
  const bool done = event_done(event);
  if (cudaError_t e = sticky_error()) return e;
  return done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (cudaError_t e = check_event("cudaEventElapsedTime", start)) return e;
  if (cudaError_t e = check_event("cudaEventElapsedTime", end)) return e;
  if ((start->flags | end->flags) & cudaEventDisableTiming)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event created with cudaEventDisableTiming");
  if (start->pending || end->pending) return cudaErrorNotReady;
  if (!start->recorded || !end->recorded)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event that was never recorded");
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return sticky_error();
}

cudaError_t cudaDeviceSynchronize(void) {
  finish_all();
  return sticky_error();
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = last_error;
  std::lock_guard<std::mutex> lock(state().mutex);
  last_error = state().sticky;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error; }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidMemcpyDirection:
      return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorMisalignedAddress:
      return "cudaErrorMisalignedAddress";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    default:
      return "cudaErrorUnknown";
  }
}

// The runtime's own wording for each error.
const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidMemcpyDirection:
      return "invalid copy direction for memcpy";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorMisalignedAddress:
      return "misaligned address";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorNotReady:
      return "device not ready";
    default:
      return "unknown error";
  }
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice, "cudaSetDevice(" + std::to_string(device) + "): one device");
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties: device " + std::to_string(device));
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof(prop->name), "NVIDIA H100 80GB HBM3 (emulated on the CPU)");
  prop->totalGlobalMem = kGlobalMemory;
  prop->sharedMemPerBlock = kDefaultSharedPerBlock;
  prop->sharedMemPerBlockOptin = kOptInSharedPerBlock;
  prop->sharedMemPerMultiprocessor = 233472;
  prop->regsPerBlock = 65536;
  prop->regsPerMultiprocessor = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->totalConstMem = 65536;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  prop->l2CacheSize = 50 * 1024 * 1024;
  prop->memoryBusWidth = 5120;
  prop->unifiedAddressing = 1;
  // Each process is its own emulated GPU (NCCL's ranks on the emulated GPU are processes), so the
  // UUID that tells GPUs apart is this process's: "EMUGPU" and the process id.
  std::memcpy(prop->uuid.bytes, "EMUGPU", 6);
  const uint32_t pid = uint32_t(getpid());
  std::memcpy(prop->uuid.bytes + 6, &pid, sizeof pid);
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
    return fail(cudaErrorInvalidValue,
                "cudaFuncSetAttribute: only cudaFuncAttributeMaxDynamicSharedMemorySize is emulated");
  if (value < 0 || size_t(value) > kOptInSharedPerBlock)
    return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: " + std::to_string(value) +
                                           " bytes of dynamic shared memory, over the device's " +
                                           std::to_string(kOptInSharedPerBlock));
  std::lock_guard<std::mutex> lock(state().mutex);
  state().max_dynamic_shared[func] = value;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

}  // extern "C"
