// Where the FP8 scaling state (--fp8 1, llmc/cuda/fp8.cuh) keeps each tensor's scale and amax, and
// the sizes the memory plan needs: plain C++, so that the plan and the unit tests can include it.
#pragma once
#include <cstddef>
#include <vector>

namespace llmc {

constexpr float kE4M3Max = 448.0f;
constexpr float kE5M2Max = 57344.0f;
// Micro-steps of amax history behind each delayed scale.
constexpr int kFp8History = 16;
// Each tensor's amax is recorded into this many slots, each on a 128-byte line of its own (a
// block's or a warp's atomicMax goes to slot index % kFp8AmaxSlots), so that the atomics of
// thousands of blocks spread over as many of L2's lines instead of queueing on one: on an H100 the
// first layout, 64 slots side by side on two lines and one atomic per warp, held a cast of 25 M
// values to 0.09 ms (850 GB/s) and made --fp8 1 slower than bf16. The scale update takes the
// largest.
constexpr int kFp8AmaxSlots = 32;
constexpr size_t kFp8AmaxSlotStride = 32;  // floats: 128 bytes

// The scaled tensors of a layer, each with its own scale: the four linear layers' inputs (E4M3,
// delayed), their output gradients (E5M2, delayed) and their weights (E4M3, current).
enum class Fp8Linear { kQkv, kAttproj, kFc, kFcproj };
constexpr int kFp8Linears = 4;
enum class Fp8Role { kInput, kGradient, kWeight };
constexpr int kFp8Roles = 3;

// The FP8 scaling state in one device buffer of fp8_state_floats(L) floats, per tensor index i
// (fp8_tensor_index), kFp8FloatsPerTensor floats: the scale (the cast's multiplier), the scale_inv
// (the GEMM's), each first in a 16-byte group of its own, then kFp8AmaxSlots amax slots (float bits,
// atomicMax'ed as unsigned: for x >= 0 the order of the bits is the order of the values), the first
// float of each kFp8AmaxSlotStride, and kFp8History amax entries. cuBLASLt's FP8 GEMMs refused scale pointers 4 bytes off a 16-byte
// boundary on an H100 (CUBLAS_STATUS_NOT_SUPPORTED from cublasLtMatmul after its heuristic had
// offered the algorithm), so every tensor's state starts 16-byte aligned and its scale_inv at
// float 4. Tensors [0, fp8_delayed_tensors(L)) are delayed.
constexpr int fp8_tensors(int L) { return kFp8Roles * kFp8Linears * L; }
constexpr int fp8_delayed_tensors(int L) { return 2 * kFp8Linears * L; }
constexpr size_t kFp8ScaleGroup = 4;  // floats in 16 bytes
constexpr size_t kFp8FloatsPerTensor = 2 * kFp8ScaleGroup + kFp8AmaxSlots * kFp8AmaxSlotStride + kFp8History;
constexpr size_t fp8_state_floats(int L) { return size_t(fp8_tensors(L)) * kFp8FloatsPerTensor; }
// The offsets are called by kernels too: host and device functions under nvcc, plain functions
// elsewhere (the host code, and the emulated GPU's kernels, compiled by g++).
#if defined(__CUDACC__)
#define LLMC_FP8_ACCESSOR __host__ __device__ inline
#else
#define LLMC_FP8_ACCESSOR inline
#endif
inline int fp8_tensor_index(Fp8Role role, Fp8Linear linear, int layer, int L) {
  return (int(role) * kFp8Linears + int(linear)) * L + layer;
}
LLMC_FP8_ACCESSOR size_t fp8_scale_offset(int i) { return size_t(i) * kFp8FloatsPerTensor; }
LLMC_FP8_ACCESSOR size_t fp8_scale_inv_offset(int i) { return fp8_scale_offset(i) + kFp8ScaleGroup; }
LLMC_FP8_ACCESSOR size_t fp8_amax_offset(int i) { return fp8_scale_offset(i) + 2 * kFp8ScaleGroup; }
LLMC_FP8_ACCESSOR size_t fp8_history_offset(int i) { return fp8_amax_offset(i) + kFp8AmaxSlots * kFp8AmaxSlotStride; }
#undef LLMC_FP8_ACCESSOR

// The state before anything was recorded: every scale and scale_inv 1 (what the calibrating
// micro-step casts with), the amax slots and the history 0.
inline std::vector<float> fp8_initial_state(int L) {
  std::vector<float> state(fp8_state_floats(L), 0.0f);
  for (int i = 0; i < fp8_tensors(L); ++i) state[fp8_scale_offset(i)] = state[fp8_scale_inv_offset(i)] = 1.0f;
  return state;
}

// The bytes of the layers' FP8 weight copies: each linear weight (12 C^2 values a layer) once as it
// is and once transposed, one byte a value.
constexpr size_t fp8_weight_bytes(size_t L, size_t C) { return 2 * 12 * L * C * C; }

}  // namespace llmc
