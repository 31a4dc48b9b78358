// test_gpt2cu's checks of --fp8 1 (bf16 build; a GPU with FP8 tensor cores, or the emulated GPU):
// the four layers' GEMMs in FP8 with every FP8 switch, and LLMC_FP8_LM_HEAD=on, against the CPU
// oracle at the bars of tests/lib/fp8_bars.h.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "llmc/cpu/cpu_backend.h"
#include "llmc/cuda/cuda_backend.h"
#include "llmc/cuda/fp8_layout.h"
#include "llmc/gpt2.h"
#include "tests/lib/cuda_parity.h"
#include "tests/lib/fp8_bars.h"

namespace llmc {

// What --fp8 1 gave with the defaults, for LLMC_FP8_LM_HEAD=on's comparisons: the calibrating and
// the FP8 micro-step's gradients, the evaluation pass's logits, the scaling state after both.
struct Fp8Defaults {
  std::vector<float> calibrating, grads, logits;
  std::vector<uint8_t> state;
};

// The largest |d(logits)| of the oracle's logits (the padded columns are 0): dloss (p_j - [j == y])
// for loss scale 1, dloss = 1 / (B*T).
inline float largest_dlogit(const float* logits, const std::vector<int>& targets, int V, int Vp) {
  const double dloss = 1.0 / double(targets.size());
  double largest = 0.0;
  for (size_t row = 0; row < targets.size(); ++row) {
    const float* x = logits + row * size_t(Vp);
    const double m = *std::max_element(x, x + V);
    double sum = 0.0;
    for (int j = 0; j < V; ++j) sum += std::exp(double(x[j]) - m);
    for (int j = 0; j < V; ++j)
      largest = std::max(largest, std::fabs(std::exp(double(x[j]) - m) / sum - (j == targets[row] ? 1.0 : 0.0)));
  }
  return float(largest * dloss);
}

// Scaled tensor i's amax history entry `entry` in the bytes of CudaBackend::scaling_state()
// (llmc/cuda/fp8_layout.h: the head's words, then per tensor its scale and its history).
inline float scaling_state_history(const std::vector<uint8_t>& state, int i, int entry) {
  float x = 0.0f;
  const size_t at = kScalingStateHeadWords * sizeof(uint64_t) +
                    (size_t(i) * kScalingStateFloatsPerTensor + 1 + size_t(entry)) * sizeof(float);
  if (at + sizeof x <= state.size()) std::memcpy(&x, state.data() + at, sizeof x);
  return x;
}

// The scaling state as a checkpoint carries it: a second backend of options `o` given `state`, the
// state `fp8` had before its next micro-step, computes that micro-step's gradients as `fp8` does (bit
// for bit, with the same state after, on the emulated GPU), within grad_bar of the oracle.
inline void check_fp8_resume(Report& report, const std::string& name, const GPT2Config& config,
                             const CudaBackendOptions& o, const std::vector<float>& params, const Batch& batch, int B,
                             int T, CudaBackend& fp8, const std::vector<uint8_t>& state,
                             const std::vector<float>& cpu_grads, double grad_bar) {
  CudaBackend resumed(config, o);
  resumed.set_parameters(params.data());
  resumed.set_scaling_state(state);
  const std::vector<float> next = cuda_gradients(fp8, batch, B, T), resumed_next = cuda_gradients(resumed, batch, B, T);
  if (cuda_device_emulated()) {
    report.exact(name + " grads after set_scaling_state = the original's, bit for bit", resumed_next, next);
    report.check(name + " scaling state after the same micro-step = the original's",
                 resumed.scaling_state() == fp8.scaling_state() ? 0.0 : 1.0, 0.5, "differ");
  }
  check_gradients(report, name + " grad after set_scaling_state", config, resumed_next, cpu_grads, false, grad_bar);
}

// Up to three AdamW steps of `fp8` against the oracle's from the same parameters, each loss within
// loss_bar.
inline void check_fp8_adamw_steps(Report& report, const std::string& name, CudaBackend& fp8, const GPT2Config& config,
                                  const std::vector<float>& params, const Batch& batch, int B, int T, int steps,
                                  double loss_bar) {
  CpuBackend cpu_steps(config);
  cpu_steps.set_parameters(params.data());
  for (int step = 0; step < std::min(steps, 3); ++step) {
    const float ours = loop_step(fp8, batch, batch, B, T, step);
    const float oracle = loop_step(cpu_steps, batch, batch, B, T, step);
    report.check(fmt::format("{} AdamW step {} loss ({:.6f} vs cpu {:.6f})", name, step + 1, ours, oracle),
                 std::fabs(ours - oracle), loss_bar, "abs_err");
  }
}

// A setting that acts in the optimizer step (LLMC_FP8_WEIGHT_AMAX=adamw: the weights' amaxes from
// AdamW), which single micro-steps never reach: from the same parameters, up to three AdamW steps of
// a backend of options `other` and of one of `o`. On the emulated GPU the same losses (each after
// the weights' casts of the step before), parameters and scaling state, bit for bit; on a GPU,
// whose cuDNN attention backward sums in no fixed order, each loss within loss_bar of the oracle's.
inline void check_fp8_optimizer_steps(Report& report, const std::string& name, const GPT2Config& config,
                                      const Args& a, const CudaBackendOptions& o, const CudaBackendOptions& other,
                                      const std::vector<float>& params, const Batch& batch, double loss_bar) {
  CudaBackend variant(config, other);
  variant.set_parameters(params.data());
  if (!cuda_device_emulated()) {
    check_fp8_adamw_steps(report, name, variant, config, params, batch, a.B, a.T, a.steps, loss_bar);
    return;
  }
  CudaBackend defaults(config, o);
  defaults.set_parameters(params.data());
  std::vector<float> ours, theirs;
  for (int step = 0; step < std::min(a.steps, 3); ++step) {
    ours.push_back(loop_step(variant, batch, batch, a.B, a.T, step));
    theirs.push_back(loop_step(defaults, batch, batch, a.B, a.T, step));
  }
  report.exact(name + ": losses over AdamW steps = the defaults', bit for bit", ours, theirs);
  std::vector<float> ours_params(params.size()), their_params(params.size());
  variant.get_parameters(ours_params.data());
  defaults.get_parameters(their_params.data());
  report.exact(name + ": parameters after AdamW steps = the defaults', bit for bit", ours_params, their_params);
  report.check(name + ": scaling state after AdamW steps = the defaults'",
               variant.scaling_state() == defaults.scaling_state() ? 0.0 : 1.0, 0.5, "differ");
}

// A setting whose numerics move (LLMC_FP8_LM_HEAD=on, LLMC_FP8_GELU=epilogue), after its FP8
// micro-step of gradients `grads`: the loss, those gradients and the evaluation pass's logits
// against the oracle at their bars, and the gradients no longer the defaults'. Returns the logits.
inline std::vector<float> check_fp8_moved(Report& report, const std::string& name, const GPT2Config& config, int B,
                                          int T, CudaBackend& fp8, const Batch& batch, const std::vector<float>& grads,
                                          const float* cpu_logits, const std::vector<float>& cpu_grads, float cpu_loss,
                                          const std::vector<float>& default_grads, double logits_bar, double grad_bar) {
  const size_t logit_count = size_t(B) * T * config.padded_vocab_size, n = grads.size();
  const double loss_bar = fp8_loss_bar(kLossBar, logits_bar, cpu_logits, logit_count);
  report.check(fmt::format("{} loss ({:.6f} vs cpu {:.6f})", name, fp8.accumulated_loss(), cpu_loss),
               std::fabs(fp8.accumulated_loss() - cpu_loss), loss_bar, "abs_err");
  check_gradients(report, name + " grad", config, grads, cpu_grads, true, grad_bar);
  size_t same = 0;
  for (size_t i = 0; i < n; ++i) same += grads[i] == default_grads[i];
  report.check(fmt::format("{}: grads differ from the defaults' ({} of {} equal)", name, same, n),
               double(same) / double(n), 0.5, "equal fraction");
  std::vector<float> logits = fp8.forward_logits(batch.inputs.data(), B, T);
  report.check(name + ": logits (evaluation pass)", rel_l2(logits.data(), cpu_logits, logit_count), logits_bar,
               "rel_l2");
  return logits;
}

// LLMC_FP8_LM_HEAD=on: the LM head's GEMMs in FP8 too, which changes the numerics, so its own bars
// (fp8_bars.h with the head's two GEMMs) rather than the defaults' bits. Still the defaults' bits:
// the calibrating micro-step (floatX GEMMs). The fused classifier records d(logits)' amax, which
// is the oracle's within the build's bar. The state, of three more tensors, moves as a checkpoint
// moves it; a backend of the other setting refuses it, naming the switch.
inline void check_fp8_lm_head(Report& report, const GPT2Config& config, const Args& a, CudaBackendOptions o,
                              const std::vector<float>& params, const Batch& batch, CpuBackend& cpu,
                              const std::vector<float>& cpu_grads, float cpu_loss, const Fp8Defaults& defaults) {
  const int B = a.B, T = a.T, L = config.num_layers;
  const std::string name = "--fp8 1 with LLMC_FP8_LM_HEAD=on";
  o.speed.fp8_lm_head = Fp8LmHead::kOn;
  const std::optional<std::vector<size_t>> live_before = cuda_live_allocation_sizes();
  CudaBackend head(config, o);
  if (live_before) check_buffers_against_plan(report, head.memory_plan(), live_before->size());
  head.set_parameters(params.data());
  const double logits_bar = fp8_logits_bar(L, kTensorBar, true), grad_bar = fp8_gradient_bar(L, kTensorBar, true);

  const std::vector<float> calibrating = cuda_gradients(head, batch, B, T);
  if (cuda_device_emulated())
    report.exact(name + ": calibration grads = the defaults', bit for bit", calibrating, defaults.calibrating);
  const std::vector<float> grads = cuda_gradients(head, batch, B, T);
  const float* cpu_logits = cpu.forward_logits(batch.inputs.data(), B, T);
  const size_t logit_count = size_t(B) * T * config.padded_vocab_size;
  const double loss_bar = fp8_loss_bar(kLossBar, logits_bar, cpu_logits, logit_count);
  const std::vector<float> logits = check_fp8_moved(report, name, config, B, T, head, batch, grads, cpu_logits,
                                                    cpu_grads, cpu_loss, defaults.grads, logits_bar, grad_bar);
  size_t same = 0;
  for (size_t i = 0; i < logit_count; ++i) same += logits[i] == defaults.logits[i];
  report.check(fmt::format("{}: logits differ from the defaults' ({} of {} equal)", name, same, logit_count),
               double(same) / double(logit_count), 0.5, "equal fraction");

  // The calibrating micro-step's d(logits) amax, history entry 0 of the head's gradient tensor.
  const std::vector<uint8_t> state = head.scaling_state();
  const Fp8Layout layout(config, fp8_linears(config, true));
  const float recorded = scaling_state_history(state, layout.tensor(Fp8Role::kGradient, LinearLayer::kLmHead, 0), 0);
  const float expected = largest_dlogit(cpu_logits, batch.targets, config.vocab_size, config.padded_vocab_size);
  report.check(fmt::format("{}: d(logits) amax {:.6e} vs cpu {:.6e}", name, recorded, expected),
               std::fabs(recorded - expected) / expected, kTensorBar, "rel_err");
  report.check(fmt::format("{}: scaling state of {} bytes, 3 tensors more than the defaults' {}", name, state.size(),
                           defaults.state.size()),
               state.size() == defaults.state.size() + 3 * kScalingStateFloatsPerTensor * sizeof(float) ? 0.0 : 1.0,
               0.5,
               "differ");

  check_fp8_resume(report, name + ":", config, o, params, batch, B, T, head, state, cpu_grads, grad_bar);
  // The other setting's state is refused with the switch named, either way round.
  CudaBackendOptions off = o;
  off.speed.fp8_lm_head = Fp8LmHead::kOff;
  CudaBackend head_again(config, o), layers_only(config, off);
  for (auto [backend, bytes] : {std::pair{&head_again, &defaults.state}, std::pair{&layers_only, &state}}) {
    std::string message;
    try {
      backend->set_scaling_state(*bytes);
    } catch (const std::runtime_error& e) {
      message = e.what();
    }
    report.check(fmt::format("{}: the other setting's scaling state is refused ({})", name, message),
                 message.find("LLMC_FP8_LM_HEAD") == std::string::npos ? 1.0 : 0.0, 0.5, "accepted");
  }

  check_fp8_adamw_steps(report, name, head, config, params, batch, B, T, a.steps, loss_bar);
}

// LLMC_FP8_GELU=epilogue (`variant`, after its calibrating micro-step and one FP8 micro-step, whose
// gradients are `grads`): fcproj's E4M3 operand is the GELU of the fc GEMM's fp32 pre-activation, in
// cuBLASLt's form, so the numerics move within the FP8 bars rather than keeping the defaults' bits.
// Its amax, recorded by the GEMM (AMAX_D), is the defaults' kernel's within the bf16 rounding of the
// values that kernel saw; the bf16 GELU the backward's kernel writes for fcproj's weight gradient
// keeps the resume bit for bit.
inline void check_fp8_gelu_epilogue(Report& report, const std::string& name, const GPT2Config& config, const Args& a,
                                    const CudaBackendOptions& o, const std::vector<float>& params, const Batch& batch,
                                    CudaBackend& variant, const std::vector<float>& grads, const float* cpu_logits,
                                    const std::vector<float>& cpu_grads, float cpu_loss, const Fp8Defaults& defaults) {
  const int B = a.B, T = a.T, L = config.num_layers;
  const double logits_bar = fp8_logits_bar(L, kTensorBar), grad_bar = fp8_gradient_bar(L, kTensorBar);
  check_fp8_moved(report, name, config, B, T, variant, batch, grads, cpu_logits, cpu_grads, cpu_loss, defaults.grads,
                  logits_bar, grad_bar);
  const std::vector<uint8_t> state = variant.scaling_state();
  report.check(fmt::format("{}: scaling state of {} bytes, the defaults' size", name, state.size()),
               state.size() == defaults.state.size() ? 0.0 : 1.0, 0.5, "differ");
  // fcproj's input amax of each layer: entry 0 from the calibrating micro-step's GELU kernel, entry
  // 1 from the FP8 micro-step's GEMM.
  const Fp8Layout layout(config, fp8_linears(config, false));
  double worst = 0.0;
  for (int l = 0; l < L; ++l) {
    const int i = layout.tensor(Fp8Role::kInput, LinearLayer::kFcproj, l);
    if (scaling_state_history(state, i, 0) != scaling_state_history(defaults.state, i, 0)) worst = 1.0;
    const float ours = scaling_state_history(state, i, 1), theirs = scaling_state_history(defaults.state, i, 1);
    worst = std::max(worst, std::fabs(double(ours) - theirs) / std::max(1e-30, double(theirs)));
  }
  report.check(name + ": fcproj's input amax, the calibrating one equal and the GEMM's the kernel's", worst,
               kTensorBar, "rel_err");
  check_fp8_resume(report, name + ":", config, o, params, batch, B, T, variant, state, cpu_grads, grad_bar);
}

// --fp8 1 (bf16 build; a GPU with FP8 tensor cores, or the emulated GPU) against the oracle at the
// bars of tests/lib/fp8_bars.h. The first micro-step calibrates (floatX GEMMs while the casts record the
// amaxes), so its gradients are the bf16 ones, bit for bit on the emulated GPU; the next ones run
// FP8, at scales that saw this very batch. The scaling state moves to another backend as a
// checkpoint moves it, after which both compute the same bits.
inline void check_fp8(Report& report, const GPT2Config& config, const Args& a, AttentionKind attention,
                      const std::vector<float>& params, const Batch& batch, CpuBackend& cpu,
                      const std::vector<float>& cpu_grads, float cpu_loss) {
  const int B = a.B, T = a.T, L = config.num_layers;
  const size_t n = num_parameters(config);
  if (cuda_compute_capability() < kFp8ComputeCapability) {
    fmt::print("SKIP  --fp8 1: {} has no FP8 tensor cores (compute capability below 8.9)\n",
               cuda_device_description());
    return;
  }
  CudaBackendOptions o = cuda_options(a, 1, attention);
  o.fp8 = true;
  const std::optional<std::vector<size_t>> live_before = cuda_live_allocation_sizes();
  CudaBackend fp8(config, o);
  if (live_before) check_buffers_against_plan(report, fp8.memory_plan(), live_before->size());
  fp8.set_parameters(params.data());
  const double logits_bar = fp8_logits_bar(L, kTensorBar), grad_bar = fp8_gradient_bar(L, kTensorBar);

  // FP8 runs the GELU as kernels (which write the FP8 copies), as LLMC_GELU=kernels does in bf16.
  SpeedSwitches gelu_kernels;
  gelu_kernels.gelu = GeluPath::kKernels;
  const std::vector<float> bf16_grads =
      cuda_gradients(*make_cuda(config, a, 1, attention, params, gelu_kernels), batch, B, T);
  const std::vector<float> calibrating = cuda_gradients(fp8, batch, B, T);
  if (cuda_device_emulated())
    report.exact("--fp8 1 first micro-step (calibration) = bf16's (LLMC_GELU=kernels), bit for bit", calibrating,
                 bf16_grads);
  const std::vector<float> fp8_grads = cuda_gradients(fp8, batch, B, T);
  const float* cpu_logits = cpu.forward_logits(batch.inputs.data(), B, T);
  const size_t logit_count = size_t(B) * T * config.padded_vocab_size;
  const double loss_bar = fp8_loss_bar(kLossBar, logits_bar, cpu_logits, logit_count);
  report.check(fmt::format("--fp8 1 loss ({:.6f} vs cpu {:.6f})", fp8.accumulated_loss(), cpu_loss),
               std::fabs(fp8.accumulated_loss() - cpu_loss), loss_bar, "abs_err");
  check_gradients(report, "--fp8 1 grad", config, fp8_grads, cpu_grads, true, grad_bar);
  size_t same = 0;
  for (size_t i = 0; i < n; ++i) same += fp8_grads[i] == bf16_grads[i];
  report.check(fmt::format("--fp8 1 grads differ from bf16's ({} of {} equal): FP8 GEMMs ran", same, n),
               double(same) / double(n), 0.5, "equal fraction");
  const std::vector<float> fp8_logits = fp8.forward_logits(batch.inputs.data(), B, T);
  report.check("--fp8 1 logits (evaluation pass)", rel_l2(fp8_logits.data(), cpu_logits, logit_count), logits_bar,
               "rel_l2");

  // The scaling state after the calibrating and one FP8 micro-step, as a checkpoint carries it
  // (check_fp8_resume, below).
  const std::vector<uint8_t> state = fp8.scaling_state();

  // Every other value of each FP8 switch (LLMC_FP8_*), alone. The casts folded into other kernels
  // have the cast's bytes and amax, and the emulated cuBLASLt sums in fp32 with fast accumulation
  // or without: on the emulated GPU the same calibration, FP8 gradients and scaling state, bit for
  // bit. On a GPU fast accumulation sums otherwise: the FP8 bars. LLMC_FP8_WEIGHT_AMAX acts in the
  // optimizer step: check_fp8_optimizer_steps. LLMC_FP8_LM_HEAD changes the numerics:
  // check_fp8_lm_head; LLMC_FP8_GELU=epilogue from its first FP8 micro-step on:
  // check_fp8_gelu_epilogue.
  const std::vector<SpeedSwitchRow>& rows = speed_switch_rows();
  for (size_t row = 0; row < rows.size(); ++row) {
    if (std::string(rows[row].variable).rfind("LLMC_FP8_", 0) != 0) continue;
    for (int value = 0; value < int(rows[row].values.size()); ++value) {
      if (value == speed_switch_value(o.speed, row)) continue;
      CudaBackendOptions other = o;
      set_speed_switch(other.speed, row, value);
      if (other.speed.fp8_lm_head != o.speed.fp8_lm_head) continue;
      const std::optional<std::vector<size_t>> live = cuda_live_allocation_sizes();
      CudaBackend variant(config, other);
      if (live) check_buffers_against_plan(report, variant.memory_plan(), live->size());
      variant.set_parameters(params.data());
      const std::string name = fmt::format("--fp8 1 with {}={}", rows[row].variable, rows[row].values[value]);
      const std::vector<float> variant_calibrating = cuda_gradients(variant, batch, B, T);
      const std::vector<float> variant_grads = cuda_gradients(variant, batch, B, T);
      if (other.speed.fp8_gelu != o.speed.fp8_gelu) {
        if (cuda_device_emulated())
          report.exact(name + ": calibration grads = the defaults', bit for bit", variant_calibrating, calibrating);
        check_fp8_gelu_epilogue(report, name, config, a, other, params, batch, variant, variant_grads, cpu_logits,
                                cpu_grads, cpu_loss, {calibrating, fp8_grads, fp8_logits, state});
        continue;
      }
      if (cuda_device_emulated()) {
        report.exact(name + ": calibration grads = the defaults', bit for bit", variant_calibrating, calibrating);
        report.exact(name + ": FP8 grads = the defaults', bit for bit", variant_grads, fp8_grads);
        report.check(name + ": scaling state = the defaults'", variant.scaling_state() == state ? 0.0 : 1.0, 0.5,
                     "differ");
      } else {
        check_gradients(report, name + " grad", config, variant_grads, cpu_grads, true, grad_bar);
      }
      if (other.speed.fp8_weight_amax != o.speed.fp8_weight_amax)
        check_fp8_optimizer_steps(report, name, config, a, o, other, params, batch, loss_bar);
    }
  }

  check_fp8_resume(report, "--fp8 1", config, o, params, batch, B, T, fp8, state, cpu_grads, grad_bar);
  check_fp8_adamw_steps(report, "--fp8 1", fp8, config, params, batch, B, T, a.steps, loss_bar);
  check_fp8_lm_head(report, config, a, o, params, batch, cpu, cpu_grads, cpu_loss,
                    {calibrating, fp8_grads, fp8_logits, state});
}

}  // namespace llmc
