// The CUDA memory plan (llmc/cuda/memory_plan.h) against counts done by hand for GPT-2 small (d12),
// and the backend's allocation sequence (llmc/cuda/backend_buffers.h) against the plan.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "llmc/backend.h"
#include "llmc/cuda/backend_buffers.h"
#include "llmc/cuda/memory_plan.h"
#include "llmc/cuda/planned_allocator.h"
#include "llmc/gpt2.h"
#include "tests/unit/test_support.h"

using namespace llmc;

namespace {

// GPT-2 small: L=12, C=768, NH=12, Vp=50304, max_seq_len 1024. Its parameters, counted from the
// tensor table of docs/contract.md: wte Vp*C + wpe 1024*C + per layer (ln1 2C, qkv 3C*C + 3C,
// attproj C*C + C, ln2 2C, fc 4C*C + 4C, fcproj 4C*C + C = 12C^2 + 13C) + lnf 2C
// = 38,633,472 + 786,432 + 12 * 7,087,872 + 1,536.
constexpr size_t kL = 12, kC = 768, kNH = 12, kVp = 50304;
constexpr size_t kD12Params = kVp * kC + 1024 * kC + kL * (12 * kC * kC + 13 * kC) + 2 * kC;
static_assert(kD12Params == 124475904, "d12 has 124,475,904 parameters");
// ZeRO-1 over 8 ranks: 124,475,904 / 8 = 15,559,488 = 32 * 486,234, a whole number of 32-element
// alignment units, so the chunks need no padding and rank 0 owns exactly that many.
constexpr size_t kD12Chunk8 = 15559488;
static_assert(kD12Chunk8 * 8 == kD12Params && kD12Chunk8 % 32 == 0, "no padding over 8 ranks");

struct Expected {
  std::string name;
  size_t bytes;
};

// Every buffer of the bf16, cuDNN plan of d12 at (B, T, -r), with `owned` elements of optimizer
// state and no padding: X = 2 bytes per bf16 element, 4 per fp32 or int element.
std::vector<Expected> d12_bf16_by_hand(size_t B, size_t T, int recompute, size_t owned) {
  const size_t BT = B * T, n = kD12Params, L = kL, C = kC;
  const size_t ln_slots = recompute >= 2 ? 1 : L;    // -r 2 recomputes ln1/ln2 into one slot
  const size_t gelu_slots = recompute >= 1 ? 1 : L;  // -r 1 and 2 recompute the GELU into one slot
  // Bias-gradient scratch: one row of 4C partial sums per 64 rows of B*T; LayerNorm scratch: 512
  // blocks of 2C. B=4 T=64: 4 * 3072 = 12,288 < 786,432; B=64 T=1024: 1024 * 3072 = 3,145,728.
  const size_t scratch_floats = std::max<size_t>(512 * 2 * C, (BT + 63) / 64 * 4 * C);
  // cuDNN: a 16 MiB allowance for the engine, the fp32 dQ accumulator (B*T*C floats, a multiple of
  // 256 bytes here) and one fp32 row sum per (b, head, t).
  const size_t cudnn_bytes = (size_t(16) << 20) + BT * C * 4 + B * kNH * T * 4;
  return {
      {"parameters", n * 2},
      {"master weights", owned * 4},
      {"gradients", n * 2},
      {"AdamW m", owned * 4},
      {"AdamW v", owned * 4},
      {"residual stream", (L + 1) * BT * C * 2},
      {"ln1", ln_slots * BT * C * 2},
      {"ln2", ln_slots * BT * C * 2},
      {"ln1 mean", L * BT * 4},
      {"ln1 rstd", L * BT * 4},
      {"ln2 mean", L * BT * 4},
      {"ln2 rstd", L * BT * 4},
      {"lnf mean", BT * 4},
      {"lnf rstd", BT * 4},
      {"qkv", L * BT * 3 * C * 2},
      {"attention output", L * BT * C * 2},
      {"residual after attention", L * BT * C * 2},
      {"fc pre-GELU", L * BT * 4 * C * 2},
      {"fc GELU", gelu_slots * BT * 4 * C * 2},
      {"projection outputs", BT * C * 2},
      {"lnf", BT * C * 2},
      {"logits", BT * kVp * 2},
      {"losses", BT * 4},
      {"attention statistics", L * BT * kNH * 4},
      {"residual gradient", BT * C * 2},
      {"layer gradient", BT * C * 2},
      {"fc/qkv gradient", BT * 4 * C * 2},
      {"gradient partial sums", scratch_floats * 4},
      {"scalars", (4 + 1024) * 4},  // loss, norm, 2 spare; 1024 norm partial sums
      {"tokens", 2 * BT * 4},
      {"encoder buckets", (3 * BT + 1) * 4},
      {"cuBLASLt workspace", size_t(32) << 20},
      {"cuDNN workspace", cudnn_bytes},
  };
}

MemoryPlanInputs d12_inputs(int B, int T, int recompute, const OptimizerPartition& partition) {
  MemoryPlanInputs in;
  in.config = config_from_descriptor("d12");
  in.batch = B;
  in.seq_len = T;
  in.recompute = recompute;
  in.precision = Precision::kBf16;
  in.attention = AttentionKind::kCudnn;
  in.partition = partition;
  in.classifier_chunk_rows = B * T;  // one chunk of all B*T rows, whose logits the counts by hand hold
  return in;
}

// Rank 0 of `ranks` running d12 at B=4 T=64 with --overlap 1, with the staging and gradient buckets
// the trainer picks for it (inputs_for_ranks).
MemoryPlanInputs d12_for_ranks(int recompute, int zero_stage, int ranks, Precision precision = Precision::kBf16,
                               AttentionKind attention = AttentionKind::kCudnn) {
  return inputs_for_ranks(config_from_descriptor("d12"), 4, 64, recompute, zero_stage, ranks, true, precision,
                          attention);
}

void check_against_hand_count(const MemoryPlan& plan, const std::vector<Expected>& expected) {
  REQUIRE(plan.buffers.size() == expected.size());
  size_t total = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("buffer ", i, ": ", expected[i].name);
    CHECK(plan.buffers[i].name == expected[i].name);
    CHECK(plan.buffers[i].bytes() == expected[i].bytes);
    total += expected[i].bytes;
  }
  CHECK(plan.total_bytes() == total);
}

