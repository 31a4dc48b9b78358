// Resuming a checkpoint written by another number of ranks or with another ZeRO stage (-z): the
// pure parts, so that they are unit-tested without MPI (docs/training.md, "Checkpoints and resume").
//
// Every rank's state file holds the optimizer state tensors of one contiguous range of the flat
// parameter buffer: all of it with -z 0, the rank's owned chunk with -z 1 (so the ranks' files, in
// rank order, concatenate to the whole buffer). A resumed rank needs each tensor of its own range
// under the new partition and assembles it from the files whose ranges overlap it.
#pragma once
#include <cstddef>

#include "llmc/data/dataloader.h"
#include "llmc/dist/zero_sharding.h"

namespace llmc {

// src holds the elements src_range of a flat buffer, dst the elements dst_range; copies the
// elements that lie in both into their places in dst and returns how many.
size_t copy_overlap(const float* src, ElementRange src_range, float* dst, ElementRange dst_range);

// The train loader position that continues a run of old_world ranks with new_world ranks: the
// steps of a shard count windows of old_world micro-batches, so the windows read in the current
// shard (step * old_world) must split into whole steps of new_world. Throws std::runtime_error
// saying why when they do not, or when the data is shuffled (-sh 1: the window order of a shard is
// a permutation of its step count times the rank count, so it differs with the rank count).
DataLoaderPosition rescale_loader_position(const DataLoaderPosition& position, int old_world, int new_world,
                                           bool shuffle);

}  // namespace llmc
