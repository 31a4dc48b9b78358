#include "llmc/train_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fmt/format.h>
#include <stdexcept>
#include <unistd.h>

#include "llmc/checkpoint_files.h"
#include "llmc/dataloader.h"
#include "llmc/hellaswag.h"
#include "llmc/lr_schedule.h"
#include "llmc/outlier_detector.h"
#include "llmc/resharding.h"
#include "llmc/rng.h"
#include "llmc/run_log.h"
#include "llmc/sampler.h"
#include "llmc/shard.h"
#include "llmc/tokenizer.h"
#include "llmc/train_state.h"

namespace llmc {

namespace fs = std::filesystem;

namespace {

// Distinguishes the sampling stream from the other users of --seed.
constexpr uint64_t kSampleSeedTag = 0x53414D504C453031ull;

bool same_shape(const GPT2Config& a, const GPT2Config& b) {
  return a.max_seq_len == b.max_seq_len && a.vocab_size == b.vocab_size &&
         a.padded_vocab_size == b.padded_vocab_size && a.num_layers == b.num_layers &&
         a.num_heads == b.num_heads && a.channels == b.channels;
}

std::string describe(const GPT2Config& c) {
  return fmt::format("L={} H={} C={} maxT={} V={} Vp={}", c.num_layers, c.num_heads, c.channels, c.max_seq_len,
                     c.vocab_size, c.padded_vocab_size);
}

// Runs f; any error it throws comes back prefixed with the flag whose value caused it.
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

// SIGINT/SIGTERM: the first asks the loop to stop after the current step (with a checkpoint when
// there is an output dir), a second one exits at once.
volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int sig) {
  if (g_stop_signal != 0) {
    static const char kMessage[] = "\nsecond signal: exiting now, without a checkpoint\n";
    (void)!::write(2, kMessage, sizeof kMessage - 1);
    ::_exit(128 + sig);
  }
  g_stop_signal = sig;
}

// Installs the stop handlers for the duration of a run and puts the previous ones back after.
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  int received() const { return int(g_stop_signal); }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

// Optimizer shards start on multiples of this many elements (128 bytes of fp32), so that a
// backend's vector kernels see aligned chunks.
constexpr size_t kZeroAlignment = 32;

class Trainer {
 public:
  // host: the ranks' communicator (SingleProcessCommunicator for one process); it must outlive
  // the trainer. Every rank constructs its Trainer and calls run() with the same options.
  Trainer(const TrainOptions& options, ModelFile model, Communicator& host);
  const OptimizerPartition& partition() const { return partition_; }
  void run(Backend& backend);

 private:
  void resume_from_checkpoint();
  // Fills params_, m_, v_ (this rank's owned range) and returns rank 0's state of checkpoint
  // `step`; throws std::runtime_error naming the file that does not verify or does not fit.
  TrainState load_checkpoint(int step);
  void load_hellaswag();
  float evaluate(Backend& backend);
  void evaluate_hellaswag(Backend& backend, int step);
  // The whole model's fp32 parameters (gathered from the owners under ZeRO-1).
  std::vector<float> gather_parameters(Backend& backend);
  void save_checkpoint(Backend& backend, int step);
  void sample(Backend& backend, int step);
  void print_summary(const Backend& backend) const;
  // Prints only on rank 0: the other ranks run the same loop silently.
  template <class... Args>
  void say(fmt::format_string<Args...> format, Args&&... args) const {
    if (lead_) fmt::print(format, std::forward<Args>(args)...);
  }