// A device that hands out distinct fake addresses and records what was asked; never dereferenced.
class RecordingAllocator : public DeviceAllocator {
 public:
  void* allocate(size_t bytes, const char* name) override {
    asked.push_back({name, bytes});
    next_ += 4096;
    return reinterpret_cast<void*>(next_);
  }
  void release(void*) override { ++released; }
  std::vector<Expected> asked;
  int released = 0;

 private:
  uintptr_t next_ = 0x100000;
};

// The allocation sequence the backend runs, with FloatX standing in for its floatX.
template <class FloatX>
std::vector<Allocation> run_backend_sequence(const MemoryPlan& plan, AttentionKind attention, RecordingAllocator& device,
                                             bool fp8 = false, bool fp8_lm_head = false) {
  PlannedAllocator allocator(plan, device);
  BackendBuffers<FloatX> buffers;
  allocate_backend_buffers<FloatX>(allocator, buffers, attention, fp8, fp8_lm_head);
  CHECK(buffers.params != nullptr);
  CHECK(buffers.blas_workspace != nullptr);
  return allocator.allocations();
}

}  // namespace

TEST_CASE("memory plan: d12 bf16 per buffer against a count by hand, -r 0/1/2, -z 0 and -z 1 over 8 ranks") {
  const size_t n = kD12Params;
  for (const auto& [B, T] : std::vector<std::pair<int, int>>{{4, 64}, {64, 1024}}) {
    for (int r = 0; r <= 2; ++r) {
      INFO("B=", B, " T=", T, " -r ", r);
      const MemoryPlan z0 = plan_memory(d12_inputs(B, T, r, unsharded_partition(n)));
      check_against_hand_count(z0, d12_bf16_by_hand(size_t(B), size_t(T), r, n));

      const MemoryPlan z1 = plan_memory(d12_inputs(B, T, r, zero1_partition(n, 8, 0, kPartitionAlignment)));
      check_against_hand_count(z1, d12_bf16_by_hand(size_t(B), size_t(T), r, kD12Chunk8));
      // ZeRO-1 saves 7/8 of master, m and v: 3 * 4 bytes * (n - n/8).
      CHECK(z0.total_bytes() - z1.total_bytes() == 3 * 4 * (n - kD12Chunk8));
    }
  }
}

