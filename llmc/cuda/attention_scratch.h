// The fallback attention's scratch buffers (llmc/cuda/attention.cuh) for an element type FloatX, in
// a plain C++ header: the backend's buffer list (llmc/cuda/backend_buffers.h) holds them and is
// compiled by the host unit tests too. attention.cuh names the floatX instance AttentionBuffers.
#pragma once

namespace llmc {

// A pointer per LLMC_ATTENTION_SCRATCH row of llmc/cuda/buffer_table.def, each planned and allocated
// on its own. Only `att` (an argument, not scratch) must live from a layer's forward to its
// backward: the backward permutes qkv again, so one set of these buffers serves every layer.
template <class FloatX>
struct AttentionScratch {
#define LLMC_BUFFER(...)
#define LLMC_ATTENTION_SCRATCH(id, field, element, ...) element* field;
#include "llmc/cuda/buffer_table.def"
};

}  // namespace llmc
