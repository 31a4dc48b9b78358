#include "llmc/cpu_matmul.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

namespace llmc {

namespace {

// Eight floats handled as one value; the compiler maps it onto whatever SIMD registers the target
// has. Fixing the width in the source (instead of leaving vectorisation to the compiler) fixes the
// order of every sum: lane j accumulates the products k = j, j+8, j+16, ... of a k-block.
typedef float v8f __attribute__((vector_size(32)));
constexpr int kLanes = 8;
// k is processed in blocks so that a block of the operands stays in cache while every output
// tile uses it; partial sums of successive blocks are added to the output in block order.
constexpr int kKBlock = 256;
constexpr int kTile = 4;

inline v8f load8(const float* p) {
  v8f v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline float lane_sum(v8f v) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

// The RM x RN block of outputs at rows a[0..RM) and b[0..RN) over kc values of k; each output
// element is summed in the same order whatever RM and RN are.
template <int RM, int RN>
inline void tile_kernel(float* c, int ldc, const float* a, const float* b, int ld, int kc, bool accumulate) {
  v8f acc[RM][RN];
  for (int i = 0; i < RM; ++i)
    for (int j = 0; j < RN; ++j) acc[i][j] = v8f{};
  const int kv = kc - kc % kLanes;
  for (int k = 0; k < kv; k += kLanes) {
    v8f av[RM];
    for (int i = 0; i < RM; ++i) av[i] = load8(a + size_t(i) * ld + k);
    for (int j = 0; j < RN; ++j) {
      v8f bv = load8(b + size_t(j) * ld + k);
      for (int i = 0; i < RM; ++i) acc[i][j] += av[i] * bv;
    }
  }
  for (int i = 0; i < RM; ++i) {
    for (int j = 0; j < RN; ++j) {
      float s = lane_sum(acc[i][j]);
      for (int k = kv; k < kc; ++k) s += a[size_t(i) * ld + k] * b[size_t(j) * ld + k];
      float& out = c[size_t(i) * ldc + j];
      out = accumulate ? out + s : s;
    }
  }
}

void gemm_block(float* c, int ldc, const float* a, const float* b, int ld, int rm, int rn, int kc, bool accumulate) {
  if (rm == kTile && rn == kTile) {
    tile_kernel<kTile, kTile>(c, ldc, a, b, ld, kc, accumulate);
    return;
  }
  for (int i = 0; i < rm; ++i)
    for (int j = 0; j < rn; ++j)
      tile_kernel<1, 1>(c + size_t(i) * ldc + j, ldc, a + size_t(i) * ld, b + size_t(j) * ld, ld, kc, accumulate);
}

// The RM x (8 RNV) block of outputs at row m0, column n0 over kc values of k for gemm_xn; each
// output element is a sequential sum over k, the same in every kernel shape.
template <int RM, int RNV>
inline void xn_tile_kernel(float* c, int ldc, const float* a, size_t a_m, size_t a_k, const float* b, int ldb,
                           int kc, bool accumulate) {
  v8f acc[RM][RNV];
  for (int i = 0; i < RM; ++i)
    for (int j = 0; j < RNV; ++j) acc[i][j] = v8f{};
  for (int k = 0; k < kc; ++k) {
    v8f bv[RNV];
    for (int j = 0; j < RNV; ++j) bv[j] = load8(b + size_t(k) * ldb + j * kLanes);
    for (int i = 0; i < RM; ++i) {
      const float av = a[i * a_m + k * a_k];
      for (int j = 0; j < RNV; ++j) acc[i][j] += av * bv[j];
    }
  }
  for (int i = 0; i < RM; ++i) {
    for (int j = 0; j < RNV; ++j) {
      float* out = c + size_t(i) * ldc + j * kLanes;
      for (int l = 0; l < kLanes; ++l) out[l] = accumulate ? out[l] + acc[i][j][l] : acc[i][j][l];
    }
  }
}

void xn_scalar(float* c, const float* a, size_t a_k, const float* b, int ldb, int kc, bool accumulate) {
  float s = 0.0f;
  for (int k = 0; k < kc; ++k) s += a[k * a_k] * b[size_t(k) * ldb];
  *c = accumulate ? *c + s : s;
}

// Columns [n0, n0 + width) of rows [m0, m0 + rm) for gemm_xn: width is 32 or 8 (vector tiles) or 1.
void xn_block(float* c, int ldc, const float* a, size_t a_m, size_t a_k, const float* b, int ldb, int rm,
              int width, int kc, bool accumulate) {
  if (width == 1) {
    for (int i = 0; i < rm; ++i) xn_scalar(c + size_t(i) * ldc, a + i * a_m, a_k, b, ldb, kc, accumulate);
  } else if (rm == kTile && width == 4 * kLanes) {
    xn_tile_kernel<kTile, 4>(c, ldc, a, a_m, a_k, b, ldb, kc, accumulate);
  } else {
    for (int i = 0; i < rm; ++i)
      for (int j = 0; j < width; j += kLanes)
        xn_tile_kernel<1, 1>(c + size_t(i) * ldc + j, ldc, a + i * a_m, a_m, a_k, b + j, ldb, kc, accumulate);
  }
}

}  // namespace

void gemm_nt(float* Cmat, const float* A, const float* B, int M, int N, int K, bool accumulate) {
  const int mt = (M + kTile - 1) / kTile, nt = (N + kTile - 1) / kTile;
  // The operand with more rows is walked in the outer loop so its slice stays in L1 while the
  // smaller operand's block (which fits in L2) streams past it.
  const bool m_outer = M >= N;
  const long tiles = long(mt) * nt;
  if (K == 0) {
    if (!accumulate) std::fill(Cmat, Cmat + size_t(M) * N, 0.0f);
    return;
  }
  for (int k0 = 0; k0 < K; k0 += kKBlock) {
    const int kc = std::min(kKBlock, K - k0);
    const bool acc = accumulate || k0 > 0;
#pragma omp parallel for schedule(static)
    for (long t = 0; t < tiles; ++t) {
      const int ti = int(m_outer ? t / nt : t % mt);
      const int tj = int(m_outer ? t % nt : t / mt);
      const int i0 = ti * kTile, j0 = tj * kTile;
      gemm_block(Cmat + size_t(i0) * N + j0, N, A + size_t(i0) * K + k0, B + size_t(j0) * K + k0, K,
                 std::min(kTile, M - i0), std::min(kTile, N - j0), kc, acc);
    }
  }
}

void gemm_xn(float* Cmat, const float* A, size_t a_m, size_t a_k, const float* B, int M, int N, int K,
             bool accumulate) {
  if (K == 0) {
    if (!accumulate) std::fill(Cmat, Cmat + size_t(M) * N, 0.0f);
    return;
  }
  // Column tiles: as many 32 wide as fit, then 8 wide, then single columns.
  std::vector<std::pair<int, int>> columns;  // (first column, width)
  int n0 = 0;
  for (; n0 + 4 * kLanes <= N; n0 += 4 * kLanes) columns.emplace_back(n0, 4 * kLanes);
  for (; n0 + kLanes <= N; n0 += kLanes) columns.emplace_back(n0, kLanes);
  for (; n0 < N; ++n0) columns.emplace_back(n0, 1);
  const long mt = (M + kTile - 1) / kTile, ct = long(columns.size());
  for (int k0 = 0; k0 < K; k0 += kKBlock) {
    const int kc = std::min(kKBlock, K - k0);
    const bool acc = accumulate || k0 > 0;
#pragma omp parallel for schedule(static)
    for (long t = 0; t < mt * ct; ++t) {
      const int i0 = int(t / ct) * kTile;
      const auto [j0, width] = columns[size_t(t % ct)];
      xn_block(Cmat + size_t(i0) * N + j0, N, A + i0 * a_m + k0 * a_k, a_m, a_k, B + size_t(k0) * N + j0, N,
               std::min(kTile, M - i0), width, kc, acc);
    }
  }
}

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC) {
  gemm_nt(out, inp, weight, N, OC, C, false);
  if (!bias) return;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < OC; ++o) out[size_t(n) * OC + o] += bias[o];
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC) {
  // dinp[n][c] = sum_o dout[n][o] weight[o][c]; dweight[o][c] += sum_n dout[n][o] inp[n][c].
  gemm_xn(dinp, dout, size_t(OC), 1, weight, N, C, OC, false);
  gemm_xn(dweight, dout, 1, size_t(OC), inp, OC, C, N, true);
  if (!dbias) return;
  constexpr int kChunk = 16;
  const int chunks = (OC + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int ch = 0; ch < chunks; ++ch) {
    const int o0 = ch * kChunk, o1 = std::min(OC, o0 + kChunk);
    double sum[kChunk] = {};
    for (int n = 0; n < N; ++n)
      for (int o = o0; o < o1; ++o) sum[o - o0] += dout[size_t(n) * OC + o];
    for (int o = o0; o < o1; ++o) dbias[o] += float(sum[o - o0]);
  }
}

}  // namespace llmc