TEST_CASE("memory plan: d12 totals, summed once more outside the test's own table") {
  // The totals of the table above for these cases, added up separately (in Python) while writing
  // this test: a slip in the table would have to be repeated there too.
  const size_t n = kD12Params;
  CHECK(plan_memory(d12_inputs(4, 64, 1, unsharded_partition(n))).total_bytes() == 2133590036ull);
  CHECK(plan_memory(d12_inputs(64, 1024, 0, unsharded_partition(n))).total_bytes() == 29138202644ull);
  CHECK(plan_memory(d12_inputs(64, 1024, 1, unsharded_partition(n))).total_bytes() == 24709017620ull);
  CHECK(plan_memory(d12_inputs(64, 1024, 2, unsharded_partition(n))).total_bytes() == 22494425108ull);
  const OptimizerPartition z1 = zero1_partition(n, 8, 0, kPartitionAlignment);
  CHECK(plan_memory(d12_inputs(64, 1024, 1, z1)).total_bytes() == 23402020628ull);
  CHECK(plan_memory(d12_inputs(4, 64, 2, z1)).total_bytes() == 817942292ull);
}

TEST_CASE("memory plan: ZeRO-1 padding, fp32 and the fallback attention, staging") {
  const size_t n = kD12Params;
  SUBCASE("5 ranks pad the chunks") {
    // ceil(124,475,904 / 5) = 24,895,181, rounded up to 32: 777,975 * 32 = 24,895,200 per chunk.
    const MemoryPlan plan = plan_memory(d12_inputs(4, 64, 1, zero1_partition(n, 5, 0, kPartitionAlignment)));
    CHECK(plan.find(BufferId::kParams)->elements == 5 * 24895200ull);
    CHECK(plan.find(BufferId::kGrads)->elements == 5 * 24895200ull);
    CHECK(plan.find(BufferId::kAdamM)->elements == 24895200ull);
    // The last rank's chunk is cut at n: 124,475,904 - 4 * 24,895,200 = 24,895,104.
    const MemoryPlan last = plan_memory(d12_inputs(4, 64, 1, zero1_partition(n, 5, 4, kPartitionAlignment)));
    CHECK(last.find(BufferId::kAdamV)->elements == 24895104ull);
  }
  SUBCASE("fp32 with the fallback attention: 4-byte activations, no master, T x T probabilities") {
    MemoryPlanInputs in = d12_inputs(4, 64, 1, unsharded_partition(n));
    in.precision = Precision::kFp32;
    in.attention = AttentionKind::kFallback;
    const MemoryPlan plan = plan_memory(in);
    CHECK(plan.find(BufferId::kMaster) == nullptr);
    CHECK(plan.find(BufferId::kCudnnWorkspace) == nullptr);
    CHECK(plan.find(BufferId::kAttStats) == nullptr);
    CHECK(plan.find(BufferId::kParams)->bytes() == n * 4);
    CHECK(plan.find(BufferId::kLogits)->bytes() == 4 * 64 * kVp * 4);
    // L layers of (B, NH, T, T) probabilities: 12 * 4 * 12 * 64 * 64 elements of 4 bytes.
    CHECK(plan.find(BufferId::kAttProbs)->bytes() == 12ull * 4 * 12 * 64 * 64 * 4);
    CHECK(plan.find(BufferId::kAttScores)->bytes() == 4ull * 12 * 64 * 64 * 4);
    CHECK(plan.find(BufferId::kAttDv)->bytes() == 4ull * 64 * kC * 4);
  }
  SUBCASE("cuDNN's real workspace replaces the estimate") {
    MemoryPlanInputs in = d12_inputs(4, 64, 1, unsharded_partition(n));
    in.cudnn_workspace_bytes = 123456;
    CHECK(plan_memory(in).find(BufferId::kCudnnWorkspace)->bytes() == 123456);
  }
  SUBCASE("the deterministic cuDNN backward: a bf16 dS of B*NH*T'*T' (T' = T rounded up to 64), no dQ accumulator") {
    MemoryPlanInputs in = d12_inputs(4, 100, 1, unsharded_partition(n));
    in.cudnn_backward = CudnnBackward::kDeterministic;
    // 16 MiB for the engine, dS 4 * 12 * 128 * 128 * 2 bytes (a multiple of 256), one fp32 row sum
    // per (b, head, t): 4 * 12 * 100 * 4 bytes.
    const size_t ds = 4ull * 12 * 128 * 128 * 2;
    CHECK(cudnn_deterministic_ds_bytes(config_from_descriptor("d12"), 4, 100) == ds);
    CHECK(plan_memory(in).find(BufferId::kCudnnWorkspace)->bytes() == (size_t(16) << 20) + ds + 4ull * 12 * 100 * 4);
    // The default graph at the same shape: the fp32 dQ accumulator (B*T*C floats) instead of dS.
    in.cudnn_backward = CudnnBackward::kDefault;
    CHECK(plan_memory(in).find(BufferId::kCudnnWorkspace)->bytes() ==
          (size_t(16) << 20) + 4ull * 100 * kC * 4 + 4ull * 12 * 100 * 4);
  }
  SUBCASE("one rank with -z 1 stages through an fp32 copy of the buffers; eight over NCCL do not") {
    const MemoryPlan one = plan_memory(d12_for_ranks(1, 1, 1));
    REQUIRE(one.find(BufferId::kStaging) != nullptr);
    CHECK(one.find(BufferId::kStaging)->bytes() == n * 4);
    CHECK(plan_memory(d12_for_ranks(1, 1, 8)).find(BufferId::kStaging) == nullptr);
    CHECK(plan_memory(d12_for_ranks(1, 0, 1)).find(BufferId::kStaging) == nullptr);
  }
  SUBCASE("gradient buckets (--overlap over NCCL): staging of the largest packed bucket and the span table") {
    const MemoryPlanInputs z0 = d12_for_ranks(1, 0, 8);
    REQUIRE(z0.overlap_buckets);
    const MemoryPlan plan = plan_memory(z0);
    // The largest bucket is the last layer's 12 slices with lnf: 12 C^2 + 13 C + 2 C =
    // 7,077,888 + 9,984 + 1,536 = 7,089,408 bf16 elements, 14,178,816 bytes.
    REQUIRE(plan.find(BufferId::kBucketStaging) != nullptr);
    CHECK(plan.find(BufferId::kBucketStaging)->bytes() == 7089408ull * 2);
    // Spans: 12 layer buckets of 12 segments each (the last layer's fcprojb slice, lnfw and lnfb
    // are adjacent in the buffer: one), packed and unpacked: 288 spans of 3 size_t; the embeddings
    // (wte then wpe) are one range, summed in place. 288 * 24 = 6,912 bytes.
    CHECK(plan.find(BufferId::kBucketSpans)->bytes() == 288ull * 24);
    // ZeRO-1, rank 0 of 8: the same staging (the last layer's parts are all packed); 132 spans
    // (every owner's packed parts, plus rank 0's own to unpack), counted with a separate script of
    // the parameter layout while writing this test.
    const MemoryPlan z1 = plan_memory(d12_for_ranks(1, 1, 8));
    CHECK(z1.find(BufferId::kBucketStaging)->bytes() == 7089408ull * 2);
    CHECK(z1.find(BufferId::kBucketSpans)->bytes() == 132ull * 24);
    // One rank sends nothing; --overlap 0 keeps the blocking sums.
    CHECK(plan_memory(d12_for_ranks(1, 0, 1)).find(BufferId::kBucketStaging) == nullptr);
    MemoryPlanInputs off = z0;
    off.overlap_buckets = false;
    CHECK(plan_memory(off).find(BufferId::kBucketSpans) == nullptr);
    CHECK(plan.total_bytes() - plan_memory(off).total_bytes() == 7089408ull * 2 + 288 * 24);
  }
  SUBCASE("shapes the backend rejects") {
    CHECK_THROWS_AS(plan_memory(d12_inputs(4, 2048, 1, unsharded_partition(n))), std::invalid_argument);
    CHECK_THROWS_AS(plan_memory(d12_inputs(0, 64, 1, unsharded_partition(n))), std::invalid_argument);
    CHECK_THROWS_AS(plan_memory(d12_inputs(4, 64, 3, unsharded_partition(n))), std::invalid_argument);
    MemoryPlanInputs in = d12_inputs(4, 64, 1, unsharded_partition(n));
    in.precision = Precision::kFp32;
    CHECK_THROWS_AS(plan_memory(in), std::invalid_argument);
  }
}

