#include "llmc/train/options.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <fmt/format.h>
#include <stdexcept>

#include "llmc/backend.h"
#include "llmc/gpt2.h"
#include "llmc/optim/optimizer.h"

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

// -r: 0, 1, 2, or "auto" (kRecomputeAuto).
int recompute_value(const std::string& flag, const std::string& text) {
  if (text == "auto") return kRecomputeAuto;
  if (text == "0" || text == "1" || text == "2") return text[0] - '0';
  throw FlagError(fmt::format("{}: '{}' is not a recompute: recompute must be 0, 1, 2 or auto", flag, text));
}

bool boolean(const std::string& flag, const std::string& text) {
  return int_in(flag, text, 0, 1, "must be 0 or 1") == 1;
}

// -ge: llm.c's GELU fusion, 0 or 2; "" (not given) = -1. llm.c's 1 fuses the forward GELU into its
// GEMM but computes the backward one in a kernel of its own, a path the CUDA trainer does not have.
int gelu_fusion_value(const std::string& flag, const std::string& text) {
  if (text.empty()) return -1;
  const int v = int_in(flag, text, 0, 2, "GELU fusion is 0 (none) or 2 (forward and backward)");
  if (v == 1)
    throw FlagError(fmt::format("{}: 1 (GELU fused into the forward GEMM only) has no counterpart here: -ge 2 "
                                "(LLMC_GELU=epilogues, with -r 0) fuses it in both passes, -ge 0 "
                                "(LLMC_GELU=kernels) nowhere, and the default LLMC_GELU=mixed fuses only the backward",
                                flag));
  return v;
}

// -w: llm.c's fp32 master weights. Every build keeps them (the optimizer always updates fp32
// weights), so only 1 is accepted.
void require_master_weights(const std::string& flag, const std::string& text) {
  if (!boolean(flag, text))
    throw FlagError(fmt::format("{}: 0 (no fp32 master weights) is not offered: the optimizer always updates fp32 "
                                "weights (in the bf16 build an fp32 copy, elsewhere the weights themselves); leave -w "
                                "at 1",
                                flag));
}

// -lg: llm.c's NVML line (utilisation, clocks, power, temperature) every N steps. Neither trainer
// links NVML, so N > 0 is refused rather than silently printing nothing.
void refuse_gpu_log(const std::string& flag, const std::string& text) {
  const int64_t every = integer_in(flag, text, INT32_MIN, INT32_MAX, "the step count must fit an int");
  if (every > 0)
    throw FlagError(fmt::format("{}: {}: this trainer prints no NVML GPU line; run `nvidia-smi --query-gpu="
                                "utilization.gpu,memory.used,clocks.sm,power.draw,temperature.gpu --format=csv -l 10` "
                                "beside it (the cuda: line at start-up gives the memory the run planned and "
                                "allocated); -lg 0 or -1 is off",
                                flag, every));
}

double real_in(const std::string& flag, const std::string& text, double lo, double hi, const char* what) {
  const double v = parse_real(flag, text);
  if (v < lo || v > hi) throw out_of_range(flag, text, what);
  return v;
}

float real_at_least(const std::string& flag, const std::string& text, double lo, const char* what) {
  return float(real_in(flag, text, lo, std::numeric_limits<double>::max(), what));
}

std::string non_empty(const std::string& flag, const std::string& text, const char* what) {
  if (text.empty()) throw FlagError(fmt::format("{}: empty {}", flag, what));
  return text;
}

constexpr int64_t kIntMax = 2147483647;
// --step-timeout's ceiling: a week. A larger value is a typo, or a wish for 0 (off).
constexpr double kMaxStepTimeout = 604800.0;
// --dry-run: more ranks than any cluster has would only make the plan's padding absurd.
constexpr int64_t kMaxDryRunRanks = 1 << 20;

// The type of every setter's flag and value arguments, short so that each row fits in a few lines.
using Arg = const std::string&;

}  // namespace

