// The fallback attention's scratch buffers (llmc/cuda/attention.cuh), apart from its kernels so
// that CudaBackend's state (llmc/cuda/cuda_backend_impl.cuh) can hold them in every file that
// includes it, while the kernels are compiled in one translation unit only.
#pragma once
#include "llmc/cuda/common.cuh"

namespace llmc {

// Scratch the fallback needs, all floatX, carved from one allocation by the caller. Only `att`
// (an argument, not scratch) must live from a layer's forward to its backward: the backward
// permutes qkv again, so one set of these buffers serves every layer.
struct AttentionBuffers {
  floatX* q;        // (B, NH, T, HS)
  floatX* k;        // (B, NH, T, HS)
  floatX* v;        // (B, NH, T, HS)
  floatX* vaccum;   // (B, NH, T, HS): att V forward, d(vaccum) backward
  floatX* dq;       // (B, NH, T, HS), backward only
  floatX* dk;       // (B, NH, T, HS), backward only
  floatX* dv;       // (B, NH, T, HS), backward only
  floatX* scratch;  // (B, NH, T, T): pre-softmax scores forward, d(att) then d(preatt) backward
};

}  // namespace llmc