TEST_CASE("memory plan: the logits buffer holds one chunk of rows") {
  const size_t n = kD12Params;
  // The trainer's inputs take the default chunk.
  CHECK(d12_for_ranks(1, 0, 1).classifier_chunk_rows == kClassifierChunkRows);
  MemoryPlanInputs in = d12_inputs(64, 1024, 0, unsharded_partition(n));
  in.classifier_chunk_rows = kClassifierChunkRows;
  // d12 at B=64 T=1024: 65,536 rows in four chunks of 16,384, a logits buffer of 16,384 * 50,304 * 2
  // = 1,648,361,472 bytes instead of 6,593,445,888: 4,945,084,416 less than the -r 0 total above.
  CHECK(logits_rows(in) == 16384);
  const MemoryPlan plan = plan_memory(in);
  CHECK(plan.find(BufferId::kLogits)->bytes() == 16384ull * kVp * 2);
  CHECK(std::string(plan.find(BufferId::kLogits)->depends_on) == "chunk*Vp");
  CHECK(plan.total_bytes() == 29138202644ull - 4945084416ull);
  // No recompute with chunks needs less than -r 1 with all rows in one chunk (24,709,017,620 above).
  CHECK(plan.total_bytes() < 24709017620ull);
  // Fewer rows than a chunk: all of them, in one.
  MemoryPlanInputs small = d12_inputs(4, 64, 1, unsharded_partition(n));
  small.classifier_chunk_rows = kClassifierChunkRows;
  CHECK(plan_memory(small).find(BufferId::kLogits)->bytes() == 4ull * 64 * kVp * 2);
  CHECK(std::string(plan_memory(small).find(BufferId::kLogits)->depends_on) == "B*T*Vp");
  // A chunk size of the caller's (test_gpt2cu lowers it).
  small.classifier_chunk_rows = 100;
  CHECK(logits_rows(small) == 100);
  CHECK(plan_memory(small).find(BufferId::kLogits)->elements == 100 * kVp);
  // A chunk of B*T rows holds them all, as the counts by hand above do.
  small.classifier_chunk_rows = 4 * 64;
  CHECK(plan_memory(small).find(BufferId::kLogits)->elements == 4 * 64 * kVp);
  small.classifier_chunk_rows = 0;
  CHECK_THROWS_AS(plan_memory(small), std::invalid_argument);
}

