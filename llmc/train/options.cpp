#include "llmc/train/options.h"

#include <cerrno>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <functional>

namespace llmc {

namespace {

int64_t parse_integer(const std::string& flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE)
    throw FlagError(fmt::format("{}: '{}' is not an integer", flag, text));
  return v;
}

double parse_real(const std::string& flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    throw FlagError(fmt::format("{}: '{}' is not a finite number", flag, text));
  return v;
}

// The one shape of every out-of-range message: "<flag>: <value> is out of range: <what>".
template <class Value>
FlagError out_of_range(const std::string& flag, const Value& value, const char* what) {
  return FlagError(fmt::format("{}: {} is out of range: {}", flag, value, what));
}

int64_t integer_in(const std::string& flag, const std::string& text, int64_t lo, int64_t hi, const char* what) {
  const int64_t v = parse_integer(flag, text);
  if (v < lo || v > hi) throw out_of_range(flag, v, what);
  return v;
}

int int_in(const std::string& flag, const std::string& text, int64_t lo, int64_t hi, const char* what) {
  return int(integer_in(flag, text, lo, hi, what));
}

// A count that is either >= 1 or -1 (meaning "all of it").
int64_t positive_or_minus_one(const std::string& flag, const std::string& text, int64_t hi, const char* what) {
  const int64_t v = integer_in(flag, text, -1, hi, what);
  if (v == 0) throw out_of_range(flag, v, what);
  return v;
}

bool boolean(const std::string& flag, const std::string& text) {
  return int_in(flag, text, 0, 1, "must be 0 or 1") == 1;
}

float real_at_least(const std::string& flag, const std::string& text, double lo, const char* what) {
  const double v = parse_real(flag, text);
  if (v < lo) throw out_of_range(flag, text, what);
  return float(v);
}

std::string non_empty(const std::string& flag, const std::string& text, const char* what) {
  if (text.empty()) throw FlagError(fmt::format("{}: empty {}", flag, what));
  return text;
}

constexpr int64_t kIntMax = 2147483647;

using Setter = std::function<void(TrainOptions&, const std::string& flag, const std::string& value)>;

struct Flag {
  const char* name;
  Setter set;
};

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"-i", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.train_glob = non_empty(f, v, "train shard pattern");
       }},
      {"-j", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.val_glob = non_empty(f, v, "val shard pattern");
       }},
      {"-e", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.model = non_empty(f, v, "model file or descriptor");
       }},
      {"-o", [](TrainOptions& o, const std::string&, const std::string& v) { o.output_dir = v; }},
      {"-b", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.batch_size = int_in(f, v, 1, kIntMax, "the micro batch must be >= 1");
       }},
      {"-t", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.seq_len = int_in(f, v, 1, kIntMax, "the sequence length must be >= 1");
       }},
      {"-d", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.total_batch_tokens =
             positive_or_minus_one(f, v, INT64_MAX, "total batch tokens must be >= 1, or -1 for B*T*ranks");
       }},
      {"-x", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.max_steps = int(positive_or_minus_one(f, v, kIntMax, "max steps must be >= 1, or -1 for one epoch"));
       }},
      {"-l", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.learning_rate = real_at_least(f, v, 0.0, "the learning rate must be >= 0");
       }},
      {"-u", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.warmup_steps = int_in(f, v, 0, kIntMax, "warmup steps must be >= 0");
       }},
      {"-q", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.final_lr_frac = real_at_least(f, v, 0.0, "the final LR fraction must be in [0, 1]");
         if (o.final_lr_frac > 1.0f) throw out_of_range(f, v, "the final LR fraction must be in [0, 1]");
       }},
      {"-k", [](TrainOptions& o, const std::string& f, const std::string& v) {
         if (v != "cosine" && v != "linear" && v != "constant" && v != "wsd")
           throw FlagError(fmt::format("{}: unknown LR schedule '{}' (cosine, linear, constant or wsd)", f, v));
         o.lr_schedule = v;
       }},
      {"-c", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.weight_decay = real_at_least(f, v, 0.0, "weight decay must be >= 0");
       }},
      {"-v", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.val_every = int_in(f, v, 0, kIntMax, "val every must be >= 0 (0 = never)");
       }},
      {"-m", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.val_max_steps = int(positive_or_minus_one(f, v, kIntMax, "val max steps must be >= 1, or -1 for all"));
       }},
      {"-s", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.sample_every = int_in(f, v, 0, kIntMax, "sample every must be >= 0 (0 = never)");
       }},
      {"-g", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.gen_tokens = int_in(f, v, 1, kIntMax, "generated tokens must be >= 1");
       }},
      {"-n", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.checkpoint_every = int_in(f, v, 0, kIntMax, "checkpoint every must be >= 0 (0 = off)");
       }},
      {"-nk", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.keep_checkpoints = int_in(f, v, 0, kIntMax, "checkpoints to keep must be >= 0 (0 = all)");
       }},
      {"-nm", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.major_checkpoint_every = int_in(f, v, 0, kIntMax, "major checkpoint every must be >= 0 (0 = none)");
       }},
      {"-y", [](TrainOptions& o, const std::string& f, const std::string& v) { o.resume = boolean(f, v); }},
      {"-z", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.zero_stage = int_in(f, v, 0, 1, "the ZeRO stage must be 0 or 1");
       }},
      {"-r", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.recompute = int_in(f, v, 0, 2, "recompute must be 0, 1 or 2");
       }},
      {"-a", [](TrainOptions& o, const std::string& f, const std::string& v) { o.overfit_single_batch = boolean(f, v); }},
      {"-h", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.hellaswag = boolean(f, v);
       }},
      {"--hellaswag-file", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.hellaswag_file = non_empty(f, v, "path");
       }},
      {"-sl", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.skip_loss_z = real_at_least(f, v, 0.0, "the loss z-score threshold must be >= 0 (0 = off)");
       }},
      {"-sg", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.skip_norm_z = real_at_least(f, v, 0.0, "the grad-norm z-score threshold must be >= 0 (0 = off)");
       }},
      {"-sh", [](TrainOptions& o, const std::string& f, const std::string& v) { o.shuffle = boolean(f, v); }},
      {"--seed", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.seed = uint64_t(integer_in(f, v, 0, INT64_MAX, "the seed must be >= 0"));
       }},
      {"--temperature", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.temperature = real_at_least(f, v, 0.0, "the temperature must be >= 0 (0 = greedy)");
       }},
      {"--top-k", [](TrainOptions& o, const std::string& f, const std::string& v) {
         o.top_k = int_in(f, v, 0, kIntMax, "top-k must be >= 0 (0 = off)");
       }},
  };
  return table;
}

}  // namespace