  const TrainOptions& o_;
  GPT2Config config_;
  Communicator& host_;
  int rank_ = 0;
  int world_size_ = 1;
  bool lead_ = true;  // rank 0: writes main.log, the model file and the DONE marker, prints, samples
  bool zero1_ = false;
  OptimizerPartition partition_;
  std::vector<float> params_;  // the initial parameters, handed to the backend by run()
  std::vector<float> m_, v_;   // resumed AdamW moments of the owned range
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
  std::vector<EvalExample> hellaswag_;  // this rank's share of the examples
  size_t hellaswag_total_ = 0;
  std::vector<int> inputs_, targets_;
};

Trainer::Trainer(const TrainOptions& o, ModelFile model, Communicator& host)
    : o_(o),
      config_(model.config),
      host_(host),
      rank_(host.rank()),
      world_size_(host.world_size()),
      lead_(host.rank() == 0),
      zero1_(o.zero_stage == 1),
      params_(std::move(model.params)),
      sample_rng_(o.seed ^ kSampleSeedTag) {
  check_options_for_model(o, config_);
  const size_t n = num_parameters(config_);
  partition_ = zero1_ ? zero1_partition(n, world_size_, rank_, kZeroAlignment) : unsharded_partition(n);
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
    // Validation reads the batches of a single rank's order, split across the ranks in evaluate():
    // the same -m batches, so the same val loss, for any number of ranks.
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
  if (o.hellaswag) load_hellaswag();
  if (o.resume) resume_from_checkpoint();
  if (!o.output_dir.empty() && lead_)
    log_ = blame("-o", [&] { return std::make_unique<RunLog>(o.output_dir, resumed_step_); });
  inputs_.resize(size_t(B) * T);
  targets_.resize(size_t(B) * T);
}

TrainState Trainer::load_checkpoint(int step) {
  const std::string& dir = o_.output_dir;
  const size_t n = num_parameters(config_);
  const std::string model_file = checkpoint_model_path(dir, step), head_file = checkpoint_state_path(dir, step, 0);
  TrainState head = read_train_state(head_file);
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
    throw std::runtime_error(fmt::format("{}: model {} differs from -e {} ({})", model_file, describe(model.config),
                                         o_.model, describe(config_)));
  // This rank's moments, from the files whose ranges overlap its owned range: one file of a -z 0
  // checkpoint holds all of them, a -z 1 checkpoint's files hold consecutive chunks.
  const ElementRange owned = partition_.owned();
  m_.assign(owned.size(), 0.0f);
  v_.assign(owned.size(), 0.0f);
  size_t covered = 0;
  for (int r = 0; r < head.world_size && covered < owned.size(); ++r) {
    const std::string file = checkpoint_state_path(dir, step, r);
    const TrainState state = r == 0 ? head : read_train_state(file);
    if (state.step != step || state.world_size != head.world_size || state.rank != r)
      throw std::runtime_error(fmt::format("{}: holds step {} of rank {} of {}, not step {} of rank {} of {}", file,
                                           state.step, state.rank, state.world_size, step, r, head.world_size));
    if (state.num_parameters != n)
      throw std::runtime_error(fmt::format("{}: holds the moments of {} parameters, not those of this model ({})", file,
                                           state.num_parameters, n));
    const ElementRange range{state.moment_offset, state.moment_offset + state.m.size()};
    covered += copy_overlap(state.m.data(), range, m_.data(), owned);
    copy_overlap(state.v.data(), range, v_.data(), owned);
  }
  if (covered != owned.size())
    throw std::runtime_error(fmt::format("{}: the state files of its {} rank(s) hold {} of the {} moments [{}, {}) rank {} "
                                         "needs", head_file, head.world_size, covered, owned.size(), owned.begin,
                                         owned.end, rank_));
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
    loss_outliers_.restore(state.loss_window);
    norm_outliers_.restore(state.norm_window);
    start_step_ = resumed_step_ = step;
    say("resume: continuing from checkpoint step {} in {} (the newest that verifies{})\n", step, dir,
        state.model_checksum != 0 ? ", checksums match" : "; written without checksums");
    if (state.world_size != world_size_ || state.m.size() != num_parameters(config_) || zero1_)
      say("resume: optimizer state of {} rank(s) ({}) now {} over {} rank(s)\n", state.world_size,
          state.m.size() == num_parameters(config_) ? "whole in every file" : "sharded",
          zero1_ ? "sharded (ZeRO-1)" : "whole on every rank", world_size_);
    return;
  }
  throw FlagError(fmt::format("-y: no complete checkpoint (DONE_<step> with loadable model and state files) in '{}'",
                              dir));
}