TEST_CASE("memory plan: each layer's cuDNN statistics start 16 bytes aligned, padding counted (d48, NH=25)") {
  // B=1 T=3: 3 rows x 25 heads = 75 log-sum-exp floats per layer, padded to 76 (304 bytes, a
  // multiple of 16), so layer l starts at 304 l bytes; unpadded, layer 1 would start at 300.
  MemoryPlanInputs in = d12_inputs(1, 3, 1, unsharded_partition(1));
  in.config = config_from_descriptor("d48");
  REQUIRE(in.config.num_heads == 25);
  const MemoryPlan plan = plan_memory(in);
  CHECK(plan.find(BufferId::kAttStats)->bytes() == 48 * 76 * 4);
  CHECK(att_stats_layer_floats(3, 25) == 76);
  // Layer l starts at l slices: every layer is aligned when one slice is a multiple of 16 bytes.
  CHECK(att_stats_layer_floats(3, 25) * sizeof(float) % 16 == 0);
  // Already a multiple of 4: no padding (d12 at B=4 T=64: 3,072 floats a layer).
  CHECK(att_stats_layer_floats(4 * 64, 12) == 3072);
}

TEST_CASE("memory plan: the backend's allocation sequence allocates exactly the plan's buffers") {
  struct Case {
    const char* what;
    Precision precision;
    AttentionKind attention;
    int ranks, zero_stage, recompute;
  };
  for (const Case& c : {Case{"bf16 cudnn", Precision::kBf16, AttentionKind::kCudnn, 1, 0, 1},
                        Case{"bf16 fallback -r 0", Precision::kBf16, AttentionKind::kFallback, 1, 0, 0},
                        Case{"bf16 cudnn -z 1 x1 (staging)", Precision::kBf16, AttentionKind::kCudnn, 1, 1, 2},
                        Case{"bf16 cudnn -z 1 x8", Precision::kBf16, AttentionKind::kCudnn, 8, 1, 1},
                        Case{"fp32 fallback", Precision::kFp32, AttentionKind::kFallback, 1, 0, 1},
                        Case{"fp32 fallback -z 1 x1", Precision::kFp32, AttentionKind::kFallback, 1, 1, 2}}) {
    INFO(c.what);
    const MemoryPlan plan = plan_memory(d12_for_ranks(c.recompute, c.zero_stage, c.ranks, c.precision, c.attention));
    RecordingAllocator device;
    const std::vector<Allocation> made = c.precision == Precision::kBf16
                                             ? run_backend_sequence<uint16_t>(plan, c.attention, device)
                                             : run_backend_sequence<float>(plan, c.attention, device);
    // What the device was asked for, in order, is the plan's list, and so is the recorded list.
    REQUIRE(device.asked.size() == plan.buffers.size());
    REQUIRE(made.size() == plan.buffers.size());
    size_t sum = 0;
    for (size_t i = 0; i < plan.buffers.size(); ++i) {
      INFO(plan.buffers[i].name);
      CHECK(device.asked[i].name == plan.buffers[i].name);
      CHECK(device.asked[i].bytes == plan.buffers[i].bytes());
      CHECK(made[i].bytes == plan.buffers[i].bytes());
      sum += device.asked[i].bytes;
    }
    CHECK(sum == plan.total_bytes());
    CHECK(device.released == int(plan.buffers.size()));  // the allocator freed everything
  }
}

