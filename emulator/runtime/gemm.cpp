// emu::gemm_fp32 (gemm.h). The operands are first copied into fp32 panels, op(A) by rows and op(B)
// by columns, each row padded with zeros to a multiple of 8, so that every output is a dot product
// of two contiguous vectors; a 4 x 2 block of outputs shares its loads, eight lanes at a time.
// Built with -O3 -march=native and no sanitizer (the panels are the emulator's own memory; the
// caller has checked the operands' device ranges), run in parallel on the emulator's workers.
#include "emulator/runtime/gemm.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "emulator/runtime/block_runner.h"

namespace emu {
namespace {

typedef float v8 __attribute__((vector_size(32)));
constexpr int kLanes = 8, kRows = 4, kCols = 2;
// The workers take rows to pack and column tiles to multiply this many at a time.
constexpr long long kPackRows = 64, kTilesPerTask = 4;

long long round_up(long long x, long long to) { return (x + to - 1) / to * to; }

float bf16_bits_to_float(uint16_t bits) {
  const uint32_t wide = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &wide, sizeof f);
  return f;
}

// panel[i * kp + p] = op(X)'s element along `outer` i and inner p (the GEMM's k), zero beyond.
// For op(A) (m x k) the outer index is the row; for op(B) (k x n) it is the column.
std::vector<float> pack(const GemmOperand& x, bool outer_is_row, long long outer, long long padded_outer, long long k,
                        long long kp) {
  std::vector<float> panel(size_t(padded_outer * kp), 0.0f);
  // Stored element (r, c) of op(X) is X's (r, c), or X's (c, r) when transposed.
  parallel_for(outer, kPackRows, [&](long long begin, long long end) {
    for (long long i = begin; i < end; ++i) {
      float* row = panel.data() + i * kp;
      for (long long p = 0; p < k; ++p) {
        const long long r = outer_is_row ? i : p, c = outer_is_row ? p : i;
        row[p] = x.transposed ? operand_at(x, c, r) : operand_at(x, r, c);
      }
    }
  });
  return panel;
}

}  // namespace

float fp8_to_float(uint8_t bits, bool e5m2) {
  const int mantissa_bits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  const int exponent = (bits & 0x7f) >> mantissa_bits, mantissa = bits & ((1 << mantissa_bits) - 1);
  const int all_ones = (1 << (7 - mantissa_bits)) - 1;
  float magnitude;
  if (e5m2 && exponent == all_ones)
    magnitude = mantissa == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  else if (!e5m2 && exponent == all_ones && mantissa == 7)
    magnitude = std::numeric_limits<float>::quiet_NaN();
  else if (exponent == 0)  // m / 2^mbits * 2^(1 - bias)
    magnitude = std::ldexp(float(mantissa), 1 - bias - mantissa_bits);
  else  // (1 + m / 2^mbits) * 2^(e - bias)
    magnitude = std::ldexp(float((1 << mantissa_bits) + mantissa), exponent - bias - mantissa_bits);
  return bits & 0x80 ? -magnitude : magnitude;
}

float operand_at(const GemmOperand& x, long long r, long long c) {
  const long long at = r + c * x.ld;
  switch (x.type) {
    case ElementType::fp32: return static_cast<const float*>(x.data)[at];
    case ElementType::bf16: return bf16_bits_to_float(static_cast<const uint16_t*>(x.data)[at]);
    case ElementType::e4m3: return fp8_to_float(static_cast<const uint8_t*>(x.data)[at], false);
    case ElementType::e5m2: return fp8_to_float(static_cast<const uint8_t*>(x.data)[at], true);
  }
  return std::numeric_limits<float>::quiet_NaN();  // unreachable: every ElementType is above
}

void gemm_fp32(std::vector<float>& acc, const GemmOperand& a, const GemmOperand& b, int m, int n, int k) {
  const long long kp = round_up(k, kLanes), mp = round_up(m, kRows), np = round_up(n, kCols);
  const std::vector<float> ap = pack(a, true, m, mp, k, kp), bp = pack(b, false, n, np, k, kp);
  acc.assign(size_t(m) * n, 0.0f);
  // Tile t holds output columns kCols*t .. kCols*t + kCols - 1, all rows.
  parallel_for(np / kCols, kTilesPerTask, [&](long long begin, long long end) {
    for (long long j0 = begin * kCols; j0 < end * kCols; j0 += kCols) {
      for (long long i0 = 0; i0 < mp; i0 += kRows) {
        v8 sum[kRows][kCols] = {};
        for (long long p = 0; p < kp; p += kLanes) {
          v8 bv[kCols], av[kRows];
          for (int c = 0; c < kCols; ++c) std::memcpy(&bv[c], &bp[size_t((j0 + c) * kp + p)], sizeof(v8));
          for (int r = 0; r < kRows; ++r) std::memcpy(&av[r], &ap[size_t((i0 + r) * kp + p)], sizeof(v8));
          for (int r = 0; r < kRows; ++r)
            for (int c = 0; c < kCols; ++c) sum[r][c] += av[r] * bv[c];
        }
        for (int r = 0; r < kRows; ++r)
          for (int c = 0; c < kCols; ++c) {
            const long long i = i0 + r, j = j0 + c;
            if (i >= m || j >= n) continue;
            float s = 0.0f;
            for (int l = 0; l < kLanes; ++l) s += sum[r][c][l];
            acc[size_t(i + j * m)] = s;
          }
      }
    }
  });
}

}  // namespace emu
