// test_gpt2cu's report, bars and helpers, shared by test_gpt2.cu and its checks in tests/lib: the
// build's bars (docs/contract.md), one PASS/FAIL line per check, the memory plan against the
// emulated GPU's allocations, per-tensor gradient checks, and the backends and steps the checks run.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "llmc/backend.h"
#include "llmc/cuda/cuda_backend.h"
#include "llmc/gpt2.h"
#include "llmc/optim/optimizer.h"
#include "tests/lib/classifier_chunks.h"
#include "tests/lib/test_gpt2cu_args.h"

namespace llmc {

#if defined(ENABLE_FP32)
constexpr bool kFp32 = true;
#else
constexpr bool kFp32 = false;
#endif
// docs/contract.md. In fp32 the losses are held to the logits' relative bar; in bf16 to 2e-2 absolute.
constexpr double kTensorBar = kFp32 ? 1e-4 : 5e-2;
constexpr double kLossBar = kFp32 ? 1e-4 : 2e-2;
constexpr bool kLossBarIsRelative = kFp32;

inline double rel_l2(const float* got, const float* ref, size_t n) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = double(got[i]) - double(ref[i]);
    diff += d * d;
    norm += double(ref[i]) * double(ref[i]);
  }
  if (!std::isfinite(diff)) return INFINITY;
  return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

class Report {
 public:
  // A check passes when `value` is finite and below `bar`.
  bool check(const std::string& what, double value, double bar, const char* unit) {
    const bool ok = std::isfinite(value) && value < bar;
    fmt::print("{}  {:<44} {} {:.3e} (bar {:.0e})\n", ok ? "PASS" : "FAIL", what, unit, value, bar);
    std::fflush(stdout);
    (ok ? passed_ : failed_) += 1;
    return ok;
  }
  bool exact(const std::string& what, const std::vector<float>& got, const std::vector<float>& ref) {
    size_t differing = 0;
    for (size_t i = 0; i < ref.size(); ++i) differing += std::memcmp(&got[i], &ref[i], sizeof(float)) != 0;
    const bool ok = got.size() == ref.size() && differing == 0;
    fmt::print("{}  {:<44} {} of {} values differ\n", ok ? "PASS" : "FAIL", what, differing, ref.size());
    std::fflush(stdout);
    (ok ? passed_ : failed_) += 1;
    return ok;
  }
  bool loss(const std::string& what, double got, double ref) {
    const double err = kLossBarIsRelative ? std::fabs(got - ref) / std::fabs(ref) : std::fabs(got - ref);
    return check(fmt::format("{} ({:.6f} vs cpu {:.6f})", what, got, ref), err, kLossBar,
                 kLossBarIsRelative ? "rel_err" : "abs_err");
  }
  int passed() const { return passed_; }
  int failed() const { return failed_; }

 private:
  int passed_ = 0, failed_ = 0;
};

// Buffer by buffer, on the emulated GPU (the one that keeps an account of its allocations): the
// device allocations the backend made, as the emulated runtime saw the cudaMalloc calls, are the
// memory plan's buffers, in the plan's order and of the plan's sizes.
inline void check_buffers_against_plan(Report& report, const MemoryPlan& plan, size_t allocations_before) {
  const std::vector<size_t> live = cuda_live_allocation_sizes().value();
  const std::vector<size_t> made(live.begin() + std::min(allocations_before, live.size()), live.end());
  std::vector<const PlannedBuffer*> planned;
  for (const PlannedBuffer& b : plan.buffers)
    if (b.bytes() > 0) planned.push_back(&b);
  const size_t common = std::min(made.size(), planned.size());
  size_t mismatches = std::max(made.size(), planned.size()) - common;
  bool named = false;
  for (size_t i = 0; i < common; ++i)
    if (made[i] != planned[i]->bytes()) {
      if (!named) fmt::print("      first mismatch: allocation {} is {} bytes, buffer {} planned {} bytes\n", i,
                             made[i], planned[i]->name, planned[i]->bytes());
      named = true;
      ++mismatches;
    }
  report.check(fmt::format("{} device allocations = the plan's {} buffers, each its size", made.size(),
                           planned.size()),
               double(mismatches), 0.5, "mismatches");
}

// Per-tensor relative L2 errors of two gradient buffers in parameter layout; one check per tensor
// when `each`, else one check of the worst tensor.
inline void check_gradients(Report& report, const std::string& what, const GPT2Config& config, const std::vector<float>& got,
                     const std::vector<float>& ref, bool each, double bar = kTensorBar) {
  const auto layout = param_layout(config);
  double worst = 0.0;
  std::string worst_name = "-";
  for (const ParamTensor& t : layout) {
    const double e = rel_l2(got.data() + t.offset, ref.data() + t.offset, t.numel);
    if (each) report.check(fmt::format("{} d{}", what, t.name), e, bar, "rel_l2");
    if (!(e <= worst)) {
      worst = e;
      worst_name = t.name;
    }
  }
  if (!each) report.check(fmt::format("{} (worst: d{})", what, worst_name), worst, bar, "rel_l2");
}

struct Batch {
  std::vector<int> inputs, targets;
};

inline CudaBackendOptions cuda_options(const Args& a, int recompute, AttentionKind attention,
                                const SpeedSwitches& speed = {}) {
  CudaBackendOptions o;
  o.speed = speed;
  o.classifier_chunk_rows = test_classifier_chunk_rows(a.T);
  o.max_batch = a.B;
  o.max_seq_len = a.T;
  o.recompute = recompute;
  o.attention = attention;
  o.seed = unsigned(a.seed);
  return o;
}

inline std::unique_ptr<CudaBackend> make_cuda(const GPT2Config& config, const Args& a, int recompute, AttentionKind attention,
                                       const std::vector<float>& params, const SpeedSwitches& speed = {}) {
  auto backend = std::make_unique<CudaBackend>(config, cuda_options(a, recompute, attention, speed));
  backend->set_parameters(params.data());
  return backend;
}

inline std::vector<float> cuda_gradients(CudaBackend& cuda, const Batch& batch, int B, int T) {
  cuda.zero_grad();
  cuda.forward_backward(batch.inputs.data(), batch.targets.data(), B, T, 1.0f);
  std::vector<float> g(num_parameters(cuda.config()));
  cuda.get_gradients(g.data());
  return g;
}

// Step `step` (from 0) of AdamW as the loop runs it on `b`: micro-batches `first` and `second` of 0.5
// each, the gradient norm clipped at 1, weight decay 0.1; returns the step's loss.
inline float loop_step(Backend& b, const Batch& first, const Batch& second, int B, int T, int step) {
  b.zero_grad();
  b.forward_backward(first.inputs.data(), first.targets.data(), B, T, 0.5f);
  b.forward_backward(second.inputs.data(), second.targets.data(), B, T, 0.5f);
  const float loss = b.accumulated_loss();
  const float norm = std::sqrt(b.grad_sum_of_squares());
  OptimizerStep update;
  update.weight_decay = 0.1f;
  update.lr = 3e-4f;
  update.t = step + 1;
  update.grad_scale = norm > 1.0f ? 1.0f / norm : 1.0f;
  b.optimizer_step(update);
  return loss;
}

}  // namespace llmc