TEST_CASE("memory plan: a plan and a backend that disagree are caught") {
  RecordingAllocator device;
  SUBCASE("an fp32 plan for the bf16 sequence: 4-byte parameters, no master") {
    const MemoryPlan fp32 = plan_memory(d12_for_ranks(1, 0, 1, Precision::kFp32, AttentionKind::kFallback));
    const std::string error = test_support::thrown_message<std::logic_error>(
        [&] { run_backend_sequence<uint16_t>(fp32, AttentionKind::kFallback, device); });
    CHECK(test_support::contains(error, "'parameters' is planned with 4-byte elements, the backend uses 2"));
  }
  SUBCASE("a plan with the fallback's buffers for a backend running cuDNN") {
    const MemoryPlan fallback = plan_memory(d12_for_ranks(1, 0, 1, Precision::kBf16, AttentionKind::kFallback));
    const std::string error = test_support::thrown_message<std::logic_error>(
        [&] { run_backend_sequence<uint16_t>(fallback, AttentionKind::kCudnn, device); });
    CHECK(test_support::contains(error, "which the plan does not list"));
  }
  SUBCASE("a planned buffer nobody takes") {
    // The fallback's plan with cuDNN's statistics added, which the fallback never uses.
    MemoryPlan plan = plan_memory(d12_for_ranks(1, 0, 1, Precision::kBf16, AttentionKind::kFallback));
    plan.buffers.push_back({BufferId::kAttStats, "extra", 10, 4, "fixed"});
    const std::string error = test_support::thrown_message<std::logic_error>(
        [&] { run_backend_sequence<uint16_t>(plan, AttentionKind::kFallback, device); });
    CHECK(test_support::contains(error, "never allocates the planned 'extra'"));
  }
  // Whatever was allocated before the error was released again.
  CHECK(device.released == int(device.asked.size()));
}

