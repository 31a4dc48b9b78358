// PlannedAllocator (llmc/cuda/planned_allocator.h).
#include "llmc/cuda/planned_allocator.h"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>
#include <utility>

#include "llmc/cuda/memory_fit.h"

namespace llmc {

PlannedAllocator::PlannedAllocator(MemoryPlan plan, DeviceAllocator& device) : plan_(std::move(plan)), device_(device) {}

PlannedAllocator::~PlannedAllocator() {
  for (auto it = allocations_.rbegin(); it != allocations_.rend(); ++it) device_.release(it->pointer);
}

size_t PlannedAllocator::allocated_bytes() const {
  size_t total = 0;
  for (const Allocation& a : allocations_) total += a.bytes;
  return total;
}

void* PlannedAllocator::take_bytes(BufferId id, size_t element_bytes) {
  const PlannedBuffer* planned = plan_.find(id);
  if (planned == nullptr)
    throw std::logic_error(fmt::format("memory plan: the backend allocates buffer #{}, which the plan does not list",
                                       int(id)));
  if (planned->element_bytes != element_bytes)
    throw std::logic_error(fmt::format("memory plan: '{}' is planned with {}-byte elements, the backend uses {}",
                                       planned->name, planned->element_bytes, element_bytes));
  for (const Allocation& a : allocations_)
    if (a.id == id) throw std::logic_error(fmt::format("memory plan: '{}' is allocated twice", planned->name));
  // An empty buffer (a rank past the end of a tiny model's ZeRO-1 chunks) still gets a valid
  // pointer: one byte, which the list does not count.
  void* pointer = nullptr;
  try {
    pointer = device_.allocate(std::max<size_t>(planned->bytes(), 1), planned->name);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(fmt::format("{} ({} of the planned {} allocated before it)", e.what(),
                                         format_bytes(allocated_bytes()), format_bytes(plan_.total_bytes())));
  }
  allocations_.push_back({id, planned->name, planned->bytes(), pointer});
  return pointer;
}

void PlannedAllocator::check_all_taken() const {
  std::string missing;
  for (const PlannedBuffer& b : plan_.buffers) {
    const bool taken = std::any_of(allocations_.begin(), allocations_.end(),
                                   [&](const Allocation& a) { return a.id == b.id; });
    if (!taken) missing += fmt::format("{}'{}'", missing.empty() ? "" : ", ", b.name);
  }
  if (!missing.empty())
    throw std::logic_error(fmt::format("memory plan: the backend never allocates the planned {}", missing));
}

void* PlannedAllocator::regrow(BufferId id, size_t bytes) {
  for (Allocation& a : allocations_) {
    if (a.id != id) continue;
    if (bytes <= a.bytes) return a.pointer;
    device_.release(a.pointer);
    a.pointer = nullptr;
    a.bytes = 0;
    a.pointer = device_.allocate(bytes, a.name.c_str());
    a.bytes = bytes;
    return a.pointer;
  }
  throw std::logic_error(fmt::format("memory plan: buffer #{} is regrown before it was allocated", int(id)));
}

}  // namespace llmc
