// The CPU trainer: the shared training loop (llmc/train_loop.h) driving the fp32 OpenMP backend.
// Flags: ./train_gpt2 --help; semantics: docs/training.md.
#include <memory>

#include "llmc/cpu_backend.h"
#include "llmc/train_loop.h"

int main(int argc, char** argv) {
  return llmc::trainer_main(argc, argv, [](const llmc::GPT2Config& config, const llmc::TrainOptions&) {
    return std::make_unique<llmc::CpuBackend>(config);
  });
}