TEST_CASE("memory plan: regrowing cuDNN's workspace keeps the list and the device in step") {
  const MemoryPlan plan = plan_memory(d12_for_ranks(1, 0, 1));
  RecordingAllocator device;
  {
    PlannedAllocator allocator(plan, device);
    BackendBuffers<uint16_t> buffers;
    allocate_backend_buffers<uint16_t>(allocator, buffers, AttentionKind::kCudnn, false, false);
    const size_t planned = plan.find(BufferId::kCudnnWorkspace)->bytes();
    CHECK(allocator.regrow(BufferId::kCudnnWorkspace, planned - 1) == buffers.cudnn_workspace);  // big enough
    CHECK(device.released == 0);
    CHECK(allocator.regrow(BufferId::kCudnnWorkspace, planned + 1000) != buffers.cudnn_workspace);
    CHECK(device.released == 1);
    CHECK(allocator.allocated_bytes() == plan.total_bytes() + 1000);
    CHECK(device.asked.back().bytes == planned + 1000);
  }
  CHECK(device.released == int(plan.buffers.size()) + 1);
}

TEST_CASE("memory plan: --fp8 1 adds the weight copies, one operand buffer and the scaling state") {
  MemoryPlanInputs in = d12_for_ranks(1, 0, 1);
  const MemoryPlan bf16 = plan_memory(in);
  in.fp8 = true;
  const MemoryPlan fp8 = plan_memory(in);
  // d12: 12 layers of C = 768 at B=4, T=64. Weights: 12 C^2 values a layer, each as it is and
  // transposed, one byte each: 2 * 12 * 12 * 768^2 = 169,869,312. The operand: B*T*4C = 256 * 3072
  // bytes. The state: 3 roles * 4 linears * 12 layers = 144 tensors of 4 + 4 (the scale and its
  // inverse, each in 16 bytes of its own) + 32 * 32 (32 amax slots, 128 bytes apart) + 16 floats.
  REQUIRE(fp8.find(BufferId::kFp8Weights) != nullptr);
  CHECK(fp8.find(BufferId::kFp8Weights)->bytes() == 169869312ull);
  CHECK(fp8.find(BufferId::kFp8Operand)->bytes() == 786432ull);
  CHECK(fp8.find(BufferId::kFp8State)->bytes() == 144ull * 1048 * 4);
  CHECK(fp8.total_bytes() - bf16.total_bytes() == 169869312ull + 786432ull + 144ull * 1048 * 4);
  CHECK(bf16.find(BufferId::kFp8State) == nullptr);
  // The backend's sequence takes exactly these buffers with FP8 on, and refuses a plan without them.
  RecordingAllocator device;
  const std::vector<Allocation> taken = run_backend_sequence<uint16_t>(fp8, AttentionKind::kCudnn, device, true);
  CHECK(taken.size() == fp8.buffers.size());
  CHECK_THROWS_AS(run_backend_sequence<uint16_t>(bf16, AttentionKind::kCudnn, device, true), std::logic_error);
  // FP8 needs the bf16 build.
  in.precision = Precision::kFp32;
  in.attention = AttentionKind::kFallback;
  CHECK(test_support::contains(test_support::thrown_message<std::invalid_argument>([&] { plan_memory(in); }),
                               "--fp8 1"));
}

