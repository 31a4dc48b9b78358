// Token + position embedding on the GPU, out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]: its backward
// pass, which scatters dout rows into dwte by token and sums them over b into dwpe. (The forward is
// fused into layer 0's LayerNorm: encoder_layernorm_forward, layernorm_forward.cuh.)
//
// The backward pass is deterministic without atomics: the host groups the B*T positions by token
// once per batch (EncoderBuckets), and one thread block per distinct token adds that token's
// dout rows in a fixed order, so every dwte row has exactly one writer. A frequent token's long
// chain is cut into pieces summed in parallel, whose sums are then added in piece order: a fixed
// order still.
#pragma once
#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "llmc/cuda/common.cuh"
#include "llmc/cuda/kernel_scratch.h"
#include "llmc/cuda/random.cuh"

namespace llmc {

// Positions grouped by token, packed into one int buffer for a single host-to-device copy:
//   [0, n)                  the distinct tokens, most frequent first (long buckets start early),
//   [n, 2n+1)               offsets: bucket k's positions are positions[offsets[k] .. offsets[k+1]),
//   [2n+1, 2n+1+B*T)        positions b*T+t, ascending within each bucket,
// and for the first m buckets (those with more than K = kEncoderPieceRows positions, which come
// first), cut into pieces of K positions (the last one shorter):
//   [2n+1+B*T, 2n+1+B*T+m)  piece ends: bucket k's pieces are [piece_ends[k-1], piece_ends[k])
//                           (from 0 for k = 0), piece j of them starting at position j*K of it.
// The whole stays within 3*B*T+1 ints (the planned buffer): with m >= 1 cut buckets of more than K
// positions each there are n <= B*T - m*K buckets, so 2n+1+B*T+m <= 3*B*T+1 - m*(2K-1).
struct EncoderBuckets {
  int num_buckets = 0;
  int num_cut = 0;     // m: the buckets cut into pieces
  int num_pieces = 0;  // their pieces, piece_ends[m-1]
  std::vector<int> packed;
};

// The packed layout's parts (above), read by the kernels.
struct EncoderBucketView {
  const int* tokens;
  const int* offsets;
  const int* positions;
  const int* piece_ends;
  __host__ __device__ EncoderBucketView(const int* packed, int num_buckets, int BT)
      : tokens(packed), offsets(packed + num_buckets), positions(offsets + num_buckets + 1),
        piece_ends(positions + BT) {}
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
  for (int k = 0; k < n && runs[k].size > kEncoderPieceRows; ++k) {
    out.num_pieces += ceil_div(runs[k].size, kEncoderPieceRows);
    out.packed.push_back(out.num_pieces);
    ++out.num_cut;
  }
  return out;
}

// The sum over dout rows positions[begin..end) of 16-byte vector v (of `vectors` per row), in a
// fixed order: the blockDim.y groups take the positions round-robin, and group 0 adds the others'
// partial sums in group order. Every thread of the block calls it (it waits at barriers); the sum
// is complete in group 0's threads. `partial` is the block's [blockDim.y][blockDim.x][S] floats.
template <class Real>
__device__ void sum_dout_rows(float (&acc)[Packed128<Real>::size], const Real* dout, const int* positions, int begin,
                              int end, int v, int vectors, int C, float* partial) {
  constexpr int S = Packed128<Real>::size;
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
  }
  __syncthreads();
}

// dwte[token] vector v += acc, stochastically rounded from (seed, element index) in bf16.
template <class Real>
__device__ void add_to_wte_row(Real* dwte, int token, int v, int C, const float (&acc)[Packed128<Real>::size],
                               unsigned seed) {
  constexpr int S = Packed128<Real>::size;
  const long long row = static_cast<long long>(token) * C + v * S;
  Packed128<Real> w = load128(dwte + row);
#pragma unroll
  for (int k = 0; k < S; ++k) w[k] = stochastic_round<Real>(float(w[k]) + acc[k], random_u32(seed, row + k));
  store128(dwte + row, w);
}

