// The CPU trainer: the shared training loop (llmc/train/trainer.h, entered through trainer_main.h)
// driving the fp32 OpenMP backend, as one process or as one of several ranks under mpirun/srun (MPI
// between the ranks, ZeRO -z 0/1).
// Flags: ./train_gpt2 --help; semantics: docs/training.md; ranks: docs/multi-gpu.md.
#include <memory>

#include "llmc/cpu/cpu_backend.h"
#include "llmc/train/trainer_main.h"

int main(int argc, char** argv) {
  return llmc::trainer_main(argc, argv,
                            [](const llmc::GPT2Config& config, const llmc::TrainOptions& o,
                               const llmc::BackendPlacement& placement) {
                              return std::make_unique<llmc::CpuBackend>(config, placement.partition,
                                                                        llmc::find_optimizer(o.optimizer));
                            });
}
