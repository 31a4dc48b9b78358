#include "llmc/train_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <optional>
#include <stdexcept>

#include "llmc/dataloader.h"
#include "llmc/lr_schedule.h"
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

std::string model_path(const std::string& dir, int step) { return fmt::format("{}/model_{:08d}.bin", dir, step); }
std::string state_path(const std::string& dir, int step, int rank) {
  return fmt::format("{}/state_{:08d}_{:05d}.bin", dir, step, rank);
}
std::string done_path(const std::string& dir, int step) { return fmt::format("{}/DONE_{:08d}", dir, step); }

// Steps that have a DONE marker in dir, newest first.
std::vector<int> completed_checkpoints(const std::string& dir) {
  std::vector<int> steps;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() != 13 || name.compare(0, 5, "DONE_") != 0) continue;
    if (!std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    steps.push_back(std::stoi(name.substr(5)));
  }
  if (ec) throw std::runtime_error(fmt::format("cannot list the output dir '{}': {}", dir, ec.message()));
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

void write_marker(const std::string& path, int step) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) throw std::runtime_error(fmt::format("{}: cannot write", tmp));
  const bool ok = std::fprintf(f, "%d\n", step) > 0;
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error(fmt::format("{}: cannot write", path));
}

class Trainer {
 public:
  Trainer(const TrainOptions& options, ModelFile model);
  void run(Backend& backend);

 private:
  void resume_from_checkpoint();
  float evaluate(Backend& backend);
  void save_checkpoint(Backend& backend, int step);
  void sample(Backend& backend, int step);
  void print_summary() const;

  const TrainOptions& o_;
  GPT2Config config_;
  std::vector<float> params_;  // the initial parameters, handed to the backend by run()
  std::vector<float> m_, v_;   // resumed AdamW moments (empty for a fresh run)
  // One rank until the communicator (multi-rank issue) supplies these; data order, -d checks and
  // state files already take them into account.
  int rank_ = 0;
  int world_size_ = 1;
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
  std::vector<int> inputs_, targets_;
};

Trainer::Trainer(const TrainOptions& o, ModelFile model)
    : o_(o), config_(model.config), params_(std::move(model.params)), sample_rng_(o.seed ^ kSampleSeedTag) {
  check_options_for_model(o, config_);
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
  }
  if (o.resume) resume_from_checkpoint();
  if (!o.output_dir.empty()) log_ = blame("-o", [&] { return std::make_unique<RunLog>(o.output_dir, resumed_step_); });
  inputs_.resize(size_t(B) * T);
  targets_.resize(size_t(B) * T);
}

void Trainer::resume_from_checkpoint() {
  const std::string& dir = o_.output_dir;
  const std::vector<int> steps = blame("-y", [&] { return completed_checkpoints(dir); });
  for (int step : steps) {
    ModelFile model;
    TrainState state;
    try {
      model = load_model(model_path(dir, step));
      state = read_train_state(state_path(dir, step, rank_));
      if (state.step != step)
        throw std::runtime_error(fmt::format("{}: holds step {}", state_path(dir, step, rank_), state.step));
      if (!same_shape(model.config, config_))
        throw std::runtime_error(fmt::format("{}: model {} differs from -e {} ({})", model_path(dir, step),
                                             describe(model.config), o_.model, describe(config_)));
      if (state.num_parameters != num_parameters(config_) || state.moment_offset != 0 ||
          state.m.size() != state.num_parameters)
        throw std::runtime_error(fmt::format("{}: holds {} of {} moments, not those of this model",
                                             state_path(dir, step, rank_), state.m.size(), state.num_parameters));
    } catch (const std::exception& e) {
      fmt::print("resume: skipping checkpoint step {}: {}\n", step, e.what());
      continue;
    }
    // The loader position counts windows of B*T*W tokens in a shuffle order: it only means the
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
    if (state.world_size != world_size_)
      throw std::runtime_error(fmt::format("-y: checkpoint step {} in '{}' was written by {} ranks, this run has {}",
                                           step, dir, state.world_size, world_size_));
    if (step > max_steps_)
      throw FlagError(fmt::format("-x: checkpoint step {} in '{}' is past the {} steps of this run", step, dir,
                                  max_steps_));
    blame("-i", [&] { train_->restore(state.loader); });
    params_ = std::move(model.params);
    m_ = std::move(state.m);
    v_ = std::move(state.v);
    sample_rng_.state = state.sample_rng_state;
    start_step_ = resumed_step_ = step;
    fmt::print("resume: continuing from checkpoint step {} in {}\n", step, dir);
    return;
  }
  throw FlagError(fmt::format("-y: no complete checkpoint (DONE_<step> with loadable model and state files) in '{}'",
                              dir));
}

void Trainer::print_summary() const {
  fmt::print("model: {} ({})\n", describe(config_), o_.model);
  fmt::print("parameters: {}\n", num_parameters(config_));
  fmt::print("batch: B={} T={} ranks={} accumulation={} -> {} tokens per step\n", o_.batch_size, o_.seq_len,
             world_size_, accum_, step_tokens_);
  fmt::print("train data: {} shard(s), {} tokens, {} steps per epoch{}\n", train_->files().size(),
             train_->num_tokens(), train_->steps_per_epoch() / accum_, o_.shuffle ? ", shuffled" : ", sequential");
  if (val_)
    fmt::print("val data: {} shard(s), {} tokens, {} batches per evaluation\n", val_->files().size(),
               val_->num_tokens(), val_batches_);
  fmt::print("schedule: {} lr={:g} warmup={} final fraction={:g} weight decay={:g}\n", o_.lr_schedule,
             o_.learning_rate, o_.warmup_steps, o_.final_lr_frac, o_.weight_decay);
  fmt::print("steps: {} (from step {})\n", max_steps_, start_step_);
  std::fflush(stdout);
}

