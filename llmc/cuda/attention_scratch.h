// The fallback attention's scratch buffers (llmc/cuda/attention.cuh) for an element type FloatX, in
// a plain C++ header: the backend's buffer list (llmc/cuda/backend_buffers.h) holds them and is
// compiled by the host unit tests too. attention.cuh names the floatX instance AttentionBuffers.
#pragma once

namespace llmc {

// Scratch the fallback needs, each planned and allocated on its own (llmc/cuda/memory_plan.h).
// Only `att` (an argument, not scratch) must live from a layer's forward to its backward: the
// backward permutes qkv again, so one set of these buffers serves every layer.
template <class FloatX>
struct AttentionScratch {
  FloatX* q;        // (B, NH, T, HS)
  FloatX* k;        // (B, NH, T, HS)
  FloatX* v;        // (B, NH, T, HS)
  FloatX* vaccum;   // (B, NH, T, HS): att V forward, d(vaccum) backward
  FloatX* dq;       // (B, NH, T, HS), backward only
  FloatX* dk;       // (B, NH, T, HS), backward only
  FloatX* dv;       // (B, NH, T, HS), backward only
  FloatX* scratch;  // (B, NH, T, T): pre-softmax scores forward, d(att) then d(preatt) backward
};

}  // namespace llmc
