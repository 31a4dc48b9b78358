// Device memory handed out by the memory plan (llmc/cuda/memory_plan.h): the CUDA backend takes each
// of its buffers from a PlannedAllocator, which sizes it from the plan, so the plan and the
// allocations cannot drift apart, and keeps the list of what it allocated (name, bytes). Plain C++:
// the device itself is behind DeviceAllocator (cudaMalloc in the backend, a recorder in the tests).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "llmc/cuda/memory_plan.h"

namespace llmc {

// Where the bytes come from.
class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  // `bytes` (> 0) of device memory for the buffer `name`; throws std::runtime_error when it cannot.
  virtual void* allocate(size_t bytes, const char* name) = 0;
  virtual void release(void* pointer) = 0;
};

struct Allocation {
  BufferId id;
  std::string name;
  size_t bytes;
  void* pointer;
};

class PlannedAllocator {
 public:
  // `device` must outlive this allocator, which releases everything it allocated when destroyed.
  PlannedAllocator(MemoryPlan plan, DeviceAllocator& device);
  ~PlannedAllocator();
  PlannedAllocator(const PlannedAllocator&) = delete;
  PlannedAllocator& operator=(const PlannedAllocator&) = delete;

  // The planned buffer `id`, allocated now with the plan's size, as T elements. Throws
  // std::logic_error when the plan has no such buffer, plans it with elements of another size than
  // T, or it was taken already: the backend and the plan disagree.
  template <class T>
  T* take(BufferId id) {
    return static_cast<T*>(take_bytes(id, sizeof(T)));
  }
  // Throws std::logic_error naming every planned buffer nobody took.
  void check_all_taken() const;
  // Replaces buffer `id` (taken before) by a larger one of `bytes`, releasing the old one: cuDNN's
  // workspace when a shape first seen after construction needs more.
  void* regrow(BufferId id, size_t bytes);

  const MemoryPlan& plan() const { return plan_; }
  const std::vector<Allocation>& allocations() const { return allocations_; }
  size_t allocated_bytes() const;

 private:
  void* take_bytes(BufferId id, size_t element_bytes);

  MemoryPlan plan_;
  DeviceAllocator& device_;
  std::vector<Allocation> allocations_;
};

}  // namespace llmc
