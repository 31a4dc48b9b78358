// Token + position embedding on the GPU: out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:], and its
// backward pass, which scatters dout rows into dwte by token and sums them over b into dwpe.
//
// The backward pass is deterministic without atomics: the host groups the B*T positions by token
// once per batch (EncoderBuckets), and one thread block per distinct token adds that token's
// dout rows in a fixed order, so every dwte row has exactly one writer.
#pragma once
#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "llmc/cuda/common.cuh"
#include "llmc/cuda/random.cuh"

namespace llmc {

template <class Real>
__global__ void encoder_forward_kernel(Real* out, const int* tokens, const Real* wte, const Real* wpe,
                                       int BT, int T, int C) {
  constexpr int S = Packed128<Real>::size;
  const long long i = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) * S;
  if (i >= static_cast<long long>(BT) * C) return;
  const int bt = static_cast<int>(i / C);
  const int c = static_cast<int>(i % C);
  const int t = bt % T;
  // Embedding rows are reused by repeated tokens and by every b: keep them cacheable.
  const Packed128<Real> e = load128(wte + static_cast<long long>(tokens[bt]) * C + c);
  const Packed128<Real> p = load128(wpe + static_cast<long long>(t) * C + c);
  Packed128<Real> o;
#pragma unroll
  for (int k = 0; k < S; ++k) o[k] = Real(float(e[k]) + float(p[k]));
  store128cs(out + i, o);
}

inline void encoder_forward(floatX* out, const int* tokens, const floatX* wte, const floatX* wpe, int B, int T,
                            int C, cudaStream_t stream) {
  require_whole_vectors("encoder_forward", "channels", C);
  constexpr int block = 256;
  const long long vectors = static_cast<long long>(B) * T * C / Packed128<floatX>::size;
  launch<encoder_forward_kernel<floatX>>(ceil_div(vectors, block), block, 0, stream, out, tokens, wte, wpe, B * T, T,
                                         C);
  CUDA_CHECK_LAST();
}

// Positions grouped by token, packed into one int buffer for a single host-to-device copy:
//   [0, n)             the distinct tokens, most frequent first (long buckets start early),
//   [n, 2n+1)          offsets: bucket k's positions are positions[offsets[k] .. offsets[k+1]),
//   [2n+1, 2n+1+B*T)   positions b*T+t, ascending within each bucket.
struct EncoderBuckets {
  int num_buckets = 0;
  std::vector<int> packed;
};

inline EncoderBuckets build_encoder_buckets(const int* tokens, int BT, int vocab_size) {
  std::vector<int> order(BT);
  std::iota(order.begin(), order.end(), 0);
  for (int i = 0; i < BT; ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab_size)
      throw std::runtime_error("encoder_backward: token " + std::to_string(tokens[i]) + " at position " +
                               std::to_string(i) + " is outside the vocabulary [0, " +
                               std::to_string(vocab_size) + ")");
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return tokens[a] < tokens[b]; });

  struct Run { int token, begin, size; };
  std::vector<Run> runs;
  for (int i = 0; i < BT; ++i) {
    if (runs.empty() || tokens[order[i]] != runs.back().token) runs.push_back({tokens[order[i]], i, 0});
    ++runs.back().size;
  }
  std::stable_sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.size > b.size; });

  EncoderBuckets out;
  const int n = static_cast<int>(runs.size());
  out.num_buckets = n;
  out.packed.resize(2 * static_cast<size_t>(n) + 1 + BT);
  int* bucket_tokens = out.packed.data();
  int* offsets = bucket_tokens + n;
  int* positions = offsets + n + 1;
  int filled = 0;
  for (int k = 0; k < n; ++k) {
    bucket_tokens[k] = runs[k].token;
    offsets[k] = filled;
    for (int j = 0; j < runs[k].size; ++j) positions[filled++] = order[runs[k].begin + j];
  }
  offsets[n] = filled;
  return out;
}

