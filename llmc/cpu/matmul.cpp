#include "llmc/cpu/matmul.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>
#elif defined(__ARM_NEON) && defined(__ARM_FEATURE_FMA)
#include <arm_neon.h>
#endif

namespace llmc {

namespace {

// GotoBLAS-style SGEMM in portable C++ (GCC vector extensions; -march=native picks the registers).
//
// C is cut into tiles of up to kMaxPanel x kMaxPanel; each tile is one unit of parallel work, done
// by one thread with no synchronisation, so a thread that the OS deschedules (the cores are shared)
// never holds the others at a barrier. For each K block of kKC = kGemmKBlock, the thread packs the
// tile's rows of A into slivers of kMR rows ([k][kMR] floats: the kMR values the micro-kernel
// broadcasts at step k lie together) and its columns of B into slivers of kNR columns ([k][kNR]
// floats: two SIMD vectors per k), both in its own buffers, which together fit in L2. The
// micro-kernel keeps a kMR x kNR block of C in registers while it runs over the K block: per k it
// loads 2 vectors of B and does 2 kMR FMAs, so loads hide behind arithmetic; its A sliver stays in
// L1 while it walks the packed B sliver by sliver. Which thread computes a tile, and how C is cut
// into tiles, does not change any sum.
#if defined(__AVX512F__)
constexpr int kLanes = 16;
constexpr int kMR = 12;  // 24 accumulators + 2 B vectors + 1 broadcast of the 32 zmm registers
#elif defined(__AVX__)
constexpr int kLanes = 8;
constexpr int kMR = 6;  // 12 accumulators + 2 B vectors + 1 broadcast of the 16 ymm registers
#else
constexpr int kLanes = 4;  // SSE, NEON: 16-byte registers
constexpr int kMR = 6;
#endif
typedef float vfloat __attribute__((vector_size(kLanes * sizeof(float))));
constexpr int kNV = 2;  // vectors per tile row
constexpr int kNR = kNV * kLanes;
constexpr int kKC = kGemmKBlock;
// Tiles of up to 768 x 768: both packed panels, 2 x 768 KiB at kKC = 256, fit in a 2 MiB L2 and are
// reused 768 / kNR and 768 / kMR times, so the (partly transposing) packing costs little.
constexpr int kMaxPanel = 768;
static_assert(kMaxPanel % kMR == 0 && kMaxPanel % kNR == 0, "tiles are whole slivers");

inline vfloat load(const float* p) {
  vfloat v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline void store(float* p, vfloat v) { std::memcpy(p, &v, sizeof(v)); }

// acc + a * b in every lane, with the product rounded or not as the target's arithmetic dictates,
// never as the optimiser does: GCC contracts `acc + a * b` into an FMA only from -O2 up, which would
// make the sums (and the bit-exact gemm test) depend on the optimisation level. Where the target has
// FMA the intrinsic says so; where it has none there is nothing to contract, and the product is
// rounded before the add at every level.
inline vfloat multiply_add(float a, vfloat b, vfloat acc) {
#if defined(__AVX512F__)
  return _mm512_fmadd_ps(_mm512_set1_ps(a), b, acc);
#elif defined(__FMA__)
  return _mm256_fmadd_ps(_mm256_set1_ps(a), b, acc);
#elif defined(__ARM_NEON) && defined(__ARM_FEATURE_FMA)
  return vfloat(vfmaq_f32(float32x4_t(acc), vdupq_n_f32(a), float32x4_t(b)));
#else
  return acc + a * b;
#endif
}

// C[0..mr) x [0..nr) (row stride ldc) = (fresh ? 0 : C) + sum_k a[k][i] b[k][j] over kc steps,
// each sum a chain of FMAs in k order. a, b: packed slivers, zero-padded beyond mr / nr.
void micro_kernel(float* c, size_t ldc, const float* a, const float* b, int kc, int mr, int nr, bool fresh) {
  vfloat acc[kMR][kNV];
  for (int i = 0; i < kMR; ++i)
    for (int j = 0; j < kNV; ++j) acc[i][j] = vfloat{};
  for (int k = 0; k < kc; ++k) {
    vfloat bv[kNV];
    for (int j = 0; j < kNV; ++j) bv[j] = load(b + size_t(k) * kNR + j * kLanes);
    for (int i = 0; i < kMR; ++i) {
      const float ai = a[size_t(k) * kMR + i];
      for (int j = 0; j < kNV; ++j) acc[i][j] = multiply_add(ai, bv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < mr; ++i) {
    float* row = c + size_t(i) * ldc;
    if (nr == kNR) {
      for (int j = 0; j < kNV; ++j) {
        float* p = row + j * kLanes;
        store(p, fresh ? acc[i][j] : load(p) + acc[i][j]);
      }
    } else {
      for (int j = 0; j < nr; ++j) {
        const float sum = acc[i][j / kLanes][j % kLanes];
        row[j] = fresh ? sum : row[j] + sum;
      }
    }
  }
}

// Packs `count` rows of a matrix (row r, step k at src[r * r_stride + k * k_stride]) over kc
// steps into slivers of W rows, [k][W] floats each, zero-padded to whole slivers. A's rows give its
// kMR-slivers, B's columns its kNR-slivers.
template <int W>
void pack_slivers(float* dst, const float* src, size_t r_stride, size_t k_stride, int count, int kc) {
  for (int r0 = 0; r0 < count; r0 += W) {
    float* out = dst + size_t(r0) * kc;
    const float* in = src + size_t(r0) * r_stride;
    const int rows = std::min(W, count - r0);
    if (rows == W && r_stride == 1) {  // each step's W values are contiguous
      for (int k = 0; k < kc; ++k)
        for (int i = 0; i < W; ++i) out[size_t(k) * W + i] = in[size_t(k) * k_stride + i];
    } else if (rows == W && k_stride == 1) {  // a transpose: rows are contiguous in k
      for (int k = 0; k < kc; ++k)
        for (int i = 0; i < W; ++i) out[size_t(k) * W + i] = in[size_t(i) * r_stride + k];
    } else {
      for (int k = 0; k < kc; ++k) {
        for (int i = 0; i < rows; ++i) out[size_t(k) * W + i] = in[size_t(i) * r_stride + size_t(k) * k_stride];
        for (int i = rows; i < W; ++i) out[size_t(k) * W + i] = 0.0f;
      }
    }
  }
}

// One thread's packed panels, grown once to the largest tile; vfloat elements make them SIMD-aligned.
struct PackBuffers {
  std::vector<vfloat> a, b;
  static float* grow(std::vector<vfloat>& v, size_t floats) {
    const size_t n = (floats + kLanes - 1) / kLanes;
    if (v.size() < n) v.resize(n);
    return reinterpret_cast<float*>(v.data());
  }
};

int round_up(int x, int multiple) { return (x + multiple - 1) / multiple * multiple; }

// The tile [m0, m0 + mc) x [n0, n0 + nc) of C, over all K blocks in order.
void gemm_tile(float* Cmat, MatrixView A, MatrixView B, int N, int K, bool accumulate, int m0, int mc, int n0,
               int nc) {
  thread_local PackBuffers buffers;
  float* apack = PackBuffers::grow(buffers.a, size_t(round_up(mc, kMR)) * kKC);
  float* bpack = PackBuffers::grow(buffers.b, size_t(round_up(nc, kNR)) * kKC);
  const int row_slivers = (mc + kMR - 1) / kMR, col_slivers = (nc + kNR - 1) / kNR;
  for (int k0 = 0; k0 < K; k0 += kKC) {
    const int kc = std::min(kKC, K - k0);
    const bool fresh = !accumulate && k0 == 0;
    pack_slivers<kMR>(apack, A.data + size_t(m0) * A.row_stride + size_t(k0) * A.col_stride, A.row_stride,
                      A.col_stride, mc, kc);
    pack_slivers<kNR>(bpack, B.data + size_t(k0) * B.row_stride + size_t(n0) * B.col_stride, B.col_stride,
                      B.row_stride, nc, kc);
    for (int s = 0; s < row_slivers; ++s) {
      const float* a = apack + size_t(s) * kc * kMR;
      const int mr = std::min(kMR, mc - s * kMR);
      float* c = Cmat + size_t(m0 + s * kMR) * N + n0;
      for (int t = 0; t < col_slivers; ++t)
        micro_kernel(c + t * kNR, size_t(N), a, bpack + size_t(t) * kc * kNR, kc, mr, std::min(kNR, nc - t * kNR),
                     fresh);
    }
  }
}

}  // namespace

void gemm(float* Cmat, MatrixView A, MatrixView B, int M, int N, int K, bool accumulate) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!accumulate) std::fill(Cmat, Cmat + size_t(M) * N, 0.0f);
    return;
  }
  // Smaller tiles when C has too few for the threads to share (with some spare, as other processes
  // may take a core); the larger side is halved, keeping whole slivers.
  int mc = round_up(std::min(M, kMaxPanel), kMR), nc = round_up(std::min(N, kMaxPanel), kNR);
  auto tiles = [&] { return long((M + mc - 1) / mc) * ((N + nc - 1) / nc); };
  const long wanted = 3L * omp_get_max_threads();
  while (tiles() < wanted && (mc > 4 * kMR || nc > kNR)) {
    if (nc > kNR && (nc >= mc || mc <= 4 * kMR))
      nc = round_up(nc / 2, kNR);
    else
      mc = round_up(mc / 2, kMR);
  }
  const int mt = (M + mc - 1) / mc;
  const long count = tiles();
  // Tiles that share columns of B run one after the other, so the threads find that part of B in
  // the shared cache.
#pragma omp parallel for schedule(dynamic, 1)
  for (long t = 0; t < count; ++t) {
    const int m0 = int(t % mt) * mc, n0 = int(t / mt) * nc;
    gemm_tile(Cmat, A, B, N, K, accumulate, m0, std::min(mc, M - m0), n0, std::min(nc, N - n0));
  }
}

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC) {
  // out[n][o] = sum_c inp[n][c] weight[o][c]: B(c, o) = weight[o][c], weight used transposed.
  gemm(out, MatrixView{inp, size_t(C), 1}, MatrixView{weight, 1, size_t(C)}, N, OC, C, false);
  if (!bias) return;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < OC; ++o) out[size_t(n) * OC + o] += bias[o];
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC) {
  // dinp[n][c] = sum_o dout[n][o] weight[o][c]; dweight[o][c] += sum_n dout[n][o] inp[n][c].
  gemm(dinp, MatrixView{dout, size_t(OC), 1}, MatrixView{weight, size_t(C), 1}, N, C, OC, false);
  gemm(dweight, MatrixView{dout, 1, size_t(OC)}, MatrixView{inp, size_t(C), 1}, OC, C, N, true);
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
