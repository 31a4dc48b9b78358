// CUDA parity test: runs the CUDA backend and the CPU oracle (llmc/cpu/cpu_backend.h) on the same
// model and batches and holds the CUDA one to the bars of docs/contract.md:
//   FP32 build: logits and every gradient tensor rel. L2 < 1e-4 (losses rel. < 1e-4);
//   BF16 build: loss abs. err < 2e-2, every gradient tensor rel. L2 < 5e-2, 10 AdamW steps'
//               losses within 2e-2 (logits held to 5e-2 too).
// Also: parameter and optimizer-state round trips, forward_loss, forward_losses, next_token_logits,
// the gradient norm, gradient accumulation over two micro-batches, recompute 0/1/2, every value of
// every speed switch and those that change the kernels together, the classifier's logits and losses
// over several chunks, LLMC_CUDA_GRAPHS=on's replays against off (tests/lib/cuda_graphs_check.h), a
// skewed batch (one token's long chain, cut into pieces by the encoder backward), (bf16) both
// attention kernels and --fp8 1 with every FP8 switch (at bars derived from the FP8 rounding,
// tests/lib/fp8_bars.h; the checks in tests/lib/fp8_parity.h), and the memory
// plan (device_bytes equals the plan's total; the drop in free memory is that plus at most the
// libraries' reserve; on the emulated GPU, each device allocation is a planned buffer, also with
// the switches together). One PASS/FAIL line per check, then a summary.
//
//   test_gpt2cu [--config DESC | --model FILE] [--B B] [--T T] [--steps N] [--seed S] [--quick]
//   test_gpt2cu --probe
// --quick (for compute-sanitizer) skips the recompute/attention variants and runs 2 steps;
// --probe only prints the device (scripts/test_gpu.sh uses it to see whether a binary runs here).
// Exit status: 0 all passed, 1 a check failed, 2 bad usage or an error, 77 no CUDA device.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "llmc/cpu/cpu_backend.h"
#include "llmc/cuda/cuda_backend.h"
#include "llmc/cuda/kernel_scratch.h"
#include "llmc/cuda/memory_fit.h"
#include "llmc/dist/communicator.h"
#include "llmc/gpt2.h"
#include "llmc/io/model_file.h"
#include "llmc/rng.h"
#include "tests/lib/classifier_chunks.h"
#include "tests/lib/cuda_graphs_check.h"
#include "tests/lib/cuda_parity.h"
#include "tests/lib/fp8_parity.h"
#include "tests/lib/test_gpt2cu_args.h"

using namespace llmc;