// One block per bucket. threadIdx.x walks the row's 16-byte vectors; the blockDim.y groups split
// the bucket's positions round-robin, and their partial sums meet in shared memory in group order.
template <class Real>
__global__ void encoder_backward_wte_kernel(Real* dwte, const Real* dout, const int* buckets, int num_buckets,
                                            int C, unsigned seed) {
  constexpr int S = Packed128<Real>::size;
  float* partial = dynamic_shared<float>();  // [blockDim.y][blockDim.x][S]
  const int* bucket_tokens = buckets;
  const int* offsets = buckets + num_buckets;
  const int* positions = offsets + num_buckets + 1;
  const int token = bucket_tokens[blockIdx.x];
  const int begin = offsets[blockIdx.x];
  const int end = offsets[blockIdx.x + 1];
  const int vectors = C / S;

  for (int v0 = 0; v0 < vectors; v0 += blockDim.x) {
    const int v = v0 + threadIdx.x;
    float acc[S];
#pragma unroll
    for (int k = 0; k < S; ++k) acc[k] = 0.0f;
    if (v < vectors) {
      for (int j = begin + threadIdx.y; j < end; j += blockDim.y) {
        const Packed128<Real> d = load128cs(dout + static_cast<long long>(positions[j]) * C + v * S);
#pragma unroll
        for (int k = 0; k < S; ++k) acc[k] += float(d[k]);
      }
    }
    float* mine = partial + (threadIdx.y * blockDim.x + threadIdx.x) * S;
#pragma unroll
    for (int k = 0; k < S; ++k) mine[k] = acc[k];
    __syncthreads();
    if (threadIdx.y == 0 && v < vectors) {
      for (int g = 1; g < static_cast<int>(blockDim.y); ++g) {
        const float* theirs = partial + (g * blockDim.x + threadIdx.x) * S;
#pragma unroll
        for (int k = 0; k < S; ++k) acc[k] += theirs[k];
      }
      const long long row = static_cast<long long>(token) * C + v * S;
      Packed128<Real> w = load128(dwte + row);
#pragma unroll
      for (int k = 0; k < S; ++k) w[k] = stochastic_round<Real>(float(w[k]) + acc[k], random_u32(seed, row + k));
      store128(dwte + row, w);
    }
    __syncthreads();
  }
}

// One thread per (t, 16-byte vector): dwpe[t] += sum over b of dout[b,t], in b order.
template <class Real>
__global__ void encoder_backward_wpe_kernel(Real* dwpe, const Real* dout, int B, int T, int C, unsigned seed) {
  constexpr int S = Packed128<Real>::size;
  const long long i = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) * S;
  if (i >= static_cast<long long>(T) * C) return;
  float acc[S];
#pragma unroll
  for (int k = 0; k < S; ++k) acc[k] = 0.0f;
  for (int b = 0; b < B; ++b) {
    const Packed128<Real> d = load128cs(dout + static_cast<long long>(b) * T * C + i);
#pragma unroll
    for (int k = 0; k < S; ++k) acc[k] += float(d[k]);
  }
  Packed128<Real> w = load128(dwpe + i);
#pragma unroll
  for (int k = 0; k < S; ++k) w[k] = stochastic_round<Real>(float(w[k]) + acc[k], random_u32(seed, i + k));
  store128(dwpe + i, w);
}

// dwte[tok] += dout rows of that token; dwpe[t] += sum_b dout[b,t]. `buckets` is the device copy of
// build_encoder_buckets(tokens).packed. bf16 results are stochastically rounded from (seed, index).
inline void encoder_backward(floatX* dwte, floatX* dwpe, const floatX* dout, const int* buckets, int num_buckets,
                             int B, int T, int C, unsigned seed, cudaStream_t stream) {
  require_whole_vectors("encoder_backward", "channels", C);
  constexpr int S = Packed128<floatX>::size;
  const int vectors = C / S;
  const int threads_x = std::min(vectors, 256);
  const int groups = std::max(1, 256 / threads_x);
  const dim3 block(threads_x, groups);
  const size_t shared = static_cast<size_t>(threads_x) * groups * S * sizeof(float);
  if (num_buckets > 0) {
    launch<encoder_backward_wte_kernel<floatX>>(num_buckets, block, shared, stream, dwte, dout, buckets, num_buckets, C,
                                                seed);
    CUDA_CHECK_LAST();
  }
  const long long wpe_vectors = static_cast<long long>(T) * vectors;
  launch<encoder_backward_wpe_kernel<floatX>>(ceil_div(wpe_vectors, 256), 256, 0, stream, dwpe, dout, B, T, C,
                                              mix32(seed ^ 0x5bd1e995u));
  CUDA_CHECK_LAST();
}

}  // namespace llmc
