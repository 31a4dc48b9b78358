// The emulated GPU (docs/cuda-emulator.md): what the project's .cu/.cuh files need, beyond the
// CUDA toolkit's own headers, to compile with g++ and run on the CPU. llmc/cuda/device_platform.cuh
// includes it when LLMC_CUDA_EMULATOR is defined (the emulated builds: make test-emu).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

// The built-in variables. Per OS thread: a worker runs one block at a time and sets threadIdx at
// every switch between the block's fibers (block_fibers.cpp).
extern "C" {
extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;
extern thread_local int warpSize;
}

#include <cstddef>
#include <string>
#include <vector>

#include "emulator/runtime/device_functions.h"
#include "emulator/runtime/kernel_launch.h"

namespace emu {

// The sizes of the live device allocations, in the order cudaMalloc made them: what a program's
// own account of its memory (the memory plan) is checked against (device_memory.cpp).
std::vector<size_t> live_allocation_sizes();

// The GPU code the program stands for holding, as nvcc's code= architectures ("sm_80 compute_80
// sm_90a"): LLMC_EMU_KERNEL_IMAGES, where a test sets it; unset, code for every GPU. The emulated
// driver loads kernels (cudaFuncGetAttributes) by it and the compute capability, as a GPU's driver
// would (device_properties.cpp).
std::string kernel_images();

}  // namespace emu
