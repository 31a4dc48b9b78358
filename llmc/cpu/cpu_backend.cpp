#include "llmc/cpu/cpu_backend.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "llmc/cpu/adamw.h"
#include "llmc/cpu/attention.h"
#include "llmc/cpu/classifier.h"
#include "llmc/cpu/encoder.h"
#include "llmc/cpu/gelu.h"
#include "llmc/cpu/layernorm.h"
#include "llmc/cpu/matmul.h"
#include "llmc/cpu/residual.h"
#include "llmc/optim/registry.h"

namespace llmc {

CpuBackend::CpuBackend(const GPT2Config& config, const OptimizerSpec& optimizer)
    : CpuBackend(config, unsharded_partition(num_parameters(config)), optimizer) {}

CpuBackend::CpuBackend(const GPT2Config& config, const OptimizerPartition& partition, const OptimizerSpec& optimizer)
    : config_(config),
      partition_(partition),
      layout_(param_layout(config)),
      optimizer_(find_optimizer(optimizer.name)),
      bucket_sync_(config, partition) {
  if (partition.num_elements() != num_parameters(config))
    throw std::invalid_argument(fmt::format("CPU backend: optimizer partition of {} elements for a model of {}",
                                            partition.num_elements(), num_parameters(config)));
  owned_slices_ = tensor_slices(layout_, partition.owned());
  params_.assign(partition.buffer_size(), 0.0f);
  grads_.assign(partition.buffer_size(), 0.0f);
  state_ = zero_optimizer_state(optimizer_, partition.owned().size());
}

void CpuBackend::set_parameters(const float* params) { std::copy_n(params, partition_.num_elements(), params_.data()); }
void CpuBackend::get_parameters(float* params) { std::copy_n(params_.data(), partition_.num_elements(), params); }

void CpuBackend::set_optimizer_state(const std::vector<OptimizerTensor>& state) {
  check_optimizer_state(optimizer_, state, partition_.owned().size(), "CPU backend");
  state_ = state;
}

size_t CpuBackend::optimizer_state_bytes() const {
  return optimizer_.state_names.size() * partition_.owned().size() * sizeof(float);
}

void CpuBackend::zero_grad() {
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  loss_accumulator_ = 0.0;
}

void CpuBackend::ensure_activations(int B, int T) {
  const size_t bt = size_t(B) * T, att = size_t(B) * config_.num_heads * T * T;
  if (bt <= capacity_bt_ && att <= capacity_att_) return;
  capacity_bt_ = std::max(capacity_bt_, bt);
  capacity_att_ = std::max(capacity_att_, att);
  const size_t L = config_.num_layers, C = config_.channels, H = mlp_width(config_), N = capacity_bt_;
  Activations& a = acts_;
  a.residual.resize((L + 1) * N * C);
  for (auto* v : {&a.ln1, &a.atty, &a.res2, &a.ln2}) v->resize(L * N * C);
  for (auto* v : {&a.ln1_mean, &a.ln1_rstd, &a.ln2_mean, &a.ln2_rstd}) v->resize(L * N);
  a.qkv.resize(L * N * 3 * C);
  a.att.resize(L * capacity_att_);
  a.fch.resize(L * N * H);
  a.fch_gelu.resize(L * N * H);
  a.lnf.resize(N * C);
  a.lnf_mean.resize(N);
  a.lnf_rstd.resize(N);
  a.logits.resize(N * config_.padded_vocab_size);
  a.losses.resize(N);
  a.branch.resize(N * C);
  a.dresidual.resize(N * C);
  a.dbuf_a.resize(N * H);
  a.dbuf_b.resize(N * H);
}

void CpuBackend::forward(const int* inputs, int B, int T) {
  ensure_activations(B, T);
  const int C = config_.channels, H = int(mlp_width(config_)), NH = config_.num_heads, Vp = config_.padded_vocab_size;
  const size_t N = size_t(B) * T, NC = N * C;
  Activations& a = acts_;
  encoder_forward(a.residual.data(), inputs, param(kWte), param(kWpe), B, T, C);
  for (int l = 0; l < config_.num_layers; ++l) {
    const float* x = a.residual.data() + l * NC;
    float* ln1 = a.ln1.data() + l * NC;
    float* qkv = a.qkv.data() + l * N * 3 * C;
    float* atty = a.atty.data() + l * NC;
    float* res2 = a.res2.data() + l * NC;
    float* ln2 = a.ln2.data() + l * NC;
    float* fch = a.fch.data() + l * N * H;
    float* fch_gelu = a.fch_gelu.data() + l * N * H;
    layernorm_forward(ln1, a.ln1_mean.data() + l * N, a.ln1_rstd.data() + l * N, x, param(kLn1w, l),
                      param(kLn1b, l), int(N), C);
    matmul_forward(qkv, ln1, param(kQkvw, l), param(kQkvb, l), int(N), C, 3 * C);
    attention_forward(atty, a.att.data() + l * size_t(B) * NH * T * T, qkv, B, T, C, NH);
    matmul_forward(a.branch.data(), atty, param(kAttprojw, l), param(kAttprojb, l), int(N), C, C);
    residual_forward(res2, x, a.branch.data(), NC);
    layernorm_forward(ln2, a.ln2_mean.data() + l * N, a.ln2_rstd.data() + l * N, res2, param(kLn2w, l),
                      param(kLn2b, l), int(N), C);
    matmul_forward(fch, ln2, param(kFcw, l), param(kFcb, l), int(N), C, H);
    gelu_forward(fch_gelu, fch, N * H);
    matmul_forward(a.branch.data(), fch_gelu, param(kFcprojw, l), param(kFcprojb, l), int(N), H, C);
    residual_forward(a.residual.data() + (l + 1) * NC, res2, a.branch.data(), NC);
  }
  layernorm_forward(a.lnf.data(), a.lnf_mean.data(), a.lnf_rstd.data(),
                    a.residual.data() + config_.num_layers * NC, param(kLnfw), param(kLnfb), int(N), C);
  matmul_forward(a.logits.data(), a.lnf.data(), param(kWte), nullptr, int(N), C, Vp);
}

// Expects acts_.logits to hold the gradient of the loss with respect to the logits.
void CpuBackend::backward(const int* inputs, int B, int T) {
  const int C = config_.channels, H = int(mlp_width(config_)), NH = config_.num_heads, L = config_.num_layers;
  const size_t N = size_t(B) * T, NC = N * C;
  Activations& a = acts_;
  float* dres = a.dresidual.data();
  float* da = a.dbuf_a.data();
  float* db = a.dbuf_b.data();
  matmul_backward(da, grad(kWte), nullptr, a.logits.data(), a.lnf.data(), param(kWte), int(N), C,
                  config_.padded_vocab_size);
  std::fill_n(dres, NC, 0.0f);
  layernorm_backward(dres, grad(kLnfw), grad(kLnfb), da, a.residual.data() + L * NC, param(kLnfw),
                     a.lnf_mean.data(), a.lnf_rstd.data(), int(N), C);
  // dres is the gradient of the residual stream; each block's branches add theirs into it.
  for (int l = L - 1; l >= 0; --l) {
    const float* x = a.residual.data() + l * NC;
    const float* fch = a.fch.data() + l * N * H;
    matmul_backward(da, grad(kFcprojw, l), grad(kFcprojb, l), dres, a.fch_gelu.data() + l * N * H,
                    param(kFcprojw, l), int(N), H, C);
    gelu_backward(da, fch, da, N * H);
    matmul_backward(db, grad(kFcw, l), grad(kFcb, l), da, a.ln2.data() + l * NC, param(kFcw, l), int(N), C, H);
    layernorm_backward(dres, grad(kLn2w, l), grad(kLn2b, l), db, a.res2.data() + l * NC, param(kLn2w, l),
                       a.ln2_mean.data() + l * N, a.ln2_rstd.data() + l * N, int(N), C);
    matmul_backward(da, grad(kAttprojw, l), grad(kAttprojb, l), dres, a.atty.data() + l * NC,
                    param(kAttprojw, l), int(N), C, C);
    attention_backward(db, da, a.qkv.data() + l * N * 3 * C, a.att.data() + l * size_t(B) * NH * T * T, B,
                       T, C, NH);
    matmul_backward(da, grad(kQkvw, l), grad(kQkvb, l), db, a.ln1.data() + l * NC, param(kQkvw, l), int(N),
                    C, 3 * C);
    layernorm_backward(dres, grad(kLn1w, l), grad(kLn1b, l), da, x, param(kLn1w, l),
                       a.ln1_mean.data() + l * N, a.ln1_rstd.data() + l * N, int(N), C);
    // Layer l's gradients (and lnf's) are final: bucket L-1-l (llmc/dist/gradient_buckets.h).
    if (bucket_sync_.active()) bucket_sync_.bucket_ready(L - 1 - l);
  }
  encoder_backward(grad(kWte), grad(kWpe), dres, inputs, B, T, C);
  if (bucket_sync_.active()) bucket_sync_.bucket_ready(L);
}

void CpuBackend::forward_backward(const int* inputs, const int* targets, int B, int T, float loss_scale) {
  check_batch(config_, inputs, targets, B, T);
  forward(inputs, B, T);
  const int N = B * T;
  // d(loss_scale * mean_n loss_n) / d loss_n = loss_scale / N.
  classifier_forward_backward(acts_.losses.data(), acts_.logits.data(), targets, N, config_.vocab_size,
                              config_.padded_vocab_size, loss_scale / float(N));
  loss_accumulator_ += loss_scale * mean_in_order(acts_.losses.data(), size_t(N));
  backward(inputs, B, T);
}

float CpuBackend::accumulated_loss() { return float(loss_accumulator_); }

void CpuBackend::forward_losses(const int* inputs, const int* targets, int B, int T, float* losses) {
  check_batch(config_, inputs, targets, B, T);
  forward(inputs, B, T);
  classifier_forward(losses, acts_.logits.data(), targets, B * T, config_.vocab_size, config_.padded_vocab_size);
}

const float* CpuBackend::forward_logits(const int* inputs, int B, int T) {
  check_batch(config_, inputs, nullptr, B, T);
  forward(inputs, B, T);
  return acts_.logits.data();
}

void CpuBackend::next_token_logits(const int* tokens, int T, float* logits) {
  const float* all = forward_logits(tokens, 1, T);
  std::copy_n(all + size_t(T - 1) * config_.padded_vocab_size, config_.vocab_size, logits);
}

float CpuBackend::grad_sum_of_squares(ElementRange range) {
  if (range.end < range.begin || range.end > partition_.num_elements())
    throw std::invalid_argument(fmt::format("grad_sum_of_squares: range [{}, {}) outside the {} gradients",
                                            range.begin, range.end, partition_.num_elements()));
  // Fixed-size chunks from the range's start summed in chunk order: the result does not depend on
  // the thread count.
  constexpr size_t kChunk = 1 << 16;
  const float* g = grads_.data() + range.begin;
  const size_t n = range.size(), chunks = (n + kChunk - 1) / kChunk;
  partial_sums_.resize(chunks);
  double* partial = partial_sums_.data();
#pragma omp parallel for schedule(static)
  for (size_t c = 0; c < chunks; ++c) {
    double s = 0.0;
    for (size_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) s += double(g[i]) * g[i];
    partial[c] = s;
  }
  double total = 0.0;
  for (double s : partial_sums_) total += s;
  return float(total);
}

void CpuBackend::set_gradient_element(size_t index, float value) {
  if (index >= partition_.num_elements())
    throw std::out_of_range(fmt::format("set_gradient_element: element {} outside the {} gradients", index,
                                        partition_.num_elements()));
  grads_[index] = value;
}

void CpuBackend::optimizer_step(const OptimizerStep& step) {
  state_pointers_.clear();  // keeps its capacity: no allocation after the first step
  for (OptimizerTensor& t : state_) state_pointers_.push_back(t.values.data());
  OptimizerSlice<float> buffers;
  buffers.params = params_.data();
  buffers.grads = grads_.data();
  buffers.state = state_pointers_.data();
  run_optimizer_step(optimizer_.name, layout_, owned_slices_, buffers, step);
}

void CpuBackend::all_reduce_gradients(Communicator& host) { host.all_reduce_sum(grads_.data(), partition_.num_elements()); }

void CpuBackend::reduce_scatter_gradients(Communicator& host) {
  const ElementRange chunk = partition_.collective_chunk(host.world_size(), "reduce_scatter_gradients");
  shard_.resize(chunk.size());
  host.reduce_scatter_sum(grads_.data(), shard_.data(), chunk.size());
  std::copy(shard_.begin(), shard_.end(), grads_.begin() + chunk.begin);
}

void CpuBackend::begin_gradient_sync(Communicator& host) {
  if (partition_.sharded) partition_.collective_chunk(host.world_size(), "begin_gradient_sync");
  bucket_sync_.begin(host, grads_.data());
}

void CpuBackend::finish_gradient_sync() { bucket_sync_.finish(); }

void CpuBackend::all_gather_parameters(Communicator& host) {
  const ElementRange chunk = partition_.collective_chunk(host.world_size(), "all_gather_parameters");
  shard_.assign(params_.begin() + chunk.begin, params_.begin() + chunk.end);
  host.all_gather(shard_.data(), params_.data(), chunk.size());
}

}  // namespace llmc