void Trainer::load_hellaswag() {
  const std::string& path = o_.hellaswag_file;
  std::vector<EvalExample> all = blame("--hellaswag-file", [&] {
    if (!fs::exists(path))
      throw std::runtime_error(fmt::format("{}: no such file (-h 1 needs llm.c's HellaSwag eval file; give its path "
                                           "with --hellaswag-file)", path));
    return read_eval_file(path, config_.vocab_size);
  });
  for (const EvalExample& example : all)
    if (eval_rows_length(example) > o_.seq_len)
      throw FlagError(fmt::format("--hellaswag-file: {}: example {} needs {} positions, more than -t {}", path,
                                  example.index, eval_rows_length(example), o_.seq_len));
  // Rank r scores examples r, r+W, r+2W, ...; the counts are summed over the ranks.
  hellaswag_total_ = all.size();
  for (size_t i = size_t(rank_); i < all.size(); i += size_t(world_size_)) hellaswag_.push_back(std::move(all[i]));
}

void Trainer::print_summary(const Backend& backend) const {
  if (!lead_) return;
  fmt::print("model: {} ({})\n", describe(config_), o_.model);
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
  if (hellaswag_total_ > 0)
    fmt::print("hellaswag: {} examples from {}\n", hellaswag_total_, o_.hellaswag_file);
  // Rank 0 always owns a non-empty range; the unsharded figure scales its bytes per element.
  const double mib = 1024.0 * 1024.0, bytes = double(backend.optimizer_state_bytes());
  const double whole = bytes / double(std::max<size_t>(partition_.owned().size(), 1)) * double(num_parameters(config_));
  if (zero1_)
    fmt::print("optimizer state: {:.1f} MiB per rank (ZeRO-1 over {} rank{}; {:.1f} MiB unsharded)\n", bytes / mib,
               world_size_, world_size_ == 1 ? "" : "s", whole / mib);
  else
    fmt::print("optimizer state: {:.1f} MiB per rank (ZeRO stage 0: every rank holds all of it)\n", bytes / mib);
  if (zero1_ && world_size_ == 1)
    fmt::print("note: -z 1 with one rank has no optimizer state to shard: it runs exactly as -z 0\n");
  if (o_.skip_loss_z > 0 || o_.skip_norm_z > 0)
    fmt::print("outlier skipping: loss z > {:g}, grad norm z > {:g} (0 = off), over the last {} accepted steps\n",
               o_.skip_loss_z, o_.skip_norm_z, OutlierDetector::kWindow);
  fmt::print("steps: {} (from step {})\n", max_steps_, start_step_);
  std::fflush(stdout);
}

float Trainer::evaluate(Backend& backend) {
  val_->reset();
  double sum = 0.0;
  for (int64_t i = 0; i < val_batches_; ++i) {
    val_->next_batch(inputs_.data(), targets_.data());
    if (i % world_size_ == rank_) sum += backend.forward_loss(inputs_.data(), targets_.data(), o_.batch_size, o_.seq_len);
  }
  return float(host_.all_reduce_sum(sum) / double(val_batches_));
}