namespace {

constexpr int kExitNoDevice = 77;

// B rows of T tokens and their next tokens, as the data loader makes them from B*T+1 tokens.
Batch random_batch(Rng& rng, int B, int T, int vocab) {
  const size_t BT = size_t(B) * T;
  std::vector<int> tokens(BT + 1);
  for (int& t : tokens) t = int(rng.below(uint64_t(vocab)));
  return {std::vector<int>(tokens.begin(), tokens.end() - 1), std::vector<int>(tokens.begin() + 1, tokens.end())};
}

// GPT-2 init, then the biases and LayerNorm parameters perturbed so that none is trivially 0 or 1
// (their gradients and their effect on the forward pass are then both tested).
std::vector<float> test_parameters(const GPT2Config& config, uint64_t seed) {
  std::vector<float> params = init_parameters(config, seed);
  Rng rng(seed ^ 0xB1A5ull);
  const auto layout = param_layout(config);
  for (int i : {kLn1w, kLn1b, kQkvb, kAttprojb, kLn2w, kLn2b, kFcb, kFcprojb, kLnfw, kLnfb}) {
    const ParamTensor& t = layout[i];
    for (size_t k = 0; k < t.numel; ++k) params[t.offset + k] += 0.05f * rng.normal();
  }
  return params;
}

// The tuning pass (LLMC_GEMM_SEARCH=timed) on `batch`: it chooses something, leaves the gradients
// and the loss at zero, and its choices load back into the backend.
void check_tuning_pass(Report& report, CudaBackend& cuda, const Batch& batch, int B, int T) {
  cuda.tune_kernels(batch.inputs.data(), batch.targets.data(), B, T);
  const std::vector<uint8_t> choices = cuda.kernel_choices();
  report.check(fmt::format("tuning pass chose kernels ({} bytes)", choices.size()), choices.empty() ? 1.0 : 0.0, 0.5,
               "none");
  std::vector<float> g(num_parameters(cuda.config()));
  cuda.get_gradients(g.data());
  report.exact("gradients after the tuning pass are zero", g, std::vector<float>(g.size(), 0.0f));
  report.check("loss accumulator after the tuning pass", std::fabs(cuda.accumulated_loss()), 1e-30, "abs");
  const std::string loaded = cuda.set_kernel_choices(choices);
  report.check(fmt::format("tuning pass's choices load back ({})", loaded), cuda.kernel_choices() == choices ? 0.0 : 1.0,
               0.5, "differ");
}


int run(const Args& a) {
  if (cuda_device_count() == 0) {
    fmt::print("SKIP: no CUDA device (test_gpt2cu needs a GPU; nothing was checked)\n");
    return kExitNoDevice;
  }
  if (a.probe) {
    fmt::print("device: {} | precision {} | {}\n", cuda_device_description(), cuda_precision_name(),
               cuda_library_versions());
    return 0;
  }
  GPT2Config config;
  std::vector<float> params;
  if (!a.model.empty()) {
    ModelFile file = load_model(a.model);
    config = file.config;
    params = std::move(file.params);
  } else {
    config = config_from_descriptor(a.config);
    params = test_parameters(config, a.seed);
  }
  if (a.T > config.max_seq_len)
    throw std::invalid_argument(fmt::format("--T: {} exceeds the model's max_seq_len {}", a.T, config.max_seq_len));
  const int B = a.B, T = a.T;
  const size_t n = num_parameters(config);
  const AttentionKind attention = default_attention_kind();
  fmt::print("test_gpt2cu: {} | precision {} | attention {} | model L={} H={} C={} V={} ({} parameters) | B={} T={}\n"
             "libraries: {}\n",
             cuda_device_description(), cuda_precision_name(), attention_kind_name(attention), config.num_layers,
             config.num_heads, config.channels, config.vocab_size, n, B, T, cuda_library_versions());
  std::fflush(stdout);

  Report report;
  Rng rng(a.seed * 7919 + 1);
  const Batch batch = random_batch(rng, B, T, config.vocab_size);

  CpuBackend cpu(config);
  cpu.set_parameters(params.data());
  // The memory plan: the backend allocates exactly the plan's buffers, and the device's free memory
  // drops by that much plus at most the reserve the plan keeps for the libraries' handles and
  // kernels (kLibraryReserveBytes, llmc/cuda/memory_fit.h). The first query creates the context.
  cuda_free_memory();
  const size_t free_before = cuda_free_memory().value_or(0);
  const std::optional<std::vector<size_t>> allocations_before = cuda_live_allocation_sizes();
  auto cuda = make_cuda(config, a, 1, attention, params);
  const size_t free_after = cuda_free_memory().value_or(0), allocated = cuda->device_bytes();
  if (allocations_before)
    check_buffers_against_plan(report, cuda->memory_plan(), allocations_before->size());
  const double mib = 1024.0 * 1024.0;
  report.check(fmt::format("device_bytes {} = the memory plan's total {}", allocated, cuda->memory_plan().total_bytes()),
               std::fabs(double(allocated) - double(cuda->memory_plan().total_bytes())), 0.5, "bytes off");
  const double drop = double(free_before) - double(free_after);
  report.check(fmt::format("free memory drop {:.1f} MiB >= device_bytes {:.1f} MiB", drop / mib, allocated / mib),
               drop >= double(allocated) ? 0.0 : (double(allocated) - drop) / mib, 0.5, "MiB short");
  report.check(fmt::format("free memory drop beyond device_bytes (bar: the {:.0f} MiB reserve)",
                           kLibraryReserveBytes / mib),
               (drop - double(allocated)) / mib, kLibraryReserveBytes / mib, "MiB");

  if (cuda->tunes_kernels()) check_tuning_pass(report, *cuda, batch, B, T);
  std::vector<float> round(n);
  cuda->get_parameters(round.data());
  report.exact("set_parameters/get_parameters round trip", round, params);

  // Forward: logits.
  const std::vector<float> cuda_logits = cuda->forward_logits(batch.inputs.data(), B, T);
  const float* cpu_logits = cpu.forward_logits(batch.inputs.data(), B, T);
  report.check("logits", rel_l2(cuda_logits.data(), cpu_logits, cuda_logits.size()), kTensorBar, "rel_l2");

  // Loss and gradients of one micro-batch.
  cpu.zero_grad();
  cpu.forward_backward(batch.inputs.data(), batch.targets.data(), B, T, 1.0f);
  const float cpu_loss = cpu.accumulated_loss();
  const std::vector<float> cpu_grads(cpu.gradients(), cpu.gradients() + n);
  const float cpu_norm = std::sqrt(cpu.grad_sum_of_squares());
  const std::vector<float> grads = cuda_gradients(*cuda, batch, B, T);
  report.loss("loss", cuda->accumulated_loss(), cpu_loss);
  check_gradients(report, "grad", config, grads, cpu_grads, true);
  const float norm = std::sqrt(cuda->grad_sum_of_squares());
  report.check(fmt::format("grad norm ({:.6f} vs cpu {:.6f})", norm, cpu_norm), std::fabs(norm - cpu_norm) / cpu_norm,
               kTensorBar, "rel_err");

  // Two half-weighted micro-batches accumulate to the same gradient as one (same batch twice).
  cuda->zero_grad();
  cuda->forward_backward(batch.inputs.data(), batch.targets.data(), B, T, 0.5f);
  cuda->forward_backward(batch.inputs.data(), batch.targets.data(), B, T, 0.5f);
  std::vector<float> accumulated(n);
  cuda->get_gradients(accumulated.data());
  report.loss("accumulated loss (2 x 0.5)", cuda->accumulated_loss(), cpu_loss);
  check_gradients(report, "grad accumulated over 2 micro-batches", config, accumulated, cpu_grads, false);

  // Validation and sampling paths.
  report.loss("forward_loss", cuda->forward_loss(batch.inputs.data(), batch.targets.data(), B, T),
              cpu.forward_loss(batch.inputs.data(), batch.targets.data(), B, T));
  std::vector<float> cuda_losses(size_t(B) * T), cpu_losses(size_t(B) * T);
  cuda->forward_losses(batch.inputs.data(), batch.targets.data(), B, T, cuda_losses.data());
  cpu.forward_losses(batch.inputs.data(), batch.targets.data(), B, T, cpu_losses.data());
  report.check("forward_losses (every position)", rel_l2(cuda_losses.data(), cpu_losses.data(), cpu_losses.size()),
               kTensorBar, "rel_l2");
  const int context = std::max(1, T / 2);
  std::vector<float> cuda_next(size_t(config.vocab_size)), cpu_next(size_t(config.vocab_size));
  cuda->next_token_logits(batch.inputs.data(), context, cuda_next.data());
  cpu.next_token_logits(batch.inputs.data(), context, cpu_next.data());
  report.check(fmt::format("next_token_logits (context {})", context),
               rel_l2(cuda_next.data(), cpu_next.data(), cpu_next.size()), kTensorBar, "rel_l2");

  if (!a.quick) {
    for (int recompute : {0, 2}) {
      auto variant = make_cuda(config, a, recompute, attention, params);
      const std::vector<float> variant_grads = cuda_gradients(*variant, batch, B, T);
      check_gradients(report, fmt::format("grad with recompute {}", recompute), config, variant_grads, cpu_grads,
                      false);
      // Recomputing runs the same kernels on the same inputs. On the emulated GPU a GEMM's sums do
      // not depend on where its operands lie, so the gradients must be bit for bit those of -r 1;
      // on a GPU, buffers at other alignments may get other cuBLASLt kernels, which sum in
      // another order.
      if (cuda_device_emulated())
        report.exact(fmt::format("grad with recompute {} = with recompute 1, bit for bit", recompute), variant_grads,
                     grads);
    }
    // Every other value of every speed switch (llmc/cuda/speed_switches.def), one at a time, each at
    // the most recompute it allows up to -r 1; then the ones that change what runs here together. Not
    // the FP8 switches, which change nothing without --fp8 1 (check_fp8 runs each with it), nor, with
    // the fallback attention (the emulated GPU's), LLMC_CUDNN_BACKWARD, which would change nothing.
    const std::vector<SpeedSwitchRow>& rows = speed_switch_rows();
    std::vector<SpeedSwitches> variants;
    SpeedSwitches together;
    for (size_t row = 0; row < rows.size(); ++row) {
      const std::string variable = rows[row].variable;
      if (variable.rfind("LLMC_FP8_", 0) == 0) continue;
      if (variable == "LLMC_CUDNN_BACKWARD" && attention != AttentionKind::kCudnn) continue;
      for (int value = 1; value < int(rows[row].values.size()); ++value) {
        SpeedSwitches speed;
        set_speed_switch(speed, row, value);
        variants.push_back(speed);
      }
      // Together: each at its last value, but the GEMM search stays timed, so that its tuning pass
      // is checked with the others.
      if (variable != "LLMC_GEMM_SEARCH") set_speed_switch(together, row, int(rows[row].values.size()) - 1);
    }
    variants.push_back(together);
    for (size_t i = 0; i < variants.size(); ++i) {
      const bool all_together = i + 1 == variants.size();
      const int recompute = std::min(1, max_recompute(variants[i]));
      const std::optional<std::vector<size_t>> live_before = cuda_live_allocation_sizes();
      auto variant = make_cuda(config, a, recompute, attention, params, variants[i]);
      if (live_before && all_together) check_buffers_against_plan(report, variant->memory_plan(), live_before->size());
      // The tuning pass (LLMC_GEMM_SEARCH=timed, the default) is checked with the defaults above and
      // here with the switches together; elsewhere the variants run the heuristic's algorithms.
      if (variant->tunes_kernels() && all_together) check_tuning_pass(report, *variant, batch, B, T);
      const std::vector<float> variant_grads = cuda_gradients(*variant, batch, B, T);
      check_gradients(report,
                      fmt::format("grad with {}{} -r {}", all_together ? "the switches together: " : "",
                                  speed_switches_summary(variants[i]), recompute),
                      config, variant_grads, cpu_grads, false);
      // Two switches change no sum on the emulated GPU, alone: the timed GEMM search (the emulated
      // cuBLASLt's algorithms all sum alike, and the tuning pass left nothing behind) and CUDA graphs
      // (the same kernels on the same buffers, replayed). Their gradients must be bit for bit the
      // defaults'. Only there: on a GPU, runs of one build may already differ (docs/gpu-runs.md, the
      // resume check), and the algorithms sum differently.
      const SpeedSwitches defaults;
      SpeedSwitches same_sums = variants[i];
      same_sums.gemm_search = defaults.gemm_search;
      same_sums.cuda_graphs = defaults.cuda_graphs;
      if (cuda_device_emulated() && speed_switches_summary(same_sums) == speed_switches_summary(defaults))
        report.exact(fmt::format("grad with {} = the defaults', bit for bit", speed_switches_summary(variants[i])),
                     variant_grads, grads);
      // A recompute reruns the forward's kernels in the switches' form, so on the emulated GPU -r 0
      // gives -r 1's bits here too, as for the defaults above.
      if (cuda_device_emulated() && recompute == 1) {
        auto stored = make_cuda(config, a, 0, attention, params, variants[i]);
        report.exact(fmt::format("grad with {} -r 0 = -r 1, bit for bit", speed_switches_summary(variants[i])),
                     cuda_gradients(*stored, batch, B, T), variant_grads);
      }
    }
    // A skewed batch, one token at 7 positions of every 8: a chain longer than kEncoderPieceRows
    // whenever 7/8 of B*T exceeds it, which random batches never give, so that the encoder backward
    // cuts it into pieces; against the CPU.
    Batch skewed = batch;
    for (size_t i = 0; i < skewed.inputs.size(); ++i)
      if (i % 8 != 0) skewed.inputs[i] = 7 % config.vocab_size;
    cpu.zero_grad();
    cpu.forward_backward(skewed.inputs.data(), skewed.targets.data(), B, T, 1.0f);
    const std::vector<float> cpu_skewed(cpu.gradients(), cpu.gradients() + n);
    const int chain = B * T - (B * T + 7) / 8;
    auto skewed_run = make_cuda(config, a, 1, attention, params);
    check_gradients(report,
                    fmt::format("grad on a skewed batch (a chain of {} positions, {} pieces)", chain,
                                (chain + kEncoderPieceRows - 1) / kEncoderPieceRows),
                    config, cuda_gradients(*skewed_run, skewed, B, T), cpu_skewed, false);
    if (attention == AttentionKind::kCudnn) {
      auto variant = make_cuda(config, a, 1, AttentionKind::kFallback, params);
      check_gradients(report, "grad with the fallback attention", config, cuda_gradients(*variant, batch, B, T),
                      cpu_grads, false);
    }
  }

  // The defaults' chunked classifier, with test_classifier_chunk_rows(T) rows a chunk.
  check_chunked_classifier(report, rel_l2, *cuda, cpu, batch.inputs.data(), batch.targets.data(), B, T, kTensorBar);
  if (!kFp32) check_fp8(report, config, a, attention, params, batch, cpu, cpu_grads, cpu_loss);

  // Gradient buckets sent over NCCL on a second stream while the backward pass runs (--overlap).
  // One rank: every sum is the value itself, so a bucket packed, unpacked or ordered wrongly shows
  // up as wrong gradients; stage 1 over one rank also goes through the per-owner reduce packing.
  if (!cuda_build_has_nccl())
    fmt::print("SKIP  grad through overlapped NCCL buckets: this build has no NCCL (NO_MULTI_GPU=1)\n");
  else
    for (bool sharded : {false, true}) {
      SingleProcessCommunicator one;
      CudaBackendOptions o = cuda_options(a, 1, attention);
      o.nccl_host = &one;
      o.overlap_gradients = true;
      CudaBackend overlapped(config, o, optimizer_partition(n, sharded ? 1 : 0, 1, 0));
      overlapped.set_parameters(params.data());
      overlapped.zero_grad();
      overlapped.begin_gradient_sync(one);
      overlapped.forward_backward(batch.inputs.data(), batch.targets.data(), B, T, 1.0f);
      overlapped.finish_gradient_sync();
      std::vector<float> g(n);
      overlapped.get_gradients(g.data());
      check_gradients(report, fmt::format("grad through overlapped NCCL buckets (ZeRO-{}, 1 rank)", sharded ? 1 : 0),
                      config, g, cpu_grads, false);
    }
  if (!a.quick) check_cuda_graphs(report, config, cuda_options(a, 1, attention), params, batch.inputs, batch.targets, B, T);

  // AdamW steps as the loop runs them: two micro-batches of 0.5, norm clipping at 1, weight decay.
  const int steps = a.quick ? std::min(a.steps, 2) : a.steps;
  const Batch second = random_batch(rng, B, T, config.vocab_size);
  auto fresh = make_cuda(config, a, 1, attention, params);
  CpuBackend cpu_steps(config);
  cpu_steps.set_parameters(params.data());
  for (int step = 0; step < steps; ++step) {
    const float ours = loop_step(*fresh, batch, second, B, T, step);
    report.loss(fmt::format("AdamW step {} loss", step + 1), ours, loop_step(cpu_steps, batch, second, B, T, step));
  }
  if (steps > 0) {
    std::vector<float> cuda_params(n), cpu_params(n);
    fresh->get_parameters(cuda_params.data());
    cpu_steps.get_parameters(cpu_params.data());
    report.check(fmt::format("parameters after {} steps", steps), rel_l2(cuda_params.data(), cpu_params.data(), n),
                 kTensorBar, "rel_l2");
    std::vector<OptimizerTensor> state = fresh->get_optimizer_state();
    const std::vector<float> v = state[1].values;
    std::swap(state[0].values, state[1].values);  // so a no-op copy cannot pass
    fresh->set_optimizer_state(state);
    report.exact("set/get_optimizer_state round trip", fresh->get_optimizer_state()[0].values, v);
  }

  fmt::print("test_gpt2cu ({}, attention {}): {} checks passed, {} failed\n", cuda_precision_name(),
             attention_kind_name(attention), report.passed(), report.failed());
  return report.failed() == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  }
}
