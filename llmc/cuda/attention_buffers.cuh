// The fallback attention's scratch buffers (llmc/cuda/attention.cuh) in the build's floatX, apart
// from its kernels so that CudaBackend's state (llmc/cuda/cuda_backend_impl.cuh) can hold them in
// every file that includes it, while the kernels are compiled in one translation unit only.
#pragma once
#include "llmc/cuda/attention_scratch.h"
#include "llmc/cuda/common.cuh"

namespace llmc {

using AttentionBuffers = AttentionScratch<floatX>;

}  // namespace llmc