TrainOptions parse_train_options(const std::vector<std::string>& args) {
  TrainOptions o;
  for (const std::string& a : args)
    if (a == "--help") {
      o.help = true;
      return o;
    }
  for (size_t i = 0; i < args.size(); i += 2) {
    const std::string& name = args[i];
    const Flag* flag = nullptr;
    for (const Flag& f : flags())
      if (name == f.name) flag = &f;
    if (flag == nullptr)
      throw FlagError(fmt::format("unknown flag '{}' (see --help)", name));
    if (i + 1 >= args.size()) throw FlagError(fmt::format("{}: missing value", name));
    flag->set(o, name, args[i + 1]);
  }
  return o;
}

TrainOptions parse_train_options(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_train_options(args);
}

std::string train_usage(const std::string& program) {
  const TrainOptions d;
  return fmt::format(
      "usage: {} [flags]   (every flag takes a value, e.g. -b 8)\n"
      "  -i <glob>   train token shards (default {})\n"
      "  -j <glob>   val token shards (default {})\n"
      "  -e <model>  model file (version 3 or 5) or descriptor d6|d12|d24|d36|d48|L<l>H<h>C<c>[T<t>] (default {})\n"
      "  -o <dir>    output dir for main.log and checkpoints (default: none)\n"
      "  -b <int>    micro batch per rank (default {})\n"
      "  -t <int>    sequence length (default {})\n"
      "  -d <int>    total batch tokens per step, a multiple of B*T*ranks (default -1 = B*T*ranks)\n"
      "  -x <int>    max steps (default -1 = one epoch of the train data)\n"
      "  -l <float>  learning rate (default {:g})\n"
      "  -u <int>    warmup steps (default {})\n"
      "  -q <float>  final LR as a fraction of -l (default {:g})\n"
      "  -k <name>   LR schedule: cosine, linear, constant, wsd (default {})\n"
      "  -c <float>  weight decay (default {:g})\n"
      "  -v <int>    val loss every N steps, 0 = never (default {})\n"
      "  -m <int>    val batches per evaluation, -1 = all (default {})\n"
      "  -s <int>    sample every N steps, 0 = never (default {})\n"
      "  -g <int>    tokens to generate per sample (default {})\n"
      "  -n <int>    checkpoint every N steps, 0 = off; needs -o (default {})\n"
      "  -nk <int>   keep only the newest N checkpoints, 0 = all (default {})\n"
      "  -nm <int>   checkpoints at multiples of M steps are major: never deleted, 0 = none (default {})\n"
      "  -y <0|1>    resume from the newest checkpoint in -o that verifies (default 0)\n"
      "  -z <0|1>    ZeRO stage (default {}; with one rank both are the same, -z 1 runs as -z 0)\n"
      "  -r <0|1|2>  activation recompute (default {}; the CPU backend has nothing to recompute)\n"
      "  -a <0|1>    overfit a single batch (default 0)\n"
      "  -h <0|1>    HellaSwag accuracy at every -v and at the end (default 0)\n"
      "  -sh <0|1>   shuffle the train data (default 1; 0 = llm.c's sequential order)\n"
      "  -sl <float> skip the update when the loss z-score exceeds this, 0 = off (default {:g})\n"
      "  -sg <float> skip the update when the grad-norm z-score exceeds this, 0 = off (default {:g})\n"
      "  --hellaswag-file <path> the -h eval file (default {})\n"
      "  --seed <int>          model init, shuffle and sampling seed (default {})\n"
      "  --temperature <float> sampling temperature, 0 = greedy (default {:g})\n"
      "  --top-k <int>         sample from the k most likely tokens, 0 = all (default {})\n"
      "  --help                this text\n",
      program, d.train_glob, d.val_glob, d.model, d.batch_size, d.seq_len, d.learning_rate, d.warmup_steps,
      d.final_lr_frac, d.lr_schedule, d.weight_decay, d.val_every, d.val_max_steps, d.sample_every, d.gen_tokens,
      d.checkpoint_every, d.keep_checkpoints, d.major_checkpoint_every, d.zero_stage, d.recompute, d.skip_loss_z,
      d.skip_norm_z, d.hellaswag_file, d.seed, d.temperature, d.top_k);
}

}  // namespace llmc
