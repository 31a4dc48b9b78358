// MFU (llmc/mfu.h): the FLOP count against a count by hand for GPT-2 small, the peak table's
// exact-name lookups, LLMC_PEAK_TFLOPS, and the step line and main.log that show it.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "llmc/gpt2.h"
#include "llmc/mfu.h"
#include "llmc/train/run_log.h"
#include "tests/unit/test_support.h"

using namespace llmc;
using test_support::read_bytes;
using test_support::TempDir;

TEST_CASE("mfu: 6N + 6LCT FLOPs per token for d12 at T=1024") {
  // N = 124,475,904 (tests/unit/test_memory_plan.cpp counts it): 6N = 746,855,424;
  // 6 * 12 layers * 768 channels * 1024 = 56,623,104; together 803,478,528.
  CHECK(model_flops_per_token(config_from_descriptor("d12"), 1024) == 803478528.0);
  // T only changes the attention term: at T=64, 6 * 12 * 768 * 64 = 3,538,944.
  CHECK(model_flops_per_token(config_from_descriptor("d12"), 64) == 746855424.0 + 3538944.0);
}

TEST_CASE("mfu: the percentage of the peak") {
  // 803,478,528 FLOPs x 1,000,000 tokens/s = 803.5 TFLOP/s of 989.4: 81.2%.
  CHECK(mfu_percent(803478528.0, 1e6, 989.4e12) == doctest::Approx(81.2083).epsilon(1e-5));
}

TEST_CASE("mfu: the peak table matches exact device names only") {
  CHECK(dense_bf16_peak_tflops("NVIDIA H100 80GB HBM3") == 989.4);
  CHECK(dense_bf16_peak_tflops("NVIDIA H100 PCIe") == 756.5);
  CHECK(dense_bf16_peak_tflops("NVIDIA H200") == 989.4);
  CHECK(dense_bf16_peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0);
  // A name the table does not hold is unknown, even when it contains a known one.
  CHECK_FALSE(dense_bf16_peak_tflops("NVIDIA H100 80GB HBM3 (emulated on the CPU)").has_value());
  CHECK_FALSE(dense_bf16_peak_tflops("NVIDIA H20").has_value());
  CHECK_FALSE(dense_bf16_peak_tflops("").has_value());
}

TEST_CASE("mfu: LLMC_PEAK_TFLOPS, the table, or none") {
  SUBCASE("the table, in a bf16 build") {
    const PeakFlops p = device_peak_flops("NVIDIA H100 PCIe", true, nullptr);
    CHECK(p.flops_per_second == 756.5e12);
    CHECK(p.source.find("NVIDIA H100 PCIe") != std::string::npos);
  }
  SUBCASE("the override wins over the table, and serves the fp32 build too") {
    CHECK(device_peak_flops("NVIDIA H100 PCIe", true, "500").flops_per_second == 500e12);
    const PeakFlops p = device_peak_flops("some GPU", false, "67.5");
    CHECK(p.flops_per_second == 67.5e12);
    CHECK(p.source.find("LLMC_PEAK_TFLOPS") != std::string::npos);
  }
  SUBCASE("none: an unknown GPU, or the fp32 build without an override") {
    const PeakFlops unknown = device_peak_flops("Mystery GPU", true, nullptr);
    CHECK(unknown.flops_per_second == 0.0);
    CHECK(unknown.source.find("'Mystery GPU' is not in the table") != std::string::npos);
    CHECK(device_peak_flops("NVIDIA H100 80GB HBM3", false, nullptr).flops_per_second == 0.0);
  }
  SUBCASE("a bad override is an error that names the variable") {
    for (const char* bad : {"", "abc", "0", "-5", "989x", "inf", "nan"}) {
      INFO("LLMC_PEAK_TFLOPS='", bad, "'");
      CHECK_THROWS_WITH_AS(device_peak_flops("NVIDIA H100 PCIe", true, bad),
                           doctest::Contains("LLMC_PEAK_TFLOPS: '"), std::runtime_error);
    }
  }
}

TEST_CASE("mfu: in the step line before the eta, and nowhere without a peak") {
  CHECK(format_step_line(5, 100, 7.1234561f, 1.23449f, 3e-4f, 123.44, 12345.4, 62.0, 45.24) ==
        "step   5/100 | loss 7.123456 | norm 1.2345 | lr 3.00e-04 | 123.4 ms | 12345 tok/s | MFU 45.2% | eta 1m02s");
  CHECK(format_step_line(5, 100, 7.1234561f, 1.23449f, 3e-4f, 123.44, 12345.4, 62.0) ==
        "step   5/100 | loss 7.123456 | norm 1.2345 | lr 3.00e-04 | 123.4 ms | 12345 tok/s | eta 1m02s");
}

TEST_CASE("mfu: main.log's train line carries mfu:<percent> after the llm.c keys") {
  TempDir dir;
  {
    RunLog log(dir.path, -1);
    log.train(1, 7.5f, 3e-4f, 1.25f, false, 45.678);
    log.train(2, 7.25f, 3e-4f, 1.5f, true, 45.0);
    log.train(3, 7.0f, 3e-4f, 1.75f);
  }
  CHECK(read_bytes(dir.path + "/main.log") ==
        "s:1 trl:7.500000 lr:3.000000e-04 norm:1.250000 mfu:45.68\n"
        "s:2 trl:7.250000 lr:3.000000e-04 norm:1.500000 mfu:45.00 skipped:1\n"
        "s:3 trl:7.000000 lr:3.000000e-04 norm:1.750000\n");
}
