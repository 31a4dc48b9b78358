// Fit checks and advice of the CUDA memory plan (llmc/cuda/memory_fit.h): budgets after the
// reserve, the verdict, the largest -b that fits and what -r 2 and -z 1 save.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "llmc/cuda/memory_fit.h"
#include "llmc/cuda/memory_plan.h"
#include "llmc/gpt2.h"
#include "tests/unit/test_support.h"

using namespace llmc;
using test_support::contains;
using test_support::starts_with;

namespace {

constexpr size_t kGiB = size_t(1) << 30, kMiB = size_t(1) << 20;

// The figures below count the logits of all B*T rows, in one chunk; the default's chunks have a
// test case of their own.
MemoryPlanInputs d12(int B, int recompute, int zero_stage, int ranks) {
  MemoryPlanInputs in = inputs_for_ranks(config_from_descriptor("d12"), B, 1024, recompute, zero_stage, ranks, true,
                                         Precision::kBf16, AttentionKind::kCudnn);
  in.classifier_chunk_rows = B * 1024;
  return in;
}

// The n in "<prefix>n" of text; -1 when text does not say it.
int number_after(const std::string& text, const std::string& prefix) {
  const size_t at = text.find(prefix);
  return at == std::string::npos ? -1 : std::stoi(text.substr(at + prefix.size()));
}

}  // namespace

TEST_CASE("memory fit: budgets keep the documented reserves") {
  // A card's total: 1 GiB for the context and library handles, 512 MiB more when NCCL is to come.
  CHECK(budget_from_device_memory(40 * kGiB, false).available == 39 * kGiB);
  CHECK(budget_from_device_memory(40 * kGiB, true).available == 40 * kGiB - kGiB - 512 * kMiB);
  // Free memory, the context already made: 256 MiB for kernels the libraries load at first use.
  CHECK(budget_from_free_memory(10 * kGiB, false).available == 10 * kGiB - 256 * kMiB);
  CHECK(budget_from_device_memory(512 * kMiB, false).available == 0);
  const MemoryBudget small = budget_from_free_memory(8 * kGiB, false), large = budget_from_device_memory(80 * kGiB, false);
  CHECK(tighter(small, large).available == small.available);
  CHECK(tighter(large, small).available == small.available);
  CHECK(contains(budget_from_device_memory(40 * kGiB, true).source, "--device-memory 40.00 GiB"));
  CHECK(format_bytes(1536 * kMiB) == "1536.0 MiB");
  CHECK(format_bytes(40 * kGiB) == "40.00 GiB");
}

TEST_CASE("memory fit: a plan that fits says so with its margin") {
  // d12 at B=4 T=1024 -r 1 on one rank, by test_memory_plan.cpp's count: parameters, master
  // weights, gradients, m and v 16 * 124,475,904 = 1,991,614,464 bytes; 157 slots of B*T*C bf16
  // activations (residual 13, ln1 and ln2 24, qkv 36, attention output and the residual after it
  // 24, fc 48, GELU 4, projection outputs and lnf 2, gradients 6) * 6,291,456 = 987,758,592; logits
  // 4096 * 50,304 * 2 = 412,090,368; cuBLASLt 33,554,432 and cuDNN 16 MiB + 4096 * 768 * 4 + 4 * 12
  // * 1024 * 4 = 29,556,736; LayerNorm and attention statistics, losses, scratch, scalars, tokens
  // and encoder buckets 6,426,644. 3,461,001,236 bytes of 79 GiB leave 81,364,602,860 = 75.78 GiB.
  const MemoryPlanInputs in = d12(4, 1, 0, 1);
  const MemoryPlan plan = plan_memory(in);
  const MemoryBudget budget = budget_from_device_memory(80 * kGiB, false);
  const std::string report = fit_report(in, plan, 1, budget);
  CHECK(starts_with(report, "fits: needs "));
  CHECK(contains(report, "75.78 GiB to spare"));
  CHECK_NOTHROW(check_memory_fits(in, plan, 1, budget));
}

