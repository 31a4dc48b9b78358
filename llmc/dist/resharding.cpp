#include "llmc/dist/resharding.h"

#include <cstring>
#include <fmt/format.h>
#include <stdexcept>

namespace llmc {

size_t copy_overlap(const float* src, ElementRange src_range, float* dst, ElementRange dst_range) {
  const ElementRange both = intersect(src_range, dst_range);
  if (both.size() == 0) return 0;
  std::memcpy(dst + (both.begin - dst_range.begin), src + (both.begin - src_range.begin), both.size() * sizeof(float));
  return both.size();
}

DataLoaderPosition rescale_loader_position(const DataLoaderPosition& position, int old_world, int new_world,
                                           bool shuffle) {
  if (old_world == new_world) return position;
  if (shuffle)
    throw std::runtime_error(fmt::format(
        "the checkpoint was written by {} ranks with shuffled data (-sh 1), whose window order depends on the "
        "number of ranks: resume it with {} ranks", old_world, old_world));
  const int64_t windows = position.step * old_world;
  if (windows % new_world != 0)
    throw std::runtime_error(fmt::format(
        "the checkpoint's {} ranks had read {} windows of the current shard, which is not a whole number of "
        "steps of {} ranks: resume it with {} ranks", old_world, windows, new_world, old_world));
  DataLoaderPosition rescaled = position;
  rescaled.step = windows / new_world;
  return rescaled;
}

}  // namespace llmc
