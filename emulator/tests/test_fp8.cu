// The emulated GPU's FP8 decode (emu::fp8_to_float, emulator/runtime/gemm.cpp), written from the OCP
// 8-bit floating point specification, against the toolkit's own host conversion in cuda_fp8.h for
// every one of the 256 codes of both formats, and against a few values worked out by hand.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>

#include "emulator/runtime/gemm.h"

namespace {

// cuda_fp8.h's value of a code: FP8 to fp16 (which holds every FP8 value), then to fp32.
float toolkit_value(uint8_t bits, bool e5m2) {
  const __half_raw wide = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(bits), e5m2 ? __NV_E5M2 : __NV_E4M3);
  return __half2float(__half(wide));
}

void check_every_code(bool e5m2) {
  int nans = 0, infinities = 0;
  for (int code = 0; code < 256; ++code) {
    CAPTURE(code);
    const float want = toolkit_value(uint8_t(code), e5m2), got = emu::fp8_to_float(uint8_t(code), e5m2);
    CHECK(std::isnan(got) == std::isnan(want));
    if (!std::isnan(want)) {
      CHECK(got == want);
      CHECK(std::signbit(got) == std::signbit(want));  // -0 is -0
    }
    nans += std::isnan(got);
    infinities += std::isinf(got);
  }
  // E4M3: S.1111.111 only. E5M2: S.11111.01, .10 and .11 are NaN, S.11111.00 infinite.
  CHECK(nans == (e5m2 ? 6 : 2));
  CHECK(infinities == (e5m2 ? 2 : 0));
}

TEST_CASE("E4M3: all 256 codes decode as cuda_fp8.h's host conversion does") { check_every_code(false); }

TEST_CASE("E5M2: all 256 codes decode as cuda_fp8.h's host conversion does") { check_every_code(true); }

TEST_CASE("FP8 values worked out by hand from the OCP specification") {
  // E4M3, S.EEEE.MMM, bias 7.
  CHECK(emu::fp8_to_float(0x38, false) == 1.0f);        // 0.0111.000: 2^(7-7)
  CHECK(emu::fp8_to_float(0xC4, false) == -3.0f);       // 1.1000.100: -(1 + 4/8) 2^1
  CHECK(emu::fp8_to_float(0x7E, false) == 448.0f);      // 0.1111.110: (1 + 6/8) 2^8, the largest
  CHECK(emu::fp8_to_float(0x01, false) == 0x1p-9f);     // 0.0000.001: 1/8 2^-6, the smallest subnormal
  CHECK(emu::fp8_to_float(0x08, false) == 0x1p-6f);     // 0.0001.000: the smallest normal
  CHECK(std::isnan(emu::fp8_to_float(0xFF, false)));    // 1.1111.111
  // E5M2, S.EEEEE.MM, bias 15.
  CHECK(emu::fp8_to_float(0x3C, true) == 1.0f);         // 0.01111.00
  CHECK(emu::fp8_to_float(0x7B, true) == 57344.0f);     // 0.11110.11: (1 + 3/4) 2^15, the largest
  CHECK(emu::fp8_to_float(0x01, true) == 0x1p-16f);     // 0.00000.01: 1/4 2^-14
  CHECK(emu::fp8_to_float(0xFC, true) == -INFINITY);    // 1.11111.00
  CHECK(std::isnan(emu::fp8_to_float(0x7D, true)));     // 0.11111.01
}

}  // namespace
