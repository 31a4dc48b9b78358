// The warp operations on the emulated GPU (__syncwarp, the shuffles, the votes): a lane waits at
// the operation until every lane its mask names has reached the same operation with the same mask,
// then each gets its result. A mask that leaves out the lane's own, names a lane that does not exist
// or has exited, or lanes that meet at different operations, fail the block, naming the lanes.
#include <cstdio>
#include <string>

#include "emulator/runtime/block_worker.h"

#if defined(LLMC_EMU_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace emu {

std::string mask_text(unsigned mask) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", mask);
  return text;
}

// `arrived` has just reached a warp operation: if every lane of its mask is there too, the
// operation completes and they all become ready with their results. The per-warp bit masks of
// waiting and exited lanes keep this O(1) until the last lane arrives.
void Worker::complete_warp(int warp, int n, CudaThread& arrived) {
  const unsigned mask = arrived.mask;
  const int lane = arrived.linear % kWarp;
  auto op = [&] { return std::string(arrived.op_name) + " with mask " + mask_text(mask); };
  auto lane_error = [&](const std::string& what, unsigned lanes) {
    block_error(arrived, op() + " names lane " + std::to_string(__builtin_ctz(lanes)) + ", which " + what);
  };
  const int first = warp * kWarp;
  const unsigned existing = n - first >= kWarp ? 0xffffffffu : (1u << (n - first)) - 1u;
  if (!(mask >> lane & 1u)) block_error(arrived, op() + " does not name its own lane " + std::to_string(lane));
  if (arrived.width < 1 || arrived.width > kWarp || (arrived.width & (arrived.width - 1)) != 0)
    block_error(arrived, op() + ": width " + std::to_string(arrived.width) + " is not a power of 2 up to 32");
  if (mask & ~existing) lane_error("does not exist in a block of " + std::to_string(n) + " threads", mask & ~existing);
  if (mask & exited_[warp]) lane_error("has exited", mask & exited_[warp]);
  waiting_[warp] |= 1u << lane;
  if ((waiting_[warp] & mask) != mask) return;  // not all there yet

  uint64_t ballot = 0;
  for (int j = 0; j < kWarp; ++j) {
    if (!(mask >> j & 1u)) continue;
    const CudaThread& u = *threads_[first + j];
    if (u.op != arrived.op || u.mask != mask || u.width != arrived.width)
      block_error(arrived, "lanes " + std::to_string(lane) + " and " + std::to_string(j) +
                               " of a warp meet at different warp operations: " + op() + " and " + u.op_name +
                               " with mask " + mask_text(u.mask));
    if (u.value != 0) ballot |= uint64_t(1) << j;
  }
  for (int j = 0; j < kWarp; ++j) {
    if (!(mask >> j & 1u)) continue;
    CudaThread& u = *threads_[first + j];
    const int width = u.width;
    const int segment = j & ~(width - 1);
    int source = j;
    switch (u.op) {
      case WarpOp::sync: u.result = 0; continue;
      case WarpOp::ballot: u.result = ballot; continue;
      case WarpOp::any: u.result = ballot != 0; continue;
      case WarpOp::all: u.result = ballot == uint64_t(mask); continue;
      case WarpOp::shfl_idx: source = segment + (u.operand & (width - 1)); break;
      case WarpOp::shfl_xor: source = j ^ u.operand; break;
      case WarpOp::shfl_down: source = j + u.operand; break;
      case WarpOp::shfl_up: source = j - u.operand; break;
    }
    // Outside the lane's width segment a shuffle returns the lane's own value.
    if (source < segment || source >= segment + width) source = j;
    if (!(mask >> source & 1u))
      block_error(u, op() + ": lane " + std::to_string(j) + " reads lane " + std::to_string(source) +
                         ", which is outside the mask");
    u.result = threads_[first + source]->value;
  }
  waiting_[warp] &= ~mask;
  ++warp_syncs_[warp];
  for (int j = 0; j < kWarp; ++j)
    if (mask >> j & 1u) threads_[first + j]->status = Status::ready;
}

// A lane that ends while others of its warp wait for it at a warp operation fails that operation.
void Worker::lane_exited(int warp, int n, const CudaThread& t) {
  const int lane = t.linear % kWarp;
  exited_[warp] |= 1u << lane;
  --live_;
  if (waiting_[warp] == 0) return;  // no lane waits at a warp operation
  for (int j = 0; j < kWarp && warp * kWarp + j < n; ++j) {
    const CudaThread& u = *threads_[warp * kWarp + j];
    if ((waiting_[warp] >> j & 1u) && (u.mask >> lane & 1u))
      block_error(u, std::string(u.op_name) + " with mask " + mask_text(u.mask) + " names lane " +
                         std::to_string(lane) + ", which has exited");
  }
}

uint64_t warp_op(WarpOp op, const char* name, unsigned mask, uint64_t value, int operand, int width) {
  Worker& w = worker(name);
  CudaThread& t = w.current();
  t.status = Status::at_warp_op;
  t.op = op;
  t.op_name = name;
  t.mask = mask;
  t.value = value;
  t.operand = operand;
  t.width = width;
#if defined(LLMC_EMU_TSAN)
  char* sync = w.launch().sync.warp(w.block(), t.linear / kWarp);
  __tsan_release(sync);
  w.suspend(t);
  __tsan_acquire(sync);
#else
  w.suspend(t);
#endif
  w.end_if_cancelled();
  return t.result;
}

}  // namespace emu
