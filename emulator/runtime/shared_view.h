// What the shared-memory race check (racecheck.cpp) needs to know of the block a worker runs,
// kept up to date by the worker (block_fibers.cpp): where the block's shared memory is, which CUDA
// thread runs, and how many barriers and warp operations have completed so far. Two accesses by
// different threads are ordered when a __syncthreads completed between them, or, within one warp,
// a warp operation (__syncwarp, a shuffle, a vote) did.
#pragma once
#include <cstdint>
#include <string>

#include "emulator/runtime/device_limits.h"

namespace emu {

// Plain data, so that the per-access hooks reach it without a thread_local initialisation check.
struct SharedView {
  uintptr_t begin, end;         // the block's shared memory (dynamic and static)
  uint64_t block;               // counts the blocks this worker has run: tells old shadow from new
  int thread;                   // linear index of the running CUDA thread; -1 outside kernels
  uint32_t barriers;            // __syncthreads completed in this block
  const uint32_t* warp_syncs;   // per warp: warp operations completed in this block
};
extern thread_local SharedView shared_view;

// Called by the race check in the CUDA thread that made the second access: the block fails with
// this message (naming the kernel, block and thread) when the thread next stops or ends.
void report_shared_race(const std::string& what);

}  // namespace emu
