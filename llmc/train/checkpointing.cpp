// The Trainer's checkpoints: saving (every rank's state file, rank 0's model file, the DONE
// marker last, then retention) and resuming from the newest checkpoint that verifies on every
// rank, re-sharding the optimizer state to this run's partition. Formats: docs/training.md.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <stdexcept>

#include "llmc/dist/resharding.h"
#include "llmc/io/checkpoint_files.h"
#include "llmc/io/model_file.h"
#include "llmc/train/trainer.h"

namespace llmc {

TrainState Trainer::load_checkpoint(int step) {
  const std::string& dir = o_.output_dir;
  const size_t n = num_parameters(config_);
  const std::string model_file = checkpoint_model_path(dir, step), head_file = checkpoint_state_path(dir, step, 0);
  const OptimizerSpec& optimizer = find_optimizer(o_.optimizer);
  const std::vector<std::string>& state_names = optimizer.state_names;
  TrainState head = read_train_state(head_file, state_names);
  if (head.step != step) throw std::runtime_error(fmt::format("{}: holds step {}", head_file, head.step));
  if (head.model_checksum != 0) {
    const uint64_t actual = file_checksum(model_file);
    if (actual != head.model_checksum)
      throw std::runtime_error(fmt::format("{}: checksum {:016x} differs from the {:016x} recorded in {}: the model file "
                                           "is corrupt or from another checkpoint",
                                           model_file, actual, head.model_checksum, head_file));
  }
  ModelFile model = load_model(model_file);
  if (!same_shape(model.config, config_))
    throw std::runtime_error(fmt::format("{}: model {} differs from -e {} ({})", model_file, describe_shape(model.config),
                                         o_.model, describe_shape(config_)));
  // This rank's optimizer state, every tensor alike, from the files whose ranges overlap its owned
  // range: one file of a -z 0 checkpoint holds all of it, a -z 1 checkpoint's files hold
  // consecutive chunks.
  const ElementRange owned = partition_.owned();
  resumed_state_ = zero_optimizer_state(optimizer, owned.size());
  size_t covered = 0;
  TrainState other;  // rank r > 0's file; rank 0's is head, read once
  for (int r = 0; r < head.world_size && covered < owned.size(); ++r) {
    const std::string file = checkpoint_state_path(dir, step, r);
    if (r > 0) other = read_train_state(file, state_names);
    const TrainState& state = r == 0 ? head : other;
    if (state.step != step || state.world_size != head.world_size || state.rank != r)
      throw std::runtime_error(fmt::format("{}: holds step {} of rank {} of {}, not step {} of rank {} of {}", file,
                                           state.step, state.rank, state.world_size, step, r, head.world_size));
    if (state.num_parameters != n)
      throw std::runtime_error(fmt::format("{}: holds the optimizer state of {} parameters, not of this model's ({})",
                                           file, state.num_parameters, n));
    const ElementRange range{state.state_offset, state.state_offset + state.state_size};
    covered += intersect(range, owned).size();
    for (size_t i = 0; i < state_names.size(); ++i)
      copy_overlap(state.optimizer_state[i].values.data(), range, resumed_state_[i].values.data(), owned);
  }
  // The scaling state is per rank: this rank's own file's, or rank 0's where the checkpoint had
  // fewer ranks than this run.
  if (rank_ < head.world_size)
    resumed_scaling_state_ =
        rank_ == 0 ? head.scaling_state : read_train_state(checkpoint_state_path(dir, step, rank_), state_names).scaling_state;
  else
    resumed_scaling_state_ = head.scaling_state;
  if (covered != owned.size())
    throw std::runtime_error(fmt::format("{}: the state files of its {} rank(s) hold the optimizer state of {} of the "
                                         "{} parameters [{}, {}) rank {} needs", head_file, head.world_size, covered,
                                         owned.size(), owned.begin, owned.end, rank_));
  params_ = std::move(model.params);
  return head;
}

void Trainer::resume_from_checkpoint() {
  const std::string& dir = o_.output_dir;
  // Rank 0's list, so that every rank tries the same checkpoints in the same order.
  std::vector<int> steps = blame("-y", [&] { return completed_checkpoints(dir); });
  uint64_t count = steps.size();
  host_.broadcast(&count, sizeof count, 0);
  steps.resize(count);
  host_.broadcast(steps.data(), count * sizeof(int), 0);
  // Nothing to resume (a first run, or one killed before its first checkpoint): start from step 0,
  // as llm.c does, so that the same -y 1 command both starts a run and continues it.
  if (steps.empty()) {
    say("resume: no checkpoint in {} (no DONE_<step> marker): starting from step 0\n", dir);
    return;
  }
  for (int step : steps) {
    TrainState state;
    std::string error;
    try {
      state = load_checkpoint(step);
    } catch (const std::exception& e) {
      error = e.what();
    }
    // A checkpoint is used only if it verifies for every rank.
    if (host_.all_reduce_max(error.empty() ? 0.0 : 1.0) != 0.0) {
      if (!error.empty())
        fmt::print("resume: skipping checkpoint step {}: {}{}\n", step, world_size_ > 1 ? fmt::format("rank {}: ", rank_) : "",
                   error);
      continue;
    }
    // The loader position counts windows of B*T tokens in a shuffle order: it only means the
    // same data with the same flags.
    const auto mismatch = [&](const char* flag, const std::string& now, const std::string& then) {
      if (now != then)
        throw FlagError(fmt::format("{}: is {} but checkpoint step {} in '{}' was written with {}", flag, now, step,
                                    dir, then));
    };
    mismatch("-b", std::to_string(o_.batch_size), std::to_string(state.batch_size));
    mismatch("-t", std::to_string(o_.seq_len), std::to_string(state.seq_len));
    mismatch("-sh", std::to_string(int(o_.shuffle)), std::to_string(int(state.shuffle)));
    mismatch("--seed", std::to_string(o_.seed), std::to_string(state.seed));
    if (step > max_steps_)
      throw FlagError(fmt::format("-x: checkpoint step {} in '{}' is past the {} steps of this run", step, dir,
                                  max_steps_));
    const DataLoaderPosition position = blame("-y", [&] {
      try {
        return rescale_loader_position(state.loader, state.world_size, world_size_, state.shuffle);
      } catch (const std::exception& e) {
        throw std::runtime_error(fmt::format("checkpoint step {} in '{}': {}", step, dir, e.what()));
      }
    });
    blame("-i", [&] { train_->restore(position); });
    // Rank 0 holds the loop state of the run (it is the one that samples); the outlier windows
    // and loader position are the same on every rank.
    sample_rng_.state = state.sample_rng_state;
    resumed_kernel_choices_ = state.kernel_choices;
    loss_outliers_.restore(state.loss_window);
    norm_outliers_.restore(state.norm_window);
    start_step_ = resumed_step_ = step;
    say("resume: continuing from checkpoint step {} in {} (the newest that verifies{})\n", step, dir,
        state.model_checksum != 0 ? ", checksums match" : "; written without checksums");
    if (state.world_size != world_size_ || state.state_size != num_parameters(config_) || zero1_)
      say("resume: optimizer state of {} rank(s) ({}) now {} over {} rank(s)\n", state.world_size,
          state.state_size == num_parameters(config_) ? "whole in every file" : "sharded",
          zero1_ ? "sharded (ZeRO-1)" : "whole on every rank", world_size_);
    return;
  }
  // Markers without a checkpoint that verifies: starting from step 0 here would silently throw the
  // run away, so it stops and leaves the choice to the user.
  throw FlagError(fmt::format("-y: none of the {} checkpoint(s) in '{}' (DONE_<step> markers, newest step {}) verifies "
                              "(the reasons are above): not starting from step 0 over them; repair or move them away, "
                              "or give another -o",
                              steps.size(), dir, steps.front()));
}

std::vector<float> Trainer::gather_parameters(Backend& backend) {
  const size_t n = num_parameters(config_);
  std::vector<float> params(n);
  backend.get_parameters(params.data());
  if (!partition_.sharded || world_size_ == 1) return params;
  // Only a range's owner has its exact (master) values: every rank contributes its owned range.
  const ZeroLayout& layout = partition_.layout;
  const ElementRange owned = partition_.owned();
  std::vector<float> mine(layout.shard_size, 0.0f), all(layout.padded_size());
  std::copy(params.begin() + owned.begin, params.begin() + owned.end, mine.begin());
  host_.all_gather(mine.data(), all.data(), layout.shard_size);
  std::copy_n(all.begin(), n, params.begin());
  return params;
}

void Trainer::save_checkpoint(Backend& backend, int step) {
  watchdog_.enter("checkpoint", step);
  const std::string& dir = o_.output_dir;
  // An older checkpoint at this step (from a run that was resumed before it) stops counting
  // before any of its files is replaced.
  if (lead_) remove_durably(checkpoint_done_path(dir, step));
  host_.barrier();
  const std::vector<float> params = gather_parameters(backend);
  // A diverged update can leave non-finite weights before any loss shows it: such a state must
  // never become the checkpoint a resume trusts. Every rank holds the same parameters here, so
  // every rank stops.
  const auto bad = std::find_if(params.begin(), params.end(), [](float x) { return !std::isfinite(x); });
  if (bad != params.end())
    throw std::runtime_error(fmt::format("step {}: parameter {} is {}: not writing a checkpoint of a diverged model "
                                         "(-l {:g} too high?)", step, bad - params.begin(), *bad, o_.learning_rate));
  // The loader position is the same on every rank by construction (each reads accum micro-batches
  // per step); a state file that claims otherwise would resume another data order.
  DataLoaderPosition lead_position = train_->position();
  host_.broadcast(&lead_position, sizeof lead_position, 0);
  if (!(lead_position == train_->position()))
    throw std::logic_error(fmt::format("rank {}: data loader position differs from rank 0's at step {}", rank_, step));
  TrainState state;
  if (lead_) state.model_checksum = save_model(checkpoint_model_path(dir, step), config_, params.data(), kModelVersionFp32);
  host_.broadcast(&state.model_checksum, sizeof state.model_checksum, 0);
  const ElementRange owned = partition_.owned();
  state.step = step;
  state.world_size = world_size_;
  state.rank = rank_;
  state.batch_size = o_.batch_size;
  state.seq_len = o_.seq_len;
  state.shuffle = o_.shuffle;
  state.seed = o_.seed;
  state.loader = lead_position;
  state.sample_rng_state = sample_rng_.state;
  state.num_parameters = params.size();
  state.state_offset = owned.begin;
  state.state_size = owned.size();
  state.optimizer_state = backend.get_optimizer_state();
  state.loss_window = loss_outliers_.values();
  state.norm_window = norm_outliers_.values();
  // The same on every rank (rank 0's, sent to all): rank 0's file keeps them.
  if (lead_) state.kernel_choices = backend.kernel_choices();
  state.scaling_state = backend.scaling_state();
  write_train_state(checkpoint_state_path(dir, step, rank_), state);
  // The marker goes last, once every rank's state file is in place: a checkpoint without it is
  // incomplete and resume skips it.
  host_.barrier();
  if (!lead_) return;
  write_done_marker(dir, step);
  fmt::print("checkpoint: step {} written to {}\n", step, dir);
  const std::vector<int> retired = retire_checkpoints(dir, o_.keep_checkpoints, o_.major_checkpoint_every, world_size_);
  for (int old : retired) fmt::print("checkpoint: deleted step {} (-nk {})\n", old, o_.keep_checkpoints);
}

}  // namespace llmc
