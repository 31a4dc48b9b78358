// The Trainer's set-up, building the backend, the loop and one optimizer step (ZeRO 0/1).
// Checkpoints are in checkpointing.cpp, the evaluations in evaluation.cpp.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <optional>
#include <stdexcept>

#include "llmc/data/shard.h"
#include "llmc/dist/gradient_buckets.h"
#include "llmc/io/checkpoint_files.h"
#include "llmc/mfu.h"
#include "llmc/test_hooks.h"
#include "llmc/train/stop_signals.h"
#include "llmc/train/trainer.h"
#include "llmc/train/watched_backend.h"

namespace llmc {

namespace fs = std::filesystem;

namespace {

// Distinguishes the sampling stream from the other users of --seed.
constexpr uint64_t kSampleSeedTag = 0x53414D504C453031ull;

}  // namespace

Trainer::Trainer(const TrainOptions& o, ModelFile model, Communicator& host, const ProcessLayout& process,
                 Watchdog& watchdog)
    : o_(o),
      config_(model.config),
      host_(host),
      process_(process),
      watchdog_(watchdog),
      rank_(host.rank()),
      world_size_(host.world_size()),
      lead_(host.rank() == 0),
      zero1_(o.zero_stage == 1),
      overlap_(o.overlap && host.world_size() > 1),
      params_(std::move(model.params)),
      sample_rng_(o.seed ^ kSampleSeedTag) {
  check_options_for_model(o, config_);
  const size_t n = num_parameters(config_);
  partition_ = optimizer_partition(n, o.zero_stage, world_size_, rank_);
  const int B = o.batch_size, T = o.seq_len;
  const int64_t micro_tokens = int64_t(B) * T * world_size_;
  step_tokens_ = o.total_batch_tokens == -1 ? micro_tokens : o.total_batch_tokens;
  if (step_tokens_ % micro_tokens != 0)
    throw FlagError(fmt::format("-d: total batch of {} tokens is not divisible by B*T*ranks = {}*{}*{} = {}",
                                step_tokens_, B, T, world_size_, micro_tokens));
  accum_ = int(step_tokens_ / micro_tokens);

  DataLoaderConfig dc;
  dc.batch_size = B;
  dc.seq_len = T;
  dc.rank = rank_;
  dc.world_size = world_size_;
  dc.vocab_size = config_.vocab_size;
  dc.seed = o.seed;
  dc.shuffle = o.shuffle;
  dc.overfit_single_batch = o.overfit_single_batch;
  train_ = blame("-i", [&] { return std::make_unique<DataLoader>(expand_glob(o.train_glob), dc); });
  if (o.max_steps == -1) {
    max_steps_ = int(std::min<int64_t>(train_->steps_per_epoch() / accum_, INT32_MAX));
    if (max_steps_ == 0)
      throw FlagError(fmt::format("-i: one epoch of the train data holds {} micro-batches per rank, fewer than the {} "
                                  "of one step (-d {})", train_->steps_per_epoch(), accum_, step_tokens_));
  } else {
    max_steps_ = o.max_steps;
  }
  if (o.val_every > 0) {
    // Validation reads the batches of a single rank's order, split across the ranks by
    // validation_loss: the same -m batches, so the same val loss, for any number of ranks.
    dc.rank = 0;
    dc.world_size = 1;
    dc.shuffle = false;
    dc.overfit_single_batch = false;
    val_ = blame("-j", [&] { return std::make_unique<DataLoader>(expand_glob(o.val_glob), dc); });
    val_batches_ = o.val_max_steps == -1 ? val_->steps_per_epoch()
                                         : std::min<int64_t>(o.val_max_steps, val_->steps_per_epoch());
  }
  schedule_.kind = lr_schedule_kind_from_name(o.lr_schedule);
  schedule_.lr = o.learning_rate;
  schedule_.warmup_steps = o.warmup_steps;
  schedule_.max_steps = max_steps_;
  schedule_.final_frac = o.final_lr_frac;

  if (!o.output_dir.empty()) {
    std::error_code ec;
    fs::create_directories(o.output_dir, ec);
    if (ec || !fs::is_directory(o.output_dir))
      throw FlagError(fmt::format("-o: cannot create the output dir '{}': {}", o.output_dir,
                                  ec ? ec.message() : "exists and is not a directory"));
    if (lead_) {
      const int stale = remove_stale_temporaries(o.output_dir);
      if (stale > 0) fmt::print("output dir: removed {} unfinished .tmp file(s) of an interrupted run\n", stale);
    }
  }
  if (o.hellaswag)
    hellaswag_ = blame("--hellaswag-file", [&] {
      return load_hellaswag_share(o.hellaswag_file, config_.vocab_size, o.seq_len, rank_, world_size_);
    });
  if (o.resume) resume_from_checkpoint();
  if (!o.output_dir.empty() && lead_)
    log_ = blame("-o", [&] { return std::make_unique<RunLog>(o.output_dir, resumed_step_); });
  inputs_.resize(size_t(B) * T);
  targets_.resize(size_t(B) * T);
}

void Trainer::print_summary(const Backend& backend) const {
  if (!lead_) return;
  fmt::print("model: {} ({})\n", describe_shape(config_), o_.model);
  fmt::print("parameters: {}\n", num_parameters(config_));
  fmt::print("batch: B={} T={} ranks={} accumulation={} -> {} tokens per step\n", o_.batch_size, o_.seq_len,
             world_size_, accum_, step_tokens_);
  fmt::print("train data: {} shard(s), {} tokens, {} steps per epoch{}\n", train_->files().size(),
             train_->num_tokens(), train_->steps_per_epoch() / accum_, o_.shuffle ? ", shuffled" : ", sequential");
  if (val_)
    fmt::print("val data: {} shard(s), {} tokens, {} batches per evaluation{}\n", val_->files().size(),
               val_->num_tokens(), val_batches_, world_size_ > 1 ? " (split across the ranks)" : "");
  fmt::print("schedule: {} lr={:g} warmup={} final fraction={:g} weight decay={:g}\n", o_.lr_schedule,
             o_.learning_rate, o_.warmup_steps, o_.final_lr_frac, o_.weight_decay);
  if (hellaswag_.total > 0)
    fmt::print("hellaswag: {} examples from {}\n", hellaswag_.total, o_.hellaswag_file);
  // Rank 0 always owns a non-empty range; the unsharded figure scales its bytes per element.
  const double mib = 1024.0 * 1024.0, bytes = double(backend.optimizer_state_bytes());
  const double whole = bytes / double(std::max<size_t>(partition_.owned().size(), 1)) * double(num_parameters(config_));
  if (zero1_)
    fmt::print("optimizer state: {:.1f} MiB per rank (ZeRO-1 over {} rank{}; {:.1f} MiB unsharded)\n", bytes / mib,
               world_size_, world_size_ == 1 ? "" : "s", whole / mib);
  else
    fmt::print("optimizer state: {:.1f} MiB per rank (ZeRO stage 0: every rank holds all of it)\n", bytes / mib);
  if (world_size_ > 1)
    fmt::print("gradient sums: {}\n", overlap_ ? fmt::format("{} buckets, sent while the backward pass runs (--overlap 1)",
                                                             gradient_buckets(config_).size())
                                               : std::string("after the backward pass (--overlap 0)"));
  if (zero1_ && world_size_ == 1)
    fmt::print("note: -z 1 with one rank has no optimizer state to shard: it runs exactly as -z 0\n");
  if (skips_outliers())
    fmt::print("outlier skipping: loss z > {:g}, grad norm z > {:g} (0 = off), over the last {} accepted steps\n",
               o_.skip_loss_z, o_.skip_norm_z, OutlierDetector::kWindow);
  fmt::print("steps: {} (from step {})\n", max_steps_, start_step_);
  std::fflush(stdout);
}

void Trainer::evaluate(Backend& backend, int step) {
  watchdog_.enter("evaluation", step);
  if (val_) {
    const float val_loss = validation_loss(backend, *val_, val_batches_, o_.batch_size, o_.seq_len, host_);
    say("step {} | val loss {:.6f}\n", step, val_loss);
    if (log_) log_->val(step, val_loss);
  }
  if (hellaswag_.total > 0) {
    const EvalAccuracy result = evaluate_multiple_choice_on_ranks(backend, hellaswag_, o_.batch_size, o_.seq_len, host_);
    say("step {} | hellaswag {}/{} = {:.6f}\n", step, result.correct, result.total, result.accuracy());
    if (log_) log_->eval(step, float(result.accuracy()));
  }
}

Trainer::StepResult Trainer::train_step(Backend& backend, int step) {
  // Each rank's micro-batches carry 1/(accum*W) of the step: the sum over the ranks is the mean.
  const float loss_scale = 1.0f / float(accum_ * world_size_);
  backend.zero_grad();
  for (int micro = 0; micro < accum_; ++micro) {
    train_->next_batch(inputs_.data(), targets_.data());
    // Only the last micro-batch's backward pass makes gradients final, so only it can send them.
    if (overlap_ && micro == accum_ - 1) backend.begin_gradient_sync(host_);
    backend.forward_backward(inputs_.data(), targets_.data(), o_.batch_size, o_.seq_len, loss_scale);
  }
  StepResult r;
  r.loss = float(host_.all_reduce_sum(double(backend.accumulated_loss())));
  if (overlap_)
    backend.finish_gradient_sync();
  else if (zero1_)
    backend.reduce_scatter_gradients(host_);
  else
    backend.all_reduce_gradients(host_);
  if (const std::optional<float> poison = test_hook_poisoned_gradient(step))
    backend.set_gradient_element(partition_.owned().begin, *poison);
  if (zero1_)
    r.norm = std::sqrt(float(host_.all_reduce_sum(double(backend.grad_sum_of_squares(partition_.owned())))));
  else
    r.norm = std::sqrt(backend.grad_sum_of_squares());
  // Every rank holds the same loss and norm, so every rank stops here, or skips, alike. A loss or
  // norm that is not finite (an overflow, a bad batch) never updates: with outlier skipping on it is
  // skipped like a spike, without it the run stops before anything of this state is checkpointed.
  r.finite = std::isfinite(r.loss) && std::isfinite(r.norm);
  if (!r.finite && !skips_outliers())
    throw std::runtime_error(fmt::format("step {}: train loss {} / gradient norm {} is not finite (-l {:g} too high?); "
                                         "stopped without updating or checkpointing this state (-sl or -sg would "
                                         "skip such a step)",
                                         step, r.loss, r.norm, o_.learning_rate));
  r.lr = schedule_.at(step);
  // A spike's update is skipped (its batch is consumed, the schedule moves on) and the spike is
  // kept out of the windows, so one bad batch neither moves the weights nor widens the window.
  r.skipped = !r.finite || loss_outliers_.is_outlier(r.loss, o_.skip_loss_z) ||
              norm_outliers_.is_outlier(r.norm, o_.skip_norm_z);
  if (!r.skipped) {
    OptimizerStep update;
    update.lr = r.lr;
    update.t = step + 1;
    update.grad_scale = r.norm > 1.0f ? 1.0f / r.norm : 1.0f;
    update.weight_decay = o_.weight_decay;
    backend.optimizer_step(update);
    if (zero1_) backend.all_gather_parameters(host_);
    loss_outliers_.push(r.loss);
    norm_outliers_.push(r.norm);
  }
  return r;
}

void Trainer::run(const BackendFactory& make_backend) {
  BackendPlacement placement;
  placement.process = process_;
  placement.partition = partition_;
  placement.host = &host_;
  placement.overlap_gradients = overlap_;
  watchdog_.enter("building the backend", start_step_);
  const std::unique_ptr<Backend> backend = make_backend(config_, o_, placement);
  WatchedBackend watched(*backend, watchdog_);
  train(watched);
}

void Trainer::choose_kernels(Backend& backend) {
  const bool tunes = backend.tunes_kernels();
  const double tuning_ranks = host_.all_reduce_sum(tunes ? 1.0 : 0.0);
  if (tuning_ranks != 0.0 && tuning_ranks != double(world_size_))
    throw std::runtime_error(fmt::format("{} of {} ranks choose their kernels by timing: every rank must run the same "
                                         "kernels (set LLMC_GEMM_SEARCH alike on every rank)",
                                         tuning_ranks, world_size_));
  if (!tunes) return;
  watchdog_.enter("choosing kernels", start_step_);
  if (!resumed_kernel_choices_.empty()) {
    const std::string what = blame("-y", [&] { return backend.set_kernel_choices(resumed_kernel_choices_); });
    say("kernel choices: loaded {} from checkpoint step {} instead of timing them\n", what, resumed_step_);
    resumed_kernel_choices_ = {};
    return;
  }
  if (resumed_step_ >= 0)
    say("kernel choices: checkpoint step {} holds none (written without them): timing them now\n", resumed_step_);
  std::vector<uint8_t> choices;
  double seconds = 0.0;
  if (lead_) {
    const DataLoaderPosition position = train_->position();
    train_->next_batch(inputs_.data(), targets_.data());
    train_->restore(position);
    const auto start = std::chrono::steady_clock::now();
    backend.tune_kernels(inputs_.data(), targets_.data(), o_.batch_size, o_.seq_len);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    choices = backend.kernel_choices();
  }
  uint64_t bytes = choices.size();
  host_.broadcast(&bytes, sizeof bytes, 0);
  choices.resize(bytes);
  host_.broadcast(choices.data(), bytes, 0);
  const std::string what = backend.set_kernel_choices(choices);
  // The seconds are the start-up cost of LLMC_GEMM_SEARCH=timed (the README quotes it).
  say("kernel choices: rank 0 timed {} in {:.1f} s{}\n", what, seconds, world_size_ > 1 ? ", every rank runs them" : "");
}

void Trainer::train(Backend& backend) {
  backend.set_parameters(params_.data());
  if (resumed_step_ >= 0) {
    backend.set_optimizer_state(resumed_state_);
    if (resumed_scaling_state_.empty() && !backend.scaling_state().empty())
      say("resume: checkpoint step {} holds no FP8 scaling state (written without --fp8 1): the scales calibrate "
          "afresh\n", resumed_step_);
    blame("-y", [&] { backend.set_scaling_state(resumed_scaling_state_); });
  }
  resumed_scaling_state_ = {};
  params_ = {};
  resumed_state_ = {};
  choose_kernels(backend);
  print_summary(backend);
  const StopSignals signals;

  double train_seconds = 0.0;
  int timed_steps = 0;
  const double flops_per_token = model_flops_per_token(config_, o_.seq_len), peak_flops = backend.peak_flops();
  for (int step = start_step_;; ++step) {
    watchdog_.enter("step", step);
    const bool last = step == max_steps_;
    // Every rank stops at the same step: a signal that reached any rank stops them all.
    const int stop = int(host_.all_reduce_max(double(signals.received())));
    if (stop != 0) {
      // Stopping between steps: the state is exactly that of a checkpoint at this step.
      const char* name = stop == SIGINT ? "SIGINT" : "SIGTERM";
      if (o_.output_dir.empty()) {
        say("stopped by {} before step {} (no -o: no checkpoint)\n", name, step);
      } else {
        if (step != resumed_step_) save_checkpoint(backend, step);
        say("stopped by {} before step {}: resume with -y 1 -o {}\n", name, step, o_.output_dir);
      }
      std::fflush(stdout);
      return;
    }
    if ((o_.val_every > 0 && step % o_.val_every == 0) || last) evaluate(backend, step);
    // Before sampling, so that a run resumed here draws the same sample as the original run.
    if (o_.checkpoint_every > 0 && step > 0 && (step % o_.checkpoint_every == 0 || last) && step != resumed_step_)
      save_checkpoint(backend, step);
    // Only rank 0 samples; sampling involves no collective, so the others simply go on.
    if (lead_ && o_.sample_every > 0 && ((step > 0 && step % o_.sample_every == 0) || last)) {
      watchdog_.enter("sampling", step);
      print_sample(backend, config_.vocab_size, o_, sample_rng_, step);
    }
    if (last) break;

    watchdog_.enter("step", step);
    test_hook_stall_at_step(step);
    const auto start = std::chrono::steady_clock::now();
    const StepResult r = train_step(backend, step);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    train_seconds += seconds;
    ++timed_steps;
    if (!lead_) continue;
    const double eta = train_seconds / timed_steps * (max_steps_ - step - 1);
    const double tokens_per_second = double(step_tokens_) / seconds;
    // Per device: each rank's share of the step's tokens against its own GPU's peak.
    std::optional<double> mfu;
    if (peak_flops > 0) mfu = mfu_percent(flops_per_token, tokens_per_second / world_size_, peak_flops);
    std::string line =
        format_step_line(step, max_steps_, r.loss, r.norm, r.lr, seconds * 1e3, tokens_per_second, eta, mfu);
    if (r.skipped && !r.finite)
      line += fmt::format(" | skipped: not finite (-sl {:g}, -sg {:g})", o_.skip_loss_z, o_.skip_norm_z);
    else if (r.skipped)
      line += fmt::format(" | skipped: loss z {:.2f} (-sl {:g}), norm z {:.2f} (-sg {:g})",
                          loss_outliers_.z_score(r.loss), o_.skip_loss_z, norm_outliers_.z_score(r.norm),
                          o_.skip_norm_z);
    fmt::print("{}\n", line);
    std::fflush(stdout);
    if (log_) log_->train(step, r.loss, r.lr, r.norm, r.skipped, mfu);
  }
  say("done: {} steps in {}\n", timed_steps, format_duration(train_seconds));
}

}  // namespace llmc