// dwte's first pass: blocks [0, num_pieces) sum one piece of a cut bucket each into its row of
// piece_sums (C floats); the others take the uncut buckets whole, a block each, into dwte (with no
// bucket cut, every bucket). threadIdx.x walks the row's 16-byte vectors; the blockDim.y groups
// split the positions (sum_dout_rows).
template <class Real>
__global__ void encoder_backward_wte_kernel(Real* dwte, float* piece_sums, const Real* dout, const int* buckets,
                                            int num_buckets, int num_cut, int num_pieces, int BT, int C,
                                            unsigned seed) {
  constexpr int S = Packed128<Real>::size;
  const EncoderBucketView b(buckets, num_buckets, BT);
  const int vectors = C / S;
  int k, begin, end;
  float* piece_row = nullptr;
  if (static_cast<int>(blockIdx.x) < num_pieces) {
    const int piece = blockIdx.x;
    // The cut bucket holding this piece: the first k with piece_ends[k] > piece.
    int lo = 0, hi = num_cut - 1;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (b.piece_ends[mid] > piece) hi = mid;
      else lo = mid + 1;
    }
    k = lo;
    const int first_piece = k == 0 ? 0 : b.piece_ends[k - 1];
    begin = b.offsets[k] + (piece - first_piece) * kEncoderPieceRows;
    end = min(begin + kEncoderPieceRows, b.offsets[k + 1]);
    piece_row = piece_sums + static_cast<long long>(piece) * C;
  } else {
    k = num_cut + static_cast<int>(blockIdx.x) - num_pieces;
    begin = b.offsets[k];
    end = b.offsets[k + 1];
  }
  for (int v0 = 0; v0 < vectors; v0 += blockDim.x) {
    const int v = v0 + threadIdx.x;
    float acc[S];
    sum_dout_rows(acc, dout, b.positions, begin, end, v, vectors, C, dynamic_shared<float>());
    if (threadIdx.y != 0 || v >= vectors) continue;
    if (piece_row == nullptr) {
      add_to_wte_row(dwte, b.tokens[k], v, C, acc, seed);
    } else {
#pragma unroll
      for (int i = 0; i < S; ++i) piece_row[v * S + i] = acc[i];
    }
  }
}

// With cut buckets, second pass: block (x, k) adds cut bucket k's piece sums in piece order, one
// thread per 16-byte vector of the row, into dwte[token] with the uncut buckets' rounding.
template <class Real>
__global__ void encoder_backward_wte_piece_sums_kernel(Real* dwte, const float* piece_sums, const int* buckets,
                                                       int num_buckets, int BT, int C, unsigned seed) {
  constexpr int S = Packed128<Real>::size;
  const EncoderBucketView b(buckets, num_buckets, BT);
  const int k = blockIdx.y;
  const int v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v >= C / S) return;
  float acc[S];
#pragma unroll
  for (int i = 0; i < S; ++i) acc[i] = 0.0f;
  for (int piece = k == 0 ? 0 : b.piece_ends[k - 1]; piece < b.piece_ends[k]; ++piece) {
    const float* row = piece_sums + static_cast<long long>(piece) * C + v * S;
#pragma unroll
    for (int i = 0; i < S; ++i) acc[i] += row[i];
  }
  add_to_wte_row(dwte, b.tokens[k], v, C, acc, seed);
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
// build_encoder_buckets(tokens, B*T, V).packed, `counts` that EncoderBuckets (its sizes only).
// With cut buckets, piece_sums holds encoder_piece_sums_floats(B*T, C) floats of scratch. bf16
// results are stochastically rounded from (seed, index).
inline void encoder_backward(floatX* dwte, floatX* dwpe, float* piece_sums, const floatX* dout, const int* buckets,
                             const EncoderBuckets& counts, int B, int T, int C, unsigned seed, cudaStream_t stream) {
  require_whole_vectors("encoder_backward", "channels", C);
  constexpr int S = Packed128<floatX>::size;
  const int vectors = C / S, BT = B * T;
  const int threads_x = std::min(vectors, 256);
  const int groups = std::max(1, 256 / threads_x);
  const dim3 block(threads_x, groups);
  const size_t shared = static_cast<size_t>(threads_x) * groups * S * sizeof(float);
  if (counts.num_cut > 0 && piece_sums == nullptr)
    throw std::invalid_argument("encoder_backward: buckets cut into pieces need the piece sums' scratch");
  if (counts.num_buckets > 0) {
    const int blocks = counts.num_pieces + counts.num_buckets - counts.num_cut;
    launch<encoder_backward_wte_kernel<floatX>>(blocks, block, shared, stream, dwte, piece_sums, dout, buckets,
                                                counts.num_buckets, counts.num_cut, counts.num_pieces, BT, C, seed);
  }
  if (counts.num_cut > 0) {
    launch<encoder_backward_wte_piece_sums_kernel<floatX>>(dim3(ceil_div(vectors, threads_x), counts.num_cut),
                                                           threads_x, 0, stream, dwte, piece_sums, buckets,
                                                           counts.num_buckets, BT, C, seed);
  }
  const long long wpe_vectors = static_cast<long long>(T) * vectors;
  launch<encoder_backward_wpe_kernel<floatX>>(ceil_div(wpe_vectors, 256), 256, 0, stream, dwpe, dout, B, T, C,
                                              mix32(seed ^ 0x5bd1e995u));
}

}  // namespace llmc