float Trainer::evaluate(Backend& backend) {
  val_->reset();
  double sum = 0.0;
  for (int64_t i = 0; i < val_batches_; ++i) {
    val_->next_batch(inputs_.data(), targets_.data());
    sum += backend.forward_loss(inputs_.data(), targets_.data(), o_.batch_size, o_.seq_len);
  }
  return float(sum / double(val_batches_));
}

void Trainer::save_checkpoint(Backend& backend, int step) {
  const std::string& dir = o_.output_dir;
  const size_t n = num_parameters(config_);
  std::vector<float> buffer(n);
  backend.get_parameters(buffer.data());
  save_model(model_path(dir, step), config_, buffer.data(), kModelVersionFp32);
  TrainState state;
  state.step = step;
  state.world_size = world_size_;
  state.rank = rank_;
  state.batch_size = o_.batch_size;
  state.seq_len = o_.seq_len;
  state.shuffle = o_.shuffle;
  state.seed = o_.seed;
  state.loader = train_->position();
  state.sample_rng_state = sample_rng_.state;
  state.num_parameters = n;
  state.moment_offset = 0;
  state.m.resize(n);
  state.v.resize(n);
  backend.get_optimizer_state(state.m.data(), state.v.data());
  write_train_state(state_path(dir, step, rank_), state);
  // The marker goes last: a checkpoint without it is incomplete and resume skips it.
  write_marker(done_path(dir, step), step);
  fmt::print("checkpoint: step {} written to {}\n", step, dir);
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
  backend.set_parameters(params_.data());
  if (!m_.empty()) backend.set_optimizer_state(m_.data(), v_.data());
  params_ = {};
  m_ = {};
  v_ = {};
  print_summary();

  AdamWHyper hyper;
  hyper.weight_decay = o_.weight_decay;
  double train_seconds = 0.0;
  int timed_steps = 0;
  for (int step = start_step_;; ++step) {
    const bool last = step == max_steps_;
    if (val_ && (step % o_.val_every == 0 || last)) {
      const float val_loss = evaluate(backend);
      fmt::print("step {} | val loss {:.6f}\n", step, val_loss);
      if (log_) log_->val(step, val_loss);
    }
    // Before sampling, so that a run resumed here draws the same sample as the original run.
    if (o_.checkpoint_every > 0 && step > 0 && (step % o_.checkpoint_every == 0 || last) && step != resumed_step_)
      save_checkpoint(backend, step);
    if (o_.sample_every > 0 && ((step > 0 && step % o_.sample_every == 0) || last)) sample(backend, step);
    if (last) break;

    const auto start = std::chrono::steady_clock::now();
    backend.zero_grad();
    for (int micro = 0; micro < accum_; ++micro) {
      train_->next_batch(inputs_.data(), targets_.data());
      backend.forward_backward(inputs_.data(), targets_.data(), o_.batch_size, o_.seq_len, 1.0f / float(accum_));
    }
    const float loss = backend.accumulated_loss();
    const float norm = std::sqrt(backend.grad_sum_of_squares());
    if (!std::isfinite(loss) || !std::isfinite(norm))
      throw std::runtime_error(fmt::format("step {}: train loss {} / gradient norm {} is not finite (-l {:g} too high?)",
                                           step, loss, norm, o_.learning_rate));
    const float grad_scale = norm > 1.0f ? 1.0f / norm : 1.0f;
    const float lr = schedule_.at(step);
    backend.adamw_update(hyper, lr, step + 1, grad_scale);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    train_seconds += seconds;
    ++timed_steps;
    const double eta = train_seconds / timed_steps * (max_steps_ - step - 1);
    fmt::print("{}\n", format_step_line(step, max_steps_, loss, norm, lr, seconds * 1e3,
                                        double(step_tokens_) / seconds, eta));
    std::fflush(stdout);
    if (log_) log_->train(step, loss, lr, norm);
  }
  fmt::print("done: {} steps in {}\n", timed_steps, format_duration(train_seconds));
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
  if (o.checkpoint_every > 0 && o.output_dir.empty())
    throw FlagError("-n: checkpoints need an output dir (-o)");
  if (o.resume && o.output_dir.empty()) throw FlagError("-y: resuming needs the output dir (-o) of the checkpoints");
}

void run_training(const TrainOptions& options, const ModelFile& model, Backend& backend) {
  Trainer(options, model).run(backend);
}

int trainer_main(int argc, const char* const* argv, const BackendFactory& make_backend) {
  try {
    const TrainOptions options = parse_train_options(argc, argv);
    if (options.help) {
      fmt::print("{}", train_usage(argc > 0 ? argv[0] : "train"));
      return 0;
    }
    ModelFile model = resolve_model(options);
    const GPT2Config config = model.config;
    // Everything that reads the data or the output dir is checked before the backend allocates.
    Trainer trainer(options, std::move(model));
    std::unique_ptr<Backend> backend = make_backend(config, options);
    trainer.run(*backend);
    return 0;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace llmc