TEST_CASE("memory plan: LLMC_FP8_GELU=epilogue keeps the bf16 GELU one layer at a time, as -r 1 does") {
  MemoryPlanInputs in = d12_for_ranks(0, 0, 1);
  in.fp8 = true;
  const MemoryPlan kernel = plan_memory(in);
  in.fp8_gelu_epilogue = true;
  const MemoryPlan epilogue = plan_memory(in);
  // d12 at B=4, T=64: L = 12 slots of B*T*4C = 256 * 3072 bf16 values at -r 0, one with the switch.
  CHECK(kernel.find(BufferId::kFchGelu)->bytes() == 12ull * 256 * 3072 * 2);
  CHECK(epilogue.find(BufferId::kFchGelu)->bytes() == 256ull * 3072 * 2);
  CHECK(std::string(epilogue.find(BufferId::kFchGelu)->depends_on) == "B*T*4C (LLMC_FP8_GELU)");
  CHECK(kernel.total_bytes() - epilogue.total_bytes() == 11ull * 256 * 3072 * 2);
  // At -r 1 the slot is one either way; without --fp8 1 the switch plans nothing.
  in.recompute = 1;
  MemoryPlanInputs kernel_r1 = in;
  kernel_r1.fp8_gelu_epilogue = false;
  CHECK(plan_memory(in).total_bytes() == plan_memory(kernel_r1).total_bytes());
  in.fp8 = false;
  in.recompute = 0;
  CHECK(plan_memory(in).total_bytes() == plan_memory(d12_for_ranks(0, 0, 1)).total_bytes());
}

TEST_CASE("memory plan: LLMC_FP8_LM_HEAD=on adds lnf's copy, wte's copies, three tensors, a chunk of d(logits)") {
  MemoryPlanInputs in = d12_for_ranks(1, 0, 1);
  in.fp8 = true;
  const MemoryPlan layers = plan_memory(in);
  in.fp8_lm_head = true;
  const MemoryPlan head = plan_memory(in);
  // d12 at B=4, T=64 (256 rows, one chunk): wte's copies 2 * Vp * C = 2 * 50304 * 768 bytes; lnf's
  // copy B*T*C = 256 * 768; the operand buffer the chunk's 256 rows of Vp = 50304 bytes, more than
  // the layers' B*T*4C = 256 * 3072; 3 more tensors of 1048 floats.
  CHECK(head.find(BufferId::kFp8Weights)->bytes() == 169869312ull + 2ull * 50304 * 768);
  REQUIRE(head.find(BufferId::kFp8Lnf) != nullptr);
  CHECK(head.find(BufferId::kFp8Lnf)->bytes() == 256ull * 768);
  CHECK(head.find(BufferId::kFp8Operand)->bytes() == 256ull * 50304);
  CHECK(std::string(head.find(BufferId::kFp8Operand)->depends_on) == "chunk*Vp (LLMC_FP8_LM_HEAD)");
  CHECK(head.find(BufferId::kFp8State)->bytes() == 147ull * 1048 * 4);
  CHECK(layers.find(BufferId::kFp8Lnf) == nullptr);
  // Without --fp8 1 the switch plans nothing.
  in.fp8 = false;
  in.fp8_lm_head = true;
  CHECK(plan_memory(in).total_bytes() == plan_memory(d12_for_ranks(1, 0, 1)).total_bytes());
  // At B=64, T=1024 the chunk's 16,384 rows of Vp bytes (824 MB) outgrow the layers' B*T*4C (201 MB).
  MemoryPlanInputs big = in;
  big.fp8 = true;
  big.batch = 64;
  big.seq_len = 1024;
  CHECK(plan_memory(big).find(BufferId::kFp8Operand)->bytes() == 16384ull * 50304);
  // The backend's sequence takes the head's buffers only with the switch, and refuses a plan
  // without them.
  RecordingAllocator device;
  CHECK(run_backend_sequence<uint16_t>(head, AttentionKind::kCudnn, device, true, true).size() ==
        head.buffers.size());
  CHECK_THROWS_AS(run_backend_sequence<uint16_t>(layers, AttentionKind::kCudnn, device, true, true),
                  std::logic_error);
  CHECK_THROWS_AS(run_backend_sequence<uint16_t>(head, AttentionKind::kCudnn, device, true, false),
                  std::logic_error);
}
