// The CUDA trainer: the shared training loop (llmc/train_loop.h) driving the GPU backend on one
// GPU. Flags: ./train_gpt2cu --help; semantics: docs/training.md; backend: docs/cuda-trainer.md.
// LLMC_ATTENTION=fallback selects the plain attention kernels instead of cuDNN's (bf16 build).
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "llmc/cuda_backend.h"
#include "llmc/train_loop.h"

int main(int argc, char** argv) {
  return llmc::trainer_main(argc, argv, [](const llmc::GPT2Config& config, const llmc::TrainOptions& o) {
    llmc::CudaBackendOptions options;
    options.max_batch = o.batch_size;
    options.max_seq_len = o.seq_len;
    options.recompute = o.recompute;
    options.attention = llmc::default_attention_kind();
    options.seed = static_cast<unsigned>(o.seed);
    auto backend = std::make_unique<llmc::CudaBackend>(config, options);
    fmt::print("cuda: {} | precision {} | attention {} | recompute {} | {:.1f} MiB allocated\n",
               llmc::cuda_device_description(), llmc::cuda_precision_name(),
               llmc::attention_kind_name(options.attention), options.recompute,
               double(backend->device_bytes()) / (1024.0 * 1024.0));
    std::fflush(stdout);
    return backend;
  });
}