uint64_t parse_memory_size(const std::string& flag, const std::string& text) {
  static const struct {
    const char* name;
    double bytes;
  } units[] = {{"B", 1.0},           {"KB", 1e3},           {"MB", 1e6},
               {"GB", 1e9},          {"TB", 1e12},          {"KiB", 1024.0},
               {"MiB", 1048576.0},   {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  const char* unit_list = "B, KB, MB, GB, TB, KiB, MiB, GiB or TiB";
  // The number: digits with at most one '.', so that signs, exponents, hex, inf and nan never parse.
  size_t end = 0, digits = 0;
  bool dot = false;
  for (; end < text.size(); ++end) {
    const char c = text[end];
    if (c >= '0' && c <= '9') {
      ++digits;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (digits == 0)
    throw FlagError(fmt::format("{}: '{}' is not a memory size: write a number and a unit, e.g. 80GiB or 40GB", flag,
                                text));
  const std::string unit = text.substr(end);
  if (unit.empty())
    throw FlagError(fmt::format("{}: '{}' has no unit: write e.g. {}GiB ({})", flag, text, text, unit_list));
  for (const auto& u : units) {
    if (unit != u.name) continue;
    const double bytes = std::strtod(text.substr(0, end).c_str(), nullptr) * u.bytes;
    if (!(bytes >= 1.0)) throw out_of_range(flag, text, "the memory must be more than 0 bytes");
    if (!(bytes <= 9223372036854775808.0)) throw out_of_range(flag, text, "the memory must be at most 2^63 bytes");
    return uint64_t(bytes);
  }
  throw FlagError(fmt::format("{}: unknown unit '{}' in '{}' (use {})", flag, unit, text, unit_list));
}

namespace {

// --optimizer's help, "optimizer: adamw, ...": the registered names (llmc/optim/registry.h), so that a
// new optimizer needs no edit here.
const char* optimizer_help() {
  static const std::string help = "optimizer: " + registered_optimizer_names();
  return help.c_str();
}

// -e's help, "model file ... or descriptor d6|d12|...|L<l>H<h>C<c>[T<t>]": the named shapes of
// llmc/gpt2_shapes.def, so that a new shape needs no edit here.
const char* model_help() {
  static const std::string help =
      "model file (version 3 or 5) or descriptor " + named_shape_list("|") + "|L<l>H<h>C<c>[T<t>]";
  return help.c_str();
}

}  // namespace

const std::vector<FlagSpec>& train_flags() {
  static const std::vector<FlagSpec> table = {
      {"-i", "<glob>", "data/corpus/corpus_train_*.bin", "train token shards",
       [](TrainOptions& o, Arg f, Arg v) { o.train_glob = non_empty(f, v, "train shard pattern"); }},
      {"-j", "<glob>", "data/corpus/corpus_val_*.bin", "val token shards",
       [](TrainOptions& o, Arg f, Arg v) { o.val_glob = non_empty(f, v, "val shard pattern"); }},
      {"-e", "<model>", "d12", model_help(),
       [](TrainOptions& o, Arg f, Arg v) { o.model = non_empty(f, v, "model file or descriptor"); }},
      {"-o", "<dir>", "", "output dir for main.log and checkpoints",
       [](TrainOptions& o, Arg, Arg v) { o.output_dir = v; }},
      {"-b", "<int>", "4", "micro batch per rank",
       [](TrainOptions& o, Arg f, Arg v) { o.batch_size = int_in(f, v, 1, kIntMax, "the micro batch must be >= 1"); }},
      {"-t", "<int>", "1024", "sequence length",
       [](TrainOptions& o, Arg f, Arg v) { o.seq_len = int_in(f, v, 1, kIntMax, "the sequence length must be >= 1"); }},
      {"-d", "<int>", "-1", "total batch tokens per step, a multiple of B*T*ranks; -1 = B*T*ranks",
       [](TrainOptions& o, Arg f, Arg v) {
         o.total_batch_tokens =
             positive_or_minus_one(f, v, INT64_MAX, "total batch tokens must be >= 1, or -1 for B*T*ranks");
       }},
      {"-x", "<int>", "-1", "max steps, -1 = one epoch of the train data",
       [](TrainOptions& o, Arg f, Arg v) {
         o.max_steps = int(positive_or_minus_one(f, v, kIntMax, "max steps must be >= 1, or -1 for one epoch"));
       }},
      {"-l", "<float>", "3e-4", "learning rate",
       [](TrainOptions& o, Arg f, Arg v) {
         o.learning_rate = real_at_least(f, v, 0.0, "the learning rate must be >= 0");
       }},
      {"-u", "<int>", "0", "warmup steps",
       [](TrainOptions& o, Arg f, Arg v) { o.warmup_steps = int_in(f, v, 0, kIntMax, "warmup steps must be >= 0"); }},
      {"-q", "<float>", "1.0", "final LR as a fraction of -l",
       [](TrainOptions& o, Arg f, Arg v) {
         o.final_lr_frac = float(real_in(f, v, 0.0, 1.0, "the final LR fraction must be in [0, 1]"));
       }},
      {"-k", "<name>", "cosine", "LR schedule: cosine, linear, constant, wsd",
       [](TrainOptions& o, Arg f, Arg v) {
         if (v != "cosine" && v != "linear" && v != "constant" && v != "wsd")
           throw FlagError(fmt::format("{}: unknown LR schedule '{}' (cosine, linear, constant or wsd)", f, v));
         o.lr_schedule = v;
       }},
      {"-c", "<float>", "0.0", "weight decay",
       [](TrainOptions& o, Arg f, Arg v) { o.weight_decay = real_at_least(f, v, 0.0, "weight decay must be >= 0"); }},
      {"--optimizer", "<name>", default_optimizer().name.c_str(), optimizer_help(),
       [](TrainOptions& o, Arg f, Arg v) {
         try {
           o.optimizer = find_optimizer(v).name;
         } catch (const std::invalid_argument& e) {
           throw FlagError(fmt::format("{}: {}", f, e.what()));
         }
       }},
      {"-v", "<int>", "20", "val loss every N steps, 0 = never",
       [](TrainOptions& o, Arg f, Arg v) {
         o.val_every = int_in(f, v, 0, kIntMax, "val every must be >= 0 (0 = never)");
       }},
      {"-m", "<int>", "20", "val batches per evaluation, -1 = all",
       [](TrainOptions& o, Arg f, Arg v) {
         o.val_max_steps = int(positive_or_minus_one(f, v, kIntMax, "val max steps must be >= 1, or -1 for all"));
       }},
      {"-s", "<int>", "20", "sample every N steps, 0 = never",
       [](TrainOptions& o, Arg f, Arg v) {
         o.sample_every = int_in(f, v, 0, kIntMax, "sample every must be >= 0 (0 = never)");
       }},
      {"-g", "<int>", "64", "tokens to generate per sample",
       [](TrainOptions& o, Arg f, Arg v) { o.gen_tokens = int_in(f, v, 1, kIntMax, "generated tokens must be >= 1"); }},
      {"-n", "<int>", "0", "checkpoint every N steps, 0 = off; needs -o",
       [](TrainOptions& o, Arg f, Arg v) {
         o.checkpoint_every = int_in(f, v, 0, kIntMax, "checkpoint every must be >= 0 (0 = off)");
       }},
      {"-nk", "<int>", "0", "keep only the newest N checkpoints, 0 = all",
       [](TrainOptions& o, Arg f, Arg v) {
         o.keep_checkpoints = int_in(f, v, 0, kIntMax, "checkpoints to keep must be >= 0 (0 = all)");
       }},
      {"-nm", "<int>", "0", "checkpoints at multiples of M steps are major: never deleted, 0 = none",
       [](TrainOptions& o, Arg f, Arg v) {
         o.major_checkpoint_every = int_in(f, v, 0, kIntMax, "major checkpoint every must be >= 0 (0 = none)");
       }},
      {"-y", "<0|1>", "0", "resume from the newest checkpoint in -o that verifies",
       [](TrainOptions& o, Arg f, Arg v) { o.resume = boolean(f, v); }},
      {"-z", "<0|1>", "0", "ZeRO stage; with one rank both are the same, -z 1 runs as -z 0",
       [](TrainOptions& o, Arg f, Arg v) { o.zero_stage = int_in(f, v, 0, 1, "the ZeRO stage must be 0 or 1"); }},
      {"--overlap", "<0|1>", "1", "sum gradients over the ranks while the backward pass runs; 0 = after it",
       [](TrainOptions& o, Arg f, Arg v) { o.overlap = boolean(f, v); }},
      {"-r", "<0|1|2|auto>", "auto",
       "activation recompute; auto: the least whose memory plan fits the GPU; the CPU backend has nothing to "
       "recompute",
       [](TrainOptions& o, Arg f, Arg v) { o.recompute = recompute_value(f, v); }},
      {"--fp8", "<0|1>", "0",
       "FP8 matmuls for the layers' linear layers (the CUDA trainer, bf16 build, GPUs of compute capability 8.9 "
       "and up)",
       [](TrainOptions& o, Arg f, Arg v) { o.fp8 = boolean(f, v); }},
      {"-ge", "<0|2>", "",
       "llm.c's GELU fusion (train_gpt2cu): 0 = none (LLMC_GELU=kernels), 2 = forward and backward "
       "(LLMC_GELU=epilogues, needs -r 0 or auto); llm.c's 1 (forward only) has no counterpart; none = LLMC_GELU's "
       "choice",
       [](TrainOptions& o, Arg f, Arg v) { o.gelu_fusion = gelu_fusion_value(f, v); }},
      {"-f", "<0|1>", "",
       "llm.c's TF32 switch for fp32 matmuls (train_gpt2cu): the FP32 build always computes them in full fp32 (-f 0) "
       "and refuses 1; the bf16 build has none, either value changes nothing; none = the build's own",
       [](TrainOptions& o, Arg f, Arg v) { o.tf32 = v.empty() ? -1 : int(boolean(f, v)); }},
      {"-w", "<0|1>", "1",
       "keep fp32 master weights for the optimizer: always (bf16: an fp32 copy; FP32 and the CPU: the weights "
       "themselves); 0 is refused",
       [](TrainOptions&, Arg f, Arg v) { require_master_weights(f, v); }},
      {"-lg", "<int>", "-1",
       "llm.c's NVML GPU line every N steps: not printed here, N > 0 is refused (nvidia-smi beside the run shows "
       "it); N <= 0 = off",
       [](TrainOptions&, Arg f, Arg v) { refuse_gpu_log(f, v); }},
      {"-a", "<0|1>", "0", "overfit a single batch",
       [](TrainOptions& o, Arg f, Arg v) { o.overfit_single_batch = boolean(f, v); }},
      {"-h", "<0|1>", "0", "HellaSwag accuracy at every -v and at the end",
       [](TrainOptions& o, Arg f, Arg v) { o.hellaswag = boolean(f, v); }},
      {"--hellaswag-file", "<path>", "data/hellaswag/hellaswag_val.bin", "the -h eval file",
       [](TrainOptions& o, Arg f, Arg v) { o.hellaswag_file = non_empty(f, v, "path"); }},
      {"-sl", "<float>", "0",
       "skip the update when the loss z-score exceeds this (or a loss or norm is not finite), 0 = off",
       [](TrainOptions& o, Arg f, Arg v) {
         o.skip_loss_z = real_at_least(f, v, 0.0, "the loss z-score threshold must be >= 0 (0 = off)");
       }},
      {"-sg", "<float>", "0",
       "skip the update when the grad-norm z-score exceeds this (or a loss or norm is not finite), 0 = off",
       [](TrainOptions& o, Arg f, Arg v) {
         o.skip_norm_z = real_at_least(f, v, 0.0, "the grad-norm z-score threshold must be >= 0 (0 = off)");
       }},
      {"-sh", "<0|1>", "1",
       "shuffle the train data every epoch, as llm.c always does (other draws); 0 = sequential, in file order",
       [](TrainOptions& o, Arg f, Arg v) { o.shuffle = boolean(f, v); }},
      {"--seed", "<int>", "1337", "model init, shuffle and sampling seed",
       [](TrainOptions& o, Arg f, Arg v) {
         o.seed = uint64_t(integer_in(f, v, 0, INT64_MAX, "the seed must be >= 0"));
       }},
      {"--temperature", "<float>", "1.0", "sampling temperature, 0 = greedy",
       [](TrainOptions& o, Arg f, Arg v) {
         o.temperature = real_at_least(f, v, 0.0, "the temperature must be >= 0 (0 = greedy)");
       }},
      {"--top-k", "<int>", "0", "sample from the k most likely tokens, 0 = all",
       [](TrainOptions& o, Arg f, Arg v) { o.top_k = int_in(f, v, 0, kIntMax, "top-k must be >= 0 (0 = off)"); }},
      {"--step-timeout", "<seconds>", "600", "end the job when a rank makes no progress for this long, 0 = off",
       [](TrainOptions& o, Arg f, Arg v) {
         o.step_timeout =
             real_in(f, v, 0.0, kMaxStepTimeout, "the step timeout must be between 0 (off) and 604800 seconds (a week)");
       }},
      {"--device-memory", "<size>", "",
       "GPU memory per rank to plan against, e.g. 80GiB, 40GB, 81920MiB; none = the GPU's free memory (train_gpt2cu)",
       [](TrainOptions& o, Arg f, Arg v) { o.device_memory = v.empty() ? 0 : parse_memory_size(f, v); }},
      {"--dry-run", "<ranks>", "0",
       "print the GPU memory plan per rank for this many ranks and exit; needs no GPU (train_gpt2cu); 0 = train",
       [](TrainOptions& o, Arg f, Arg v) {
         o.dry_run_ranks = int_in(f, v, 0, kMaxDryRunRanks, "the number of ranks must be in 0..1048576 (0 = train)");
       }},
      {"-pi", "<mpi|tcp|fs>", "mpi",
       "how the ranks start: mpi = from mpirun/srun, over MPI; tcp = rank 0 listens at -ps; fs = rank 0's address "
       "in a file in -pf (docs/multi-gpu.md)",
       [](TrainOptions& o, Arg f, Arg v) {
         if (v != "mpi" && v != "tcp" && v != "fs")
           throw FlagError(fmt::format("{}: unknown method '{}' (mpi, tcp or fs)", f, v));
         o.init_method = v;
       }},
      {"-pf", "<dir>", "", "-pi fs: a folder every rank sees (a shared file system) for rank 0's address file",
       [](TrainOptions& o, Arg, Arg v) { o.fs_dir = v; }},
      {"-ps", "<host[:port]>", "", "-pi tcp: the address of rank 0's machine; port 12345 unless given",
       [](TrainOptions& o, Arg, Arg v) { o.server = v; }},
      {"-pn", "<int>", "", "-pi tcp|fs: number of processes; none = the launcher's (SLURM_NTASKS)",
       [](TrainOptions& o, Arg f, Arg v) {
         o.num_processes = v.empty() ? 0 : int_in(f, v, 1, kIntMax, "the number of processes must be >= 1");
       }},
      {"-pr", "<int>", "", "-pi tcp|fs: this process's rank, 0 to -pn - 1; none = the launcher's (SLURM_PROCID)",
       [](TrainOptions& o, Arg f, Arg v) {
         o.process_rank = v.empty() ? -1 : int_in(f, v, 0, kIntMax, "the rank must be >= 0");
       }},
      {"-pg", "<int>", "8", "-pi tcp|fs: GPUs per node; the GPU is rank % pg unless a launcher says (SLURM_LOCALID)",
       [](TrainOptions& o, Arg f, Arg v) { o.gpus_per_node = int_in(f, v, 1, kIntMax, "GPUs per node must be >= 1"); }},
  };
  return table;
}

TrainOptions::TrainOptions() {
  for (const FlagSpec& f : train_flags()) f.set(*this, f.name, f.default_text);
}

TrainOptions parse_train_options(const std::vector<std::string>& args) {
  TrainOptions o;
  for (const std::string& a : args)
    if (a == "--help") {
      o.help = true;
      return o;
    }
  for (size_t i = 0; i < args.size(); i += 2) {
    const std::string& name = args[i];
    const FlagSpec* flag = nullptr;
    for (const FlagSpec& f : train_flags())
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
  size_t width = std::strlen("--help");  // of the "-b <int>" column
  for (const FlagSpec& f : train_flags()) width = std::max(width, std::strlen(f.name) + 1 + std::strlen(f.value_name));
  std::string usage = fmt::format("usage: {} [flags]   (every flag takes a value, e.g. -b 8)\n", program);
  for (const FlagSpec& f : train_flags()) {
    // "(default: none)" cannot be read as a default text; tests/tools/check_flag_docs.sh relies on that.
    const std::string default_note =
        *f.default_text ? fmt::format("(default {})", f.default_text) : std::string("(default: none)");
    usage += fmt::format("  {:<{}} {} {}\n", fmt::format("{} {}", f.name, f.value_name), width, f.help, default_note);
  }
  usage += fmt::format("  {:<{}} this text\n", "--help", width);
  return usage;
}

}  // namespace llmc
