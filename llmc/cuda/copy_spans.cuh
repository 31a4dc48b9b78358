// Packing and unpacking a gradient bucket (llmc/dist/gradient_buckets.h) on the GPU: one launch
// copies every span of a bucket, the spans read from a table in device memory.
#pragma once
#include <algorithm>
#include <stdexcept>

#include "llmc/cuda/common.cuh"
#include "llmc/dist/gradient_buckets.h"

namespace llmc {

// Block row y copies span y: to the packed buffer (to_packed) or back into the flat buffer.
// Elements one by one, the simplest copy. Every offset and count is a multiple of 8 (tensor slices
// are multiples of C, ZeRO-1 chunks of kPartitionAlignment), so 16-byte vectors would also work,
// should a profile show these copies matter.
template <class T>
__global__ void copy_spans_kernel(T* flat, T* packed, const CopySpan* spans, bool to_packed) {
  const CopySpan s = spans[blockIdx.y];
  T* from = to_packed ? flat + s.buffer_offset : packed + s.packed_offset;
  T* to = to_packed ? packed + s.packed_offset : flat + s.buffer_offset;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < s.count; i += size_t(gridDim.x) * blockDim.x)
    to[i] = from[i];
}

// spans: num_spans entries in device memory; largest: the longest span's count (sets the grid).
template <class T>
void copy_spans(T* flat, T* packed, const CopySpan* spans, int num_spans, size_t largest, bool to_packed,
                cudaStream_t stream) {
  if (num_spans == 0) return;
  if (num_spans > 65535) throw std::invalid_argument("copy_spans: more than 65535 spans in one bucket");
  constexpr int block = 256;
  // Enough blocks per span to cover the longest with a few elements per thread.
  const int blocks_x = std::max(1, std::min(ceil_div(static_cast<long long>(largest), block * 8), 1024));
  launch<copy_spans_kernel<T>>(dim3(blocks_x, num_spans), block, 0, stream, flat, packed, spans, to_packed);
}

}  // namespace llmc
