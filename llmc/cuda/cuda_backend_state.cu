// CudaBackend (llmc/cuda/cuda_backend_impl.cuh): parameters, optimizer state and the GEMM algorithm
// table (LLMC_GEMM_SEARCH=timed) in and out, the gradient norm, the optimizer step and the ZeRO collectives over NCCL or through host staging,
// blocking or overlapped with the backward pass in buckets.
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "llmc/cuda/adamw.cuh"
#include "llmc/cuda/copy_spans.cuh"
#include "llmc/cuda/cuda_backend_impl.cuh"
#include "llmc/cuda/global_norm.cuh"
#include "llmc/optim/registry.h"

namespace llmc {

void CudaBackend::Impl::ensure_staging() {
  if (staging_dev == nullptr)
    throw std::logic_error("CUDA backend: collectives through host memory, but the memory plan has no staging buffer "
                           "(CudaBackendOptions::world_size and nccl_host must describe the run)");
}

void CudaBackend::Impl::download(std::vector<float>& host, const floatX* device, size_t n) {
  convert(staging_dev, device, n, stream);
  CUDA_CHECK(cudaMemcpyAsync(host.data(), staging_dev, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

// Rounds to nearest: sums of bf16 gradients and the owners' parameters are exact in fp32 or get
// one rounding, as on the NCCL path.
void CudaBackend::Impl::upload(floatX* device, const float* host, size_t n) {
  CUDA_CHECK(cudaMemcpyAsync(staging_dev, host, n * sizeof(float), cudaMemcpyHostToDevice, stream));
  convert(device, staging_dev, n, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

float CudaBackend::Impl::read_scalar(int index) {
  CUDA_CHECK(cudaMemcpyAsync(host_scalar, scalars + index, sizeof(float), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return *host_scalar;
}

void CudaBackend::set_parameters(const float* params) {
  Impl& d = *impl_;
  d.outside_step();
  d.fp8_weights_stale = true;
  d.drop_fp8_weight_amax();
#if defined(ENABLE_FP32)
  CUDA_CHECK(cudaMemcpyAsync(d.params, params, d.num_params * sizeof(float), cudaMemcpyHostToDevice, d.stream));
#else
  // The master copy of the owned range in fp32, and every parameter in bf16 (rounded to nearest).
  // When the master holds the whole model it is the source of the conversion; a ZeRO-1 shard is
  // not, and then the fp32 parameters travel in chunks through the logits buffer, free outside a
  // forward pass (each one writes it first), so that loading needs no memory beyond the plan's.
  CUDA_CHECK(cudaMemcpyAsync(d.master, params + d.owned.begin, d.owned.size() * sizeof(float), cudaMemcpyHostToDevice,
                             d.stream));
  if (d.owned.size() == d.num_params) {
    convert(d.params, d.master, d.num_params, d.stream);
  } else {
    float* chunk = reinterpret_cast<float*>(d.logits);
    const size_t capacity = d.buffers->plan().find(BufferId::kLogits)->bytes() / sizeof(float);
    for (size_t begin = 0; begin < d.num_params; begin += capacity) {
      const size_t count = std::min(capacity, d.num_params - begin);
      CUDA_CHECK(cudaMemcpyAsync(chunk, params + begin, count * sizeof(float), cudaMemcpyHostToDevice, d.stream));
      convert(d.params + begin, chunk, count, d.stream);
    }
  }
#endif
  CUDA_CHECK(cudaStreamSynchronize(d.stream));
}

void CudaBackend::get_parameters(float* params) {
  Impl& d = *impl_;
  d.outside_step();
  if (!d.master) {
    CUDA_CHECK(cudaMemcpyAsync(params, d.params, d.num_params * sizeof(float), cudaMemcpyDeviceToHost, d.stream));
    CUDA_CHECK(cudaStreamSynchronize(d.stream));
    return;
  }
  // Outside the owned range only the bf16 working copy exists here.
  if (d.owned.size() != d.num_params) {
    const std::vector<float> working = floatx_to_host(d.params, d.num_params, d.stream);
    std::copy(working.begin(), working.end(), params);
  }
  CUDA_CHECK(cudaMemcpyAsync(params + d.owned.begin, d.master, d.owned.size() * sizeof(float), cudaMemcpyDeviceToHost,
                             d.stream));
  CUDA_CHECK(cudaStreamSynchronize(d.stream));
}

std::vector<OptimizerTensor> CudaBackend::get_optimizer_state() {
  Impl& d = *impl_;
  d.outside_step();
  std::vector<OptimizerTensor> state = zero_optimizer_state(d.optimizer, d.owned.size());
  for (size_t i = 0; i < state.size(); ++i)
    CUDA_CHECK(cudaMemcpyAsync(state[i].values.data(), d.optimizer_state[i], d.owned.size() * sizeof(float),
                               cudaMemcpyDeviceToHost, d.stream));
  CUDA_CHECK(cudaStreamSynchronize(d.stream));
  return state;
}

void CudaBackend::set_optimizer_state(const std::vector<OptimizerTensor>& state) {
  Impl& d = *impl_;
  d.outside_step();
  check_optimizer_state(d.optimizer, state, d.owned.size(), "CUDA backend");
  for (size_t i = 0; i < state.size(); ++i)
    CUDA_CHECK(cudaMemcpyAsync(d.optimizer_state[i], state[i].values.data(), d.owned.size() * sizeof(float),
                               cudaMemcpyHostToDevice, d.stream));
  CUDA_CHECK(cudaStreamSynchronize(d.stream));
}

float CudaBackend::grad_sum_of_squares(ElementRange range) {
  Impl& d = *impl_;
  if (range.end < range.begin || range.end > d.num_params || range.begin % 8 != 0)
    throw std::runtime_error(fmt::format("CUDA backend: gradient range [{}, {}) is not an 8-aligned part of the {} "
                                         "gradients", range.begin, range.end, d.num_params));
  global_norm_squared(d.scalars + Impl::kNormSquared, d.scalars + kScalarSlots, d.grads + range.begin, range.size(),
                      d.stream);
  return d.read_scalar(Impl::kNormSquared);
}

void CudaBackend::set_gradient_element(size_t index, float value) {
  Impl& d = *impl_;
  if (index >= d.num_params)
    throw std::out_of_range(fmt::format("CUDA backend: gradient element {} outside the {} gradients", index,
                                        d.num_params));
#if defined(ENABLE_FP32)
  const float bits = value;
#else
  const uint16_t bits = float_to_bf16(value);
#endif
  CUDA_CHECK(cudaMemcpyAsync(d.grads + index, &bits, sizeof bits, cudaMemcpyHostToDevice, d.stream));
  CUDA_CHECK(cudaStreamSynchronize(d.stream));
}

void CudaBackend::optimizer_step(const OptimizerStep& step) {
  Impl& d = *impl_;
  d.fp8_weights_stale = true;
  d.drop_fp8_weight_amax();  // of weights this step changes (two steps with no forward pass between)
  OptimizerSlice<floatX> buffers;
  buffers.params = d.params;
  buffers.master = d.master;
  buffers.grads = d.grads;
  buffers.state = d.optimizer_state.data();
  // One launch for every tensor part the rank owns, recording the FP8 weights' amaxes where it can.
  const bool record_amax = !d.fp8_adamw_sinks.empty();
  run_optimizer_step(d.optimizer.name, d.layout, d.owned_slices, buffers, step, d.stream,
                     record_amax ? d.fp8_adamw_sinks.data() : nullptr);
  d.fp8_weight_amax_recorded = record_amax;
}

void CudaBackend::all_reduce_gradients(Communicator& host) {
  Impl& d = *impl_;
#if defined(LLMC_NCCL_LIBRARY)
  if (d.nccl) {
    d.nccl->all_reduce_sum(d.grads, d.num_params, nccl_floatx());
    return;
  }
#endif
  if (host.world_size() == 1) return;
  d.ensure_staging();
  d.download(d.staging_host, d.grads, d.num_params);
  host.all_reduce_sum(d.staging_host.data(), d.num_params);
  d.upload(d.grads, d.staging_host.data(), d.num_params);
}

void CudaBackend::reduce_scatter_gradients(Communicator& host) {
  Impl& d = *impl_;
  const ZeroLayout& layout = d.partition.layout;
  const ElementRange chunk = d.partition.collective_chunk(host.world_size(), "reduce_scatter_gradients");
#if defined(LLMC_NCCL_LIBRARY)
  if (d.nccl) {
    // In place: NCCL leaves this rank's summed chunk at its own position.
    d.nccl->reduce_scatter_sum(d.grads, d.grads + chunk.begin, layout.shard_size, nccl_floatx());
    return;
  }
#endif
  d.ensure_staging();
  d.download(d.staging_host, d.grads, d.buffer_size);
  d.staging_shard.resize(layout.shard_size);
  host.reduce_scatter_sum(d.staging_host.data(), d.staging_shard.data(), layout.shard_size);
  d.upload(d.grads + chunk.begin, d.staging_shard.data(), layout.shard_size);
}

void CudaBackend::all_gather_parameters(Communicator& host) {
  Impl& d = *impl_;
  d.fp8_weights_stale = true;
  const ZeroLayout& layout = d.partition.layout;
  const ElementRange chunk = d.partition.collective_chunk(host.world_size(), "all_gather_parameters");
#if defined(LLMC_NCCL_LIBRARY)
  if (d.nccl) {
    d.nccl->all_gather(d.params + chunk.begin, d.params, layout.shard_size, nccl_floatx());
    return;
  }
#endif
  d.ensure_staging();
  d.staging_shard.resize(layout.shard_size);
  d.download(d.staging_shard, d.params + chunk.begin, layout.shard_size);
  host.all_gather(d.staging_shard.data(), d.staging_host.data(), layout.shard_size);
  d.upload(d.params, d.staging_host.data(), d.buffer_size);
}

// The span table goes into its planned buffer once; the plan sized it and the staging from the
// same transfers (llmc/cuda/memory_plan.cpp), which the check below holds it to.
void CudaBackend::Impl::setup_bucket_sync() {
  transfers = plan_bucket_transfers(cfg, partition);
  std::vector<CopySpan> table;
  auto append = [&](const std::vector<CopySpan>& spans, int& begin, int& count, size_t& largest) {
    begin = int(table.size());
    count = int(spans.size());
    for (const CopySpan& s : spans) largest = std::max(largest, s.count);
    table.insert(table.end(), spans.begin(), spans.end());
  };
  for (const BucketTransfer& t : transfers) {
    BucketSpans s;
    append(t.pack, s.pack_begin, s.num_pack, s.largest_pack);
    append(t.unpack, s.unpack_begin, s.num_unpack, s.largest_unpack);
    bucket_spans.push_back(s);
  }
  const size_t staging = largest_staging(transfers);
  const MemoryPlan& plan = buffers->plan();
  if (plan.find(BufferId::kBucketSpans)->elements != table.size() ||
      plan.find(BufferId::kBucketStaging)->elements != staging)
    throw std::logic_error(fmt::format("CUDA backend: {} bucket spans and {} staging elements, planned {} and {}",
                                       table.size(), staging, plan.find(BufferId::kBucketSpans)->elements,
                                       plan.find(BufferId::kBucketStaging)->elements));
  // On the compute stream, which every bucket's copies wait for: a plain cudaMemcpy would go to the
  // legacy default stream, which the non-blocking streams here do not wait for.
  CUDA_CHECK(cudaMemcpyAsync(bucket_span_table, table.data(), table.size() * sizeof(CopySpan), cudaMemcpyHostToDevice,
                             stream));
  CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&bucket_event, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&comm_done, cudaEventDisableTiming));
}

#if defined(LLMC_NCCL_LIBRARY)
// Packs the messages of several spans into the staging, sums every message (in place on the
// gradients when it is one span) in one NCCL group, and unpacks what this rank received.
void CudaBackend::Impl::start_bucket(int bucket) {
  bucket_order.ready(bucket);
  const BucketTransfer& t = transfers[size_t(bucket)];
  const BucketSpans& s = bucket_spans[size_t(bucket)];
  CUDA_CHECK(cudaEventRecord(bucket_event, stream));
  CUDA_CHECK(cudaStreamWaitEvent(comm_stream, bucket_event, 0));
  copy_spans(grads, bucket_staging, bucket_span_table + s.pack_begin, s.num_pack, s.largest_pack, true, comm_stream);
  nccl->group_start();
  for (const BucketMessage& m : t.messages) {
    floatX* buf = m.buffer(grads, bucket_staging);
    if (m.root < 0)
      nccl->all_reduce_sum(buf, m.count, nccl_floatx(), comm_stream);
    else
      nccl->reduce_sum(buf, m.count, nccl_floatx(), m.root, comm_stream);
  }
  nccl->group_end();
  copy_spans(grads, bucket_staging, bucket_span_table + s.unpack_begin, s.num_unpack, s.largest_unpack, false, comm_stream);
}
#endif

void CudaBackend::begin_gradient_sync(Communicator& host) {
  Impl& d = *impl_;
  if (d.partition.sharded) d.partition.collective_chunk(host.world_size(), "begin_gradient_sync");
  d.bucket_order.begin(host);
}

void CudaBackend::finish_gradient_sync() {
  Impl& d = *impl_;
  const bool overlapped = d.overlapping();
  // Without comm_stream no bucket was planned (transfers is empty) or sent: the sums run now.
  Communicator& host = d.bucket_order.finish(d.transfers.size());
  if (!overlapped) {
    if (d.partition.sharded)
      reduce_scatter_gradients(host);
    else
      all_reduce_gradients(host);
    return;
  }
  // The compute stream (the norm, AdamW, the next step) waits for the last bucket's unpack.
  CUDA_CHECK(cudaEventRecord(d.comm_done, d.comm_stream));
  CUDA_CHECK(cudaStreamWaitEvent(d.stream, d.comm_done, 0));
}

void CudaBackend::get_gradients(float* grads) {
  Impl& d = *impl_;
  d.outside_step();
  const std::vector<float> g = floatx_to_host(d.grads, d.num_params, d.stream);
  std::copy(g.begin(), g.end(), grads);
}

bool CudaBackend::tunes_kernels() const { return impl_->opt.speed.gemm_search == GemmSearch::kTimed; }

// The tuning pass (why a whole micro-step, and why only there: llmc/cuda/gemm_search.cuh): one
// forward and backward pass in which every GEMM shape is timed the first time it is met; then the
// gradients and the loss it accumulated are dropped. Parameters, optimizer state and the FP8 scaling
// state are only read (with --fp8 1 its FP8 GEMMs are timed even before the first micro-step has
// calibrated the scales: their values do not matter here).
// It is no training step: LLMC_PROFILE neither times nor counts it.
void CudaBackend::tune_kernels(const int* inputs, const int* targets, int B, int T) {
  Impl& d = *impl_;
  if (!tunes_kernels()) return Backend::tune_kernels(inputs, targets, B, T);
  d.outside_step();
  d.blas->begin_search();
  d.graphs.clear();  // they hold the algorithms chosen before
  d.tuning = true;
  try {
    d.clear_gradients();
    forward_backward(inputs, targets, B, T, 1.0f);
  } catch (...) {
    d.blas->end_search();
    d.tuning = false;
    throw;
  }
  d.blas->end_search();
  d.tuning = false;
  d.clear_gradients();
  CUDA_CHECK(cudaStreamSynchronize(d.stream));
}

std::vector<uint8_t> CudaBackend::kernel_choices() {
  const GemmTable& table = impl_->blas->searched();
  if (!tunes_kernels() || table.algos.empty()) return {};
  return gemm_table_bytes(table);
}

std::string CudaBackend::set_kernel_choices(const std::vector<uint8_t>& choices) {
  if (!tunes_kernels()) return Backend::set_kernel_choices(choices);
  const GemmTable table = gemm_table_from_bytes(choices, "the GEMM algorithm table");
  impl_->blas->load(table);
  impl_->graphs.clear();  // they hold the algorithms chosen before
  return fmt::format("the cuBLASLt algorithms of {} GEMM shapes", table.algos.size());
}

}  // namespace llmc
