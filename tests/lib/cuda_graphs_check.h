// test_gpt2cu's check of LLMC_CUDA_GRAPHS=on (llmc/cuda/micro_step_graphs.cuh) against off, beyond
// the one micro-step every switch value gets against the CPU oracle: training steps as the loop
// runs them (two micro-steps each, an evaluation pass at another shape between steps) and steps
// whose gradient buckets go to NCCL during the backward pass (one rank), so that graphs are
// captured, then replayed. The backend must really launch graphs (one per micro-step, counted),
// and on the emulated GPU give off's bits: a graph replays the same kernels on the same buffers.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "llmc/cuda/cuda_backend.h"
#include "llmc/dist/communicator.h"
#include "llmc/gpt2.h"
#include "llmc/optim/optimizer.h"

namespace llmc {

struct GraphsRun {
  std::vector<float> losses, eval_losses, params, grads;
  uint64_t launches = 0;
};

// Steps of two micro-steps (or one with overlapped buckets over `host`), with AdamW after each, and
// an evaluation pass on the first row between steps. Each micro-step's tokens are `inputs` and
// `targets` rotated by its number: a graph that kept the tokens it was captured with fails.
inline GraphsRun run_graph_steps(const GPT2Config& config, CudaBackendOptions options, CudaGraphs graphs,
                                 Communicator* host, const std::vector<float>& params, const std::vector<int>& inputs,
                                 const std::vector<int>& targets, int B, int T, int steps) {
  options.speed.cuda_graphs = graphs;
  options.nccl_host = host;
  options.overlap_gradients = host != nullptr;
  CudaBackend cuda(config, options);
  cuda.set_parameters(params.data());
  GraphsRun run;
  std::vector<float> eval(static_cast<size_t>(T));
  for (int step = 0; step < steps; ++step) {
    cuda.zero_grad();
    if (host) cuda.begin_gradient_sync(*host);
    for (int micro = host ? 1 : 0; micro < 2; ++micro) {
      const size_t shift = size_t(2 * step + micro) % inputs.size();
      std::vector<int> in(inputs), out(targets);
      std::rotate(in.begin(), in.begin() + long(shift), in.end());
      std::rotate(out.begin(), out.begin() + long(shift), out.end());
      cuda.forward_backward(in.data(), out.data(), B, T, host ? 1.0f : 0.5f);
    }
    if (host) cuda.finish_gradient_sync();
    run.losses.push_back(cuda.accumulated_loss());
    OptimizerStep update;
    update.lr = 1e-3f;
    update.t = step + 1;
    update.weight_decay = 0.1f;
    cuda.optimizer_step(update);
    cuda.forward_losses(inputs.data(), targets.data(), 1, T, eval.data());
    run.eval_losses.insert(run.eval_losses.end(), eval.begin(), eval.end());
  }
  run.params.resize(num_parameters(config));
  cuda.get_parameters(run.params.data());
  run.grads.resize(run.params.size());
  cuda.get_gradients(run.grads.data());
  run.launches = cuda.graph_launches();
  return run;
}

template <class Report>
void check_cuda_graphs(Report& report, const GPT2Config& config, const CudaBackendOptions& options,
                       const std::vector<float>& params, const std::vector<int>& inputs,
                       const std::vector<int>& targets, int B, int T) {
  constexpr int kSteps = 2;  // the first captures, the second replays
  SingleProcessCommunicator one;
  for (Communicator* host : {static_cast<Communicator*>(nullptr), static_cast<Communicator*>(&one)}) {
    if (host && !cuda_build_has_nccl()) {
      fmt::print("SKIP  LLMC_CUDA_GRAPHS=on with overlapped NCCL buckets: this build has no NCCL\n");
      continue;
    }
    const std::string what = host ? "with overlapped NCCL buckets (1 rank)" : "(2 micro-steps a step)";
    const GraphsRun off = run_graph_steps(config, options, CudaGraphs::kOff, host, params, inputs, targets, B, T, kSteps);
    const GraphsRun on = run_graph_steps(config, options, CudaGraphs::kOn, host, params, inputs, targets, B, T, kSteps);
    const uint64_t micro_steps = uint64_t(kSteps) * (host ? 1 : 2);
    report.check(fmt::format("LLMC_CUDA_GRAPHS=on {}: {} graph launches of {} micro-steps, off {}", what, on.launches,
                             micro_steps, off.launches),
                 on.launches == micro_steps && off.launches == 0 ? 0.0 : 1.0, 0.5, "wrong");
    if (!cuda_device_emulated()) continue;
    report.exact(fmt::format("LLMC_CUDA_GRAPHS=on {}: step losses = off's", what), on.losses, off.losses);
    report.exact(fmt::format("LLMC_CUDA_GRAPHS=on {}: eval losses = off's", what), on.eval_losses, off.eval_losses);
    report.exact(fmt::format("LLMC_CUDA_GRAPHS=on {}: parameters = off's", what), on.params, off.params);
    report.exact(fmt::format("LLMC_CUDA_GRAPHS=on {}: gradients = off's", what), on.grads, off.grads);
  }
}

}  // namespace llmc
