// The Trainer behind trainer_main (llmc/train/trainer_main.h): the shared loop of both trainers.
// Implemented by trainer.cpp (set-up, building the backend, the loop, the step and the evaluations)
// and checkpointing.cpp (save and resume); the evaluations' free functions are in evaluation.h.
#pragma once
#include <cstdint>
#include <fmt/format.h>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "llmc/backend.h"
#include "llmc/data/dataloader.h"
#include "llmc/dist/communicator.h"
#include "llmc/dist/zero_sharding.h"
#include "llmc/gpt2.h"
#include "llmc/io/checkpoint_state.h"
#include "llmc/io/model_file.h"
#include "llmc/rng.h"
#include "llmc/train/evaluation.h"
#include "llmc/train/lr_schedule.h"
#include "llmc/train/options.h"
#include "llmc/train/outlier_detector.h"
#include "llmc/train/run_log.h"
#include "llmc/train/trainer_main.h"
#include "llmc/train/watchdog.h"

namespace llmc {

// Runs f; any error it throws comes back prefixed with the flag whose value caused it (a
// FlagError already names its flag and passes unchanged).
template <class F>
auto blame(const char* flag, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const FlagError&) {
    throw;
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("{}: {}", flag, e.what()));
  }
}

class Trainer {
 public:
  // host: the ranks' communicator (SingleProcessCommunicator for one process; trainer_main gives a
  // WatchedCommunicator), process: this rank's place, watchdog: told the loop's phase and step and
  // every backend call (--step-timeout); all must outlive the trainer. Every rank constructs its
  // Trainer and calls run() with the same options. Checks everything that needs the model, the
  // data or the output dir, and resumes when -y is set.
  Trainer(const TrainOptions& options, ModelFile model, Communicator& host, const ProcessLayout& process,
          Watchdog& watchdog);
  // Builds this rank's backend for the trainer's model and optimizer partition, then trains.
  void run(const BackendFactory& make_backend);

 private:
  struct StepResult {
    float loss = 0.0f, norm = 0.0f, lr = 0.0f;
    bool finite = true;    // loss and norm both finite
    bool skipped = false;  // an outlier, or not finite, with -sl/-sg on: no update
  };
  StepResult train_step(Backend& backend, int step);
  // -sl or -sg: outlier skipping on (a step whose loss or norm is not finite is skipped too).
  bool skips_outliers() const { return o_.skip_loss_z > 0 || o_.skip_norm_z > 0; }
  void evaluate(Backend& backend, int step);
  void print_summary(const Backend& backend) const;

  void resume_from_checkpoint();
  // Fills params_ and resumed_state_ (this rank's owned range) and returns rank 0's state of checkpoint
  // `step`; throws std::runtime_error naming the file that does not verify or does not fit.
  TrainState load_checkpoint(int step);
  // The whole model's fp32 parameters (gathered from the owners under ZeRO-1).
  std::vector<float> gather_parameters(Backend& backend);
  void save_checkpoint(Backend& backend, int step);

  // Prints only on rank 0: the other ranks run the same loop silently.
  template <class... Args>
  void say(fmt::format_string<Args...> format, Args&&... args) const {
    if (lead_) fmt::print(format, std::forward<Args>(args)...);
  }

  void train(Backend& backend);
  // Before the first step, for a backend that chooses its kernels by timing (Backend::tune_kernels):
  // the resumed checkpoint's choices, or rank 0's, timed now on the next batch (the loader is put
  // back), on every rank.
  void choose_kernels(Backend& backend);

  const TrainOptions& o_;
  GPT2Config config_;
  Communicator& host_;
  ProcessLayout process_;
  Watchdog& watchdog_;
  int rank_ = 0;
  int world_size_ = 1;
  bool lead_ = true;  // rank 0: writes main.log, the model file and the DONE marker, prints, samples
  bool zero1_ = false;
  bool overlap_ = false;  // --overlap with several ranks: gradient sums during the last backward pass
  OptimizerPartition partition_;
  std::vector<float> params_;  // the initial parameters, handed to the backend by train()
  std::vector<OptimizerTensor> resumed_state_;  // the optimizer's, of the owned range
  std::vector<uint8_t> resumed_kernel_choices_;  // the checkpoint's Backend::kernel_choices (empty: none)
  std::vector<uint8_t> resumed_scaling_state_;   // this rank's Backend::scaling_state from the checkpoint
  int accum_ = 1;
  int64_t step_tokens_ = 0;
  int max_steps_ = 0;
  int start_step_ = 0;
  int resumed_step_ = -1;
  std::unique_ptr<DataLoader> train_;
  std::unique_ptr<DataLoader> val_;
  int64_t val_batches_ = 0;
  LrSchedule schedule_;
  std::unique_ptr<RunLog> log_;
  Rng sample_rng_;
  OutlierDetector loss_outliers_, norm_outliers_;
  HellaswagShare hellaswag_;
  std::vector<int> inputs_, targets_;
};

}  // namespace llmc