void Trainer::evaluate_hellaswag(Backend& backend, int step) {
  const EvalAccuracy mine = evaluate_multiple_choice(backend, hellaswag_, o_.batch_size, o_.seq_len);
  EvalAccuracy result;
  result.correct = int64_t(host_.all_reduce_sum(double(mine.correct)));
  result.total = int64_t(host_.all_reduce_sum(double(mine.total)));
  say("step {} | hellaswag {}/{} = {:.6f}\n", step, result.correct, result.total, result.accuracy());
  if (log_) log_->eval(step, float(result.accuracy()));
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
  state.moment_offset = owned.begin;
  state.m.resize(owned.size());
  state.v.resize(owned.size());
  backend.get_optimizer_state(state.m.data(), state.v.data());
  state.loss_window = loss_outliers_.values();
  state.norm_window = norm_outliers_.values();
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

void Trainer::sample(Backend& backend, int step) {
  std::vector<int> tokens = {Tokenizer::kEndOfText};
  std::vector<float> logits(size_t(config_.vocab_size));
  for (int i = 0; i < o_.gen_tokens; ++i) {
    // The context is the last T tokens: the backend was sized for sequences of at most T.
    const int context = std::min<int>(int(tokens.size()), o_.seq_len);
    backend.next_token_logits(tokens.data() + tokens.size() - context, context, logits.data());
    tokens.push_back(sample_token(logits.data(), config_.vocab_size, o_.temperature, o_.top_k, sample_rng_.uniform()));
  }
  const std::vector<int> generated(tokens.begin() + 1, tokens.end());
  fmt::print("--- sample at step {} ---\n", step);
  const std::string encoder = default_encoder_path(), merges = default_vocab_bpe_path();
  std::string text;
  try {
    if (!fs::exists(encoder) || !fs::exists(merges)) throw std::runtime_error("vocabulary files missing");
    static const Tokenizer tokenizer(encoder, merges);
    text = tokenizer.decode(generated);
  } catch (const std::exception& e) {
    fmt::print("(cannot decode: {}; `make setup` puts the vocabulary at {} and {}; token ids:)\n", e.what(), encoder,
               merges);
    text.clear();
    for (int id : generated) text += fmt::format("{} ", id);
  }
  fmt::print("{}\n---\n", text);
  std::fflush(stdout);
}

void Trainer::run(Backend& backend) {
  if (!same_shape(backend.config(), config_))
    throw std::runtime_error(fmt::format("backend model {} differs from the model {}", describe(backend.config()),
                                         describe(config_)));
  const OptimizerPartition& bp = backend.partition();
  if (bp.sharded != partition_.sharded || !(bp.owned() == partition_.owned()) ||
      bp.buffer_size() != partition_.buffer_size())
    throw std::logic_error("the backend was built for another optimizer partition than the trainer's");
  backend.set_parameters(params_.data());
  if (resumed_step_ >= 0) backend.set_optimizer_state(m_.data(), v_.data());
  params_ = {};
  m_ = {};
  v_ = {};
  print_summary(backend);
  const StopSignals signals;

  AdamWHyper hyper;
  hyper.weight_decay = o_.weight_decay;
  double train_seconds = 0.0;
  int timed_steps = 0;
  // Each rank's micro-batches carry 1/(accum*W) of the step: the sum over the ranks is the mean.
  const float loss_scale = 1.0f / float(accum_ * world_size_);
  for (int step = start_step_;; ++step) {
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
    const bool evaluate_now = (o_.val_every > 0 && step % o_.val_every == 0) || last;
    if (val_ && evaluate_now) {
      const float val_loss = evaluate(backend);
      say("step {} | val loss {:.6f}\n", step, val_loss);
      if (log_) log_->val(step, val_loss);
    }
    if (hellaswag_total_ > 0 && evaluate_now) evaluate_hellaswag(backend, step);
    // Before sampling, so that a run resumed here draws the same sample as the original run.
    if (o_.checkpoint_every > 0 && step > 0 && (step % o_.checkpoint_every == 0 || last) && step != resumed_step_)
      save_checkpoint(backend, step);
    // Only rank 0 samples; sampling involves no collective, so the others simply go on.
    if (lead_ && o_.sample_every > 0 && ((step > 0 && step % o_.sample_every == 0) || last)) sample(backend, step);
    if (last) break;

    const auto start = std::chrono::steady_clock::now();
    backend.zero_grad();
    for (int micro = 0; micro < accum_; ++micro) {
      train_->next_batch(inputs_.data(), targets_.data());
      backend.forward_backward(inputs_.data(), targets_.data(), o_.batch_size, o_.seq_len, loss_scale);
    }
    const float loss = float(host_.all_reduce_sum(double(backend.accumulated_loss())));
    float norm = 0.0f;
    if (zero1_) {
      backend.reduce_scatter_gradients(host_);
      norm = std::sqrt(float(host_.all_reduce_sum(double(backend.grad_sum_of_squares(partition_.owned())))));
    } else {
      backend.all_reduce_gradients(host_);
      norm = std::sqrt(backend.grad_sum_of_squares());
    }
    // Every rank holds the same loss and norm, so every rank stops here, or skips, alike.
    if (!std::isfinite(loss) || !std::isfinite(norm))
      throw std::runtime_error(fmt::format("step {}: train loss {} / gradient norm {} is not finite (-l {:g} too high?); "
                                           "stopped without updating or checkpointing this state",
                                           step, loss, norm, o_.learning_rate));
    const float lr = schedule_.at(step);
    // A spike's update is skipped (its batch is consumed, the schedule moves on) and the spike is
    // kept out of the windows, so one bad batch neither moves the weights nor widens the window.
    const bool skip = loss_outliers_.is_outlier(loss, o_.skip_loss_z) || norm_outliers_.is_outlier(norm, o_.skip_norm_z);
    if (!skip) {
      const float grad_scale = norm > 1.0f ? 1.0f / norm : 1.0f;
      backend.adamw_update(hyper, lr, step + 1, grad_scale);
      if (zero1_) backend.all_gather_parameters(host_);
      loss_outliers_.push(loss);
      norm_outliers_.push(norm);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    train_seconds += seconds;
    ++timed_steps;
    if (!lead_) continue;
    const double eta = train_seconds / timed_steps * (max_steps_ - step - 1);
    std::string line =
        format_step_line(step, max_steps_, loss, norm, lr, seconds * 1e3, double(step_tokens_) / seconds, eta);
    if (skip)
      line += fmt::format(" | skipped: loss z {:.2f} (-sl {:g}), norm z {:.2f} (-sg {:g})", loss_outliers_.z_score(loss),
                          o_.skip_loss_z, norm_outliers_.z_score(norm), o_.skip_norm_z);
    fmt::print("{}\n", line);
    std::fflush(stdout);
    if (log_) log_->train(step, loss, lr, norm, skip);
  }
  say("done: {} steps in {}\n", timed_steps, format_duration(train_seconds));
}

}  // namespace

ModelFile resolve_model(const TrainOptions& o) {
  return blame("-e", [&] {
    if (!is_descriptor(o.model)) return load_model(o.model);
    ModelFile model;
    model.config = config_from_descriptor(o.model);
    model.params = init_parameters(model.config, o.seed);
    return model;
  });
}

void check_options_for_model(const TrainOptions& o, const GPT2Config& config) {
  if (o.seq_len > config.max_seq_len)
    throw FlagError(fmt::format("-t: sequence length {} exceeds the model's max_seq_len {} (-e {})", o.seq_len,
                                config.max_seq_len, o.model));
  if (int64_t(o.batch_size) * o.seq_len > INT32_MAX)
    throw FlagError(fmt::format("-b: B*T = {}*{} tokens per micro-batch is more than the backends' limit of {}",
                                o.batch_size, o.seq_len, INT32_MAX));
  if (o.checkpoint_every > 0 && o.output_dir.empty())
    throw FlagError("-n: checkpoints need an output dir (-o)");
  if (o.resume && o.output_dir.empty()) throw FlagError("-y: resuming needs the output dir (-o) of the checkpoints");
}

double EvalAccuracy::accuracy() const { return total > 0 ? double(correct) / double(total) : 0.0; }

EvalAccuracy evaluate_multiple_choice(Backend& backend, const std::vector<EvalExample>& examples, int B, int T) {
  // Completions are rows of T positions; rows of consecutive examples are packed B to a batch
  // (the last batch padded), so an example's rows may straddle two batches.
  struct Pending {
    EvalRows rows;
    std::vector<float> losses;
    int filled = 0;
    int label = 0;
  };
  std::deque<Pending> pending;
  size_t first_pending = 0;  // example index of pending.front()
  std::vector<std::pair<size_t, int>> slots;  // (example index, row) of each filled batch row
  std::vector<int> inputs(size_t(B) * T), targets(size_t(B) * T);
  std::vector<float> losses(size_t(B) * T);
  EvalAccuracy result;
  const auto flush = [&] {
    if (slots.empty()) return;
    std::fill(inputs.begin() + slots.size() * T, inputs.end(), Tokenizer::kEndOfText);
    std::fill(targets.begin() + slots.size() * T, targets.end(), Tokenizer::kEndOfText);
    backend.forward_losses(inputs.data(), targets.data(), B, T, losses.data());
    for (size_t i = 0; i < slots.size(); ++i) {
      Pending& p = pending[slots[i].first - first_pending];
      std::copy_n(losses.begin() + i * T, T, p.losses.begin() + size_t(slots[i].second) * T);
      ++p.filled;
    }
    slots.clear();
    while (!pending.empty() && pending.front().filled == pending.front().rows.rows) {
      result.correct += predict_completion(pending.front().rows, pending.front().losses.data()) == pending.front().label;
      ++result.total;
      pending.pop_front();
      ++first_pending;
    }
  };
  for (size_t e = 0; e < examples.size(); ++e) {
    Pending p;
    p.rows = build_eval_rows(examples[e], T);
    p.losses.resize(p.rows.inputs.size());
    p.label = examples[e].label;
    pending.push_back(std::move(p));
    const EvalRows& rows = pending.back().rows;
    for (int r = 0; r < rows.rows; ++r) {
      std::copy_n(rows.inputs.begin() + size_t(r) * T, T, inputs.begin() + slots.size() * T);
      std::copy_n(rows.targets.begin() + size_t(r) * T, T, targets.begin() + slots.size() * T);
      slots.emplace_back(e, r);
      if (slots.size() == size_t(B)) flush();
    }
  }
  flush();
  return result;
}

void run_training(const TrainOptions& options, const ModelFile& model, Backend& backend) {
  SingleProcessCommunicator single;
  Trainer(options, model, single).run(backend);
}

int trainer_main(int argc, const char* const* argv, const BackendFactory& make_backend) {
  // Past `ulimit -f` a write should fail with EFBIG (reported, .tmp removed) instead of the
  // default SIGXFSZ killing the process mid-checkpoint with a core dump.
  std::signal(SIGXFSZ, SIG_IGN);
  std::unique_ptr<ProcessGroup> group;
  try {
    group = std::make_unique<ProcessGroup>();
    const TrainOptions options = parse_train_options(argc, argv);
    if (options.help) {
      if (group->rank() == 0) fmt::print("{}", train_usage(argc > 0 ? argv[0] : "train"));
      return 0;
    }
    ModelFile model = resolve_model(options);
    const GPT2Config config = model.config;
    // Everything that reads the data or the output dir is checked before the backend allocates.
    Trainer trainer(options, std::move(model), group->communicator());
    BackendPlacement placement;
    placement.process = group->layout();
    placement.partition = trainer.partition();
    placement.host = &group->communicator();
    std::unique_ptr<Backend> backend = make_backend(config, options, placement);
    trainer.run(*backend);
    return 0;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    const bool many = group && group->world_size() > 1;
    fmt::print(stderr, "error: {}{}\n", many ? fmt::format("rank {}: ", group->rank()) : "", e.what());
    // The other ranks may be waiting in a collective for this one: end them all.
    if (many) group->abort(1);
    return 1;
  }
}

}  // namespace llmc