TEST_CASE("memory fit: d12 at B=64 T=1024 on a 16 GiB card: the largest -b, -r 2, and -z 1 over 8 ranks") {
  // It needs 24,709,017,620 bytes for one rank's buffers (test_memory_plan.cpp) plus, with 8 ranks
  // and --overlap's default, the gradient buckets' staging and spans: 14,185,728 bytes (also
  // there), 24,723,203,348 bytes = 23.03 GiB; 16 GiB less 1.5 GiB leave 14.5.
  const MemoryPlanInputs in = d12(64, 1, 0, 8);
  const MemoryPlan plan = plan_memory(in);
  const MemoryBudget budget = budget_from_device_memory(16 * kGiB, true);
  REQUIRE(budget.available == 16 * kGiB - kGiB - 512 * kMiB);
  const std::string report = fit_report(in, plan, 8, budget);
  INFO(report);
  CHECK(starts_with(report, "does not fit: needs 23.03 GiB per rank, 14.50 GiB available"));
  CHECK(contains(report, "biggest buffers: logits 6288.0 MiB"));  // 65,536 rows x 50,304 x 2 bytes
  // The largest -b: that batch fits, one more does not.
  const int b = number_after(report, "largest -b that fits: ");
  REQUIRE(b > 0);
  CHECK(b < 64);
  MemoryPlanInputs at_b = in, above_b = in;
  at_b.batch = b;
  above_b.batch = b + 1;
  CHECK(plan_memory(at_b).total_bytes() <= budget.available);
  CHECK(plan_memory(above_b).total_bytes() > budget.available);
  // -r 2 drops 11 of the 12 slots of ln1 and ln2: 2 * 11 * 65,536 * 768 * 2 bytes = 2112.0 MiB.
  CHECK(contains(report, "-r 2: saves 2112.0 MiB"));
  // -z 1 keeps 1/8 of master, m and v: 3 * 4 * (124,475,904 - 15,559,488) = 1,306,996,992 bytes,
  // and its bucket spans table is 156 spans (3,744 bytes) shorter (test_memory_plan.cpp):
  // 1,307,000,736 bytes = 1246.45 MiB; with -r 2 as well, 2112.0 + 1246.45 MiB.
  CHECK(contains(report, "-z 1: saves 1246.5 MiB"));
  CHECK(contains(report, "-r 2 -z 1: saves 3358.5 MiB"));
  const std::string error =
      test_support::thrown_message<std::runtime_error>([&] { check_memory_fits(in, plan, 8, budget); });
  CHECK(contains(error, "not enough GPU memory for B=64 T=1024 -r 1 -z 0 over 8 rank(s)"));
  CHECK(contains(error, "stopped before allocating"));
  CHECK(contains(error, report));
}

TEST_CASE("memory fit: one rank gets no -z 1 advice, and a hopeless card says so") {
  const MemoryPlanInputs in = d12(8, 2, 0, 1);
  const std::string report = fit_report(in, plan_memory(in), 1, budget_from_device_memory(2 * kGiB, false));
  INFO(report);
  CHECK(contains(report, "not even -b 1 fits"));
  CHECK(contains(report, "-z 1: no help with one rank"));
  CHECK_FALSE(contains(report, "-r 2:"));  // already -r 2
}

TEST_CASE("memory fit: the plan's table lists every buffer and the total") {
  const MemoryPlanInputs in = d12(4, 1, 1, 8);
  const MemoryPlan plan = plan_memory(in);
  const std::string table = describe_plan(in, plan, 8);
  CHECK(contains(table, "memory plan per rank: L=12 H=12 C=768 maxT=1024"));
  CHECK(contains(table, "124475904 parameters; B=4 T=1024 -r 1 -z 1 over 8 ranks; bf16, cudnn attention"));
  for (const PlannedBuffer& b : plan.buffers) CHECK_MESSAGE(contains(table, std::string("  ") + b.name + " "), b.name);
  // The one-rank plan above (3,461,001,236 bytes) less 7/8 of master, m and v, 12 * (124,475,904 -
  // 15,559,488) = 1,306,996,992, plus the gradient buckets' staging 14,178,816 and spans 3,168
  // (test_memory_plan.cpp): 2,168,186,228 bytes = 2067.74 MiB, under 10 GiB so in MiB twice.
  CHECK(contains(table, "2067.7  (2067.7 MiB)\n"));
}

TEST_CASE("memory fit: -r auto takes the least recompute whose plan fits, up to the most allowed") {
  const MemoryPlanInputs in = d12(64, 2, 0, 1);
  size_t bytes[3];
  for (int r = 0; r < 3; ++r) bytes[r] = plan_memory(d12(64, r, 0, 1)).total_bytes();
  REQUIRE(bytes[0] > bytes[1]);
  REQUIRE(bytes[1] > bytes[2]);
  const auto budget = [](size_t available) {
    MemoryBudget b;
    b.available = available;
    return b;
  };
  CHECK(least_recompute_that_fits(in, budget(bytes[0]), 2) == 0);
  CHECK(least_recompute_that_fits(in, budget(bytes[0] - 1), 2) == 1);
  CHECK(least_recompute_that_fits(in, budget(bytes[1]), 2) == 1);
  CHECK(least_recompute_that_fits(in, budget(bytes[1] - 1), 2) == 2);
  CHECK(least_recompute_that_fits(in, budget(bytes[2] - 1), 2) == 2);  // none fits: the most, for the advice
  CHECK(least_recompute_that_fits(in, budget(bytes[1] - 1), 1) == 1);
  CHECK(least_recompute_that_fits(in, budget(bytes[2]), 0) == 0);     // e.g. LLMC_GELU=epilogues
}

TEST_CASE("memory fit: with the default chunks of logits, -r auto takes -r 0 in the memory -r 1 needs with one") {
  MemoryPlanInputs whole = d12(64, 2, 0, 1), chunked = whole;
  chunked.classifier_chunk_rows = kClassifierChunkRows;
  MemoryBudget budget;
  budget.available = plan_memory(d12(64, 1, 0, 1)).total_bytes();
  CHECK(least_recompute_that_fits(whole, budget, 2) == 1);
  CHECK(least_recompute_that_fits(chunked, budget, 2) == 0);
  // The dry run's header says so.
  CHECK(contains(describe_plan(chunked, plan_memory(chunked), 1), ", logits in chunks of 16384 rows\n"));
  CHECK_FALSE(contains(describe_plan(whole, plan_memory(whole), 1), "chunks"));
}
