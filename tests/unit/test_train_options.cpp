#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "llmc/backend.h"
#include "llmc/gpt2.h"
#include "llmc/train/gpu_flags.h"
#include "llmc/train/options.h"
#include "llmc/train/trainer_main.h"
#include "tests/unit/test_support.h"

using llmc::parse_train_options;
using test_support::ends_with;
using test_support::starts_with;

namespace {

// The message of the FlagError that parsing args throws, or "" if it parses.
std::string flag_error(const std::vector<std::string>& args) {
  return test_support::error_message<llmc::FlagError>([&] { parse_train_options(args); });
}

// Calls row(flag, value, field, documented default, parsed value) for every flag: the default
// README.md and --help promise for the field, and what the field holds after `flag value`. One
// table for both, so that a new flag cannot get one test and miss the other.
template <typename Row>
void for_each_flag(Row&& row) {
  using O = llmc::TrainOptions;
  row("-i", "tr*.bin", &O::train_glob, "data/corpus/corpus_train_*.bin", "tr*.bin");
  row("-j", "va*.bin", &O::val_glob, "data/corpus/corpus_val_*.bin", "va*.bin");
  row("-e", "model.bin", &O::model, "d12", "model.bin");
  row("-o", "out", &O::output_dir, "", "out");
  row("-b", "8", &O::batch_size, 4, 8);
  row("-t", "128", &O::seq_len, 1024, 128);
  row("-d", "2048", &O::total_batch_tokens, -1, 2048);
  row("-x", "100", &O::max_steps, -1, 100);
  row("-l", "1e-3", &O::learning_rate, 3e-4f, 1e-3f);
  row("-u", "10", &O::warmup_steps, 0, 10);
  row("-q", "0.1", &O::final_lr_frac, 1.0f, 0.1f);
  row("-k", "wsd", &O::lr_schedule, "cosine", "wsd");
  row("-c", "0.1", &O::weight_decay, 0.0f, 0.1f);
  row("-v", "5", &O::val_every, 20, 5);
  row("-m", "-1", &O::val_max_steps, 20, -1);
  row("-s", "0", &O::sample_every, 20, 0);
  row("-g", "16", &O::gen_tokens, 64, 16);
  row("-n", "25", &O::checkpoint_every, 0, 25);
  row("-y", "1", &O::resume, false, true);
  row("-z", "1", &O::zero_stage, 0, 1);
  row("-r", "2", &O::recompute, llmc::kRecomputeAuto, 2);
  row("-a", "1", &O::overfit_single_batch, false, true);
  row("-h", "1", &O::hellaswag, false, true);
  row("-sh", "0", &O::shuffle, true, false);
  row("--seed", "7", &O::seed, 1337, 7);
  row("--temperature", "0.8", &O::temperature, 1.0f, 0.8f);
  row("--top-k", "40", &O::top_k, 0, 40);
  row("-nk", "3", &O::keep_checkpoints, 0, 3);
  row("-nm", "100", &O::major_checkpoint_every, 0, 100);
  row("-sl", "5", &O::skip_loss_z, 0.0f, 5.0f);
  row("-sg", "4.5", &O::skip_norm_z, 0.0f, 4.5f);
  row("--hellaswag-file", "hs.bin", &O::hellaswag_file, "data/hellaswag/hellaswag_val.bin", "hs.bin");
  row("--step-timeout", "2.5", &O::step_timeout, 600.0, 2.5);
  row("--device-memory", "40GB", &O::device_memory, uint64_t(0), uint64_t(40000000000));
  row("--dry-run", "8", &O::dry_run_ranks, 0, 8);
  row("-ge", "2", &O::gelu_fusion, -1, 2);
  row("-f", "0", &O::tf32, -1, 0);
}

void check_documented_defaults(const llmc::TrainOptions& o) {
  for_each_flag([&](const std::string& flag, const std::string&, auto field, auto documented, auto) {
    CHECK_MESSAGE(o.*field == documented, flag);
  });
  CHECK_FALSE(o.help);
}

}  // namespace

TEST_CASE("train options: TrainOptions{} and an empty command line both give the documented defaults") {
  SUBCASE("TrainOptions{}") { check_documented_defaults(llmc::TrainOptions{}); }
  SUBCASE("parse_train_options({})") { check_documented_defaults(parse_train_options(std::vector<std::string>{})); }
}

TEST_CASE("train options: every row's default text parses as its own flag") {
  std::set<std::string> names;
  for (const llmc::FlagSpec& f : llmc::train_flags()) {
    CHECK_MESSAGE(names.insert(f.name).second, f.name, " has two rows");
    // A bad default text also breaks TrainOptions' constructor, so then every row fails with its message.
    const std::string error = flag_error({f.name, f.default_text});
    CHECK_MESSAGE(error.empty(), f.name, " '", f.default_text, "': ", error);
  }
}

TEST_CASE("train options: every flag sets its field") {
  std::vector<std::string> args;
  for_each_flag([&](const std::string& flag, const std::string& value, auto, auto, auto) {
    args.push_back(flag);
    args.push_back(value);
  });
  const llmc::TrainOptions o = parse_train_options(args);
  for_each_flag([&](const std::string& flag, const std::string& value, auto field, auto, auto parsed) {
    CHECK_MESSAGE(o.*field == parsed, flag, " ", value);
  });
}

TEST_CASE("train options: --help anywhere, and it lists every row with its default") {
  CHECK(parse_train_options(std::vector<std::string>{"-b", "2", "--help"}).help);
  const std::string usage = llmc::train_usage("train_gpt2");
  CHECK(starts_with(usage, "usage: train_gpt2 [flags]"));
  CHECK(usage.find("\n  --help ") != std::string::npos);
  for (const llmc::FlagSpec& f : llmc::train_flags()) {
    const size_t start = usage.find(std::string("\n  ") + f.name + " " + f.value_name + " ");
    REQUIRE_MESSAGE(start != std::string::npos, f.name, " is missing from --help");
    const std::string line = usage.substr(start + 1, usage.find('\n', start + 1) - start - 1);
    const std::string default_text = f.default_text;
    CHECK_MESSAGE(line.find(f.help) != std::string::npos, line);
    CHECK_MESSAGE(ends_with(line, default_text.empty() ? "(default: none)" : "(default " + default_text + ")"), line);
  }
}

TEST_CASE("train options: each bad value is rejected naming its flag") {
  const std::vector<std::vector<std::string>> bad = {
      {"-b", "abc"}, {"-b", "0"}, {"-b", "-3"}, {"-b", "4x"}, {"-b", ""}, {"-b", "99999999999"},
      {"-t", "0"}, {"-d", "0"}, {"-d", "-2"}, {"-x", "0"}, {"-x", "-5"}, {"-l", "-1"}, {"-l", "nan"},
      {"-l", "inf"}, {"-l", "fast"}, {"-u", "-1"}, {"-q", "1.5"}, {"-q", "-0.1"}, {"-k", "step"}, {"-c", "-0.1"},
      {"-v", "-1"}, {"-m", "0"}, {"-m", "-2"}, {"-s", "-1"}, {"-g", "0"}, {"-n", "-1"}, {"-y", "2"}, {"-z", "2"},
      {"-r", "3"}, {"-a", "yes"}, {"-h", "2"}, {"-sh", "2"}, {"--seed", "-1"}, {"--temperature", "-1"},
      {"--top-k", "-1"}, {"-i", ""}, {"-j", ""}, {"-e", ""}, {"-nk", "-1"}, {"-nm", "x"}, {"-sl", "-1"},
      {"-sg", "nan"}, {"--hellaswag-file", ""}, {"--step-timeout", "-1"}, {"--step-timeout", "ten"},
      {"--step-timeout", "inf"}, {"--step-timeout", "nan"}, {"--step-timeout", "1e9"}, {"--step-timeout", ""},
      {"--device-memory", "80"}, {"--device-memory", "80XB"},
      {"--device-memory", "-1GiB"}, {"--device-memory", "0GiB"}, {"--device-memory", "GiB"},
      {"--device-memory", "1e400GiB"}, {"--device-memory", "inf"}, {"--device-memory", "1.2.3GiB"},
      {"--device-memory", "99999999999TiB"}, {"--dry-run", "-1"}, {"--dry-run", "x"}, {"--dry-run", "2000000"},
      {"-ge", "1"}, {"-ge", "3"}, {"-ge", "-1"}, {"-ge", "x"}, {"-f", "2"}, {"-f", "on"}, {"-w", "0"}, {"-w", "2"},
      {"-lg", "1"}, {"-lg", "x"}, {"-lg", "99999999999"}};
  for (const auto& args : bad) {
    const std::string msg = flag_error(args);
    CHECK_MESSAGE(starts_with(msg, args[0] + ":"), args[0], " ", args[1], " -> '", msg, "'");
  }
}

TEST_CASE("train options: -r takes 0, 1, 2 or auto") {
  CHECK(parse_train_options(std::vector<std::string>{"-r", "auto"}).recompute == llmc::kRecomputeAuto);
  CHECK(parse_train_options(std::vector<std::string>{"-r", "0"}).recompute == 0);
  CHECK(flag_error({"-r", "Auto"}).find("recompute must be 0, 1, 2 or auto") != std::string::npos);
  CHECK(flag_error({"-r", "-1"}).find("recompute must be 0, 1, 2 or auto") != std::string::npos);
}

TEST_CASE("train options: --step-timeout takes 0 (off) up to a week of seconds") {
  CHECK(parse_train_options(std::vector<std::string>{"--step-timeout", "0"}).step_timeout == 0.0);
  CHECK(parse_train_options(std::vector<std::string>{"--step-timeout", "604800"}).step_timeout == 604800.0);
  CHECK(flag_error({"--step-timeout", "604801"}) ==
        "--step-timeout: 604801 is out of range: the step timeout must be between 0 (off) and 604800 seconds (a week)");
  CHECK(flag_error({"--step-timeout", "-0.5"}).find("out of range") != std::string::npos);
}

TEST_CASE("train options: unknown flags and missing values") {
  CHECK(flag_error({"-ww", "1"}).find("'-ww'") != std::string::npos);
  CHECK(flag_error({"--batch", "1"}).find("'--batch'") != std::string::npos);
  CHECK(flag_error({"8"}).find("'8'") != std::string::npos);
  CHECK(flag_error({"-b", "2", "-t"}) == "-t: missing value");
  CHECK(flag_error({"-b"}) == "-b: missing value");
}

TEST_CASE("train options: checks that need the model name their flag") {
  llmc::GPT2Config config;
  config.max_seq_len = 1024;
  llmc::TrainOptions o;
  o.seq_len = 1024;
  CHECK_NOTHROW(llmc::check_options_for_model(o, config));
  o.seq_len = 5000;
  const std::string error =
      test_support::thrown_message<llmc::FlagError>([&] { llmc::check_options_for_model(o, config); });
  CHECK(starts_with(error, "-t:"));
  CHECK(error.find("1024") != std::string::npos);
  o.seq_len = 64;
  o.checkpoint_every = 10;
  CHECK_THROWS_WITH_AS(llmc::check_options_for_model(o, config), "-n: checkpoints need an output dir (-o)",
                       llmc::FlagError);
  o.checkpoint_every = 0;
  o.resume = true;
  CHECK_THROWS_AS(llmc::check_options_for_model(o, config), llmc::FlagError);
  o.output_dir = "out";
  CHECK_NOTHROW(llmc::check_options_for_model(o, config));
}

TEST_CASE("train options: --device-memory sizes, decimal and binary units") {
  using llmc::parse_memory_size;
  CHECK(parse_memory_size("--device-memory", "80GiB") == 80ull << 30);
  CHECK(parse_memory_size("--device-memory", "40GB") == 40000000000ull);
  CHECK(parse_memory_size("--device-memory", "81920MiB") == 80ull << 30);
  CHECK(parse_memory_size("--device-memory", "1.5TiB") == 3ull << 39);
  CHECK(parse_memory_size("--device-memory", "512B") == 512);
  CHECK(parse_memory_size("--device-memory", "2.5KB") == 2500);
  CHECK(flag_error({"--device-memory", "80"}) ==
        "--device-memory: '80' has no unit: write e.g. 80GiB (B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)");
  CHECK(flag_error({"--device-memory", "80XB"}) ==
        "--device-memory: unknown unit 'XB' in '80XB' (use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)");
  CHECK(flag_error({"--device-memory", "0GiB"}) == "--device-memory: 0GiB is out of range: the memory must be more than 0 bytes");
  CHECK(flag_error({"--device-memory", "-1GiB"}).find("is not a memory size") != std::string::npos);
  CHECK(flag_error({"--device-memory", "99999999999TiB"}).find("at most 2^63 bytes") != std::string::npos);
}

TEST_CASE("train options: -e's help and the unknown-descriptor error list the shapes of gpt2_shapes.def") {
  // The names, read from the table itself rather than from the code under test.
  std::vector<std::string> names;
  std::ifstream def("llmc/gpt2_shapes.def");
  REQUIRE(def.good());
  const std::string row = "GPT2_SHAPE(";
  for (std::string line; std::getline(def, line);)
    if (starts_with(line, row)) names.push_back(line.substr(row.size(), line.find(',') - row.size()));
  REQUIRE(names.size() >= 5);
  std::string joined;
  for (const std::string& name : names) joined += (joined.empty() ? "" : "|") + name;
  const std::string usage = llmc::train_usage("train_gpt2");
  CHECK(usage.find("descriptor " + joined + "|L<l>H<h>C<c>[T<t>]") != std::string::npos);

  llmc::TrainOptions o;
  o.model = "d13";
  const std::string error = test_support::thrown_message([&] { llmc::resolve_model_config(o); });
  CHECK(starts_with(error, "-e: 'd13' is neither a model file (no such file) nor a model descriptor ("));
  std::string listed;
  for (const std::string& name : names) listed += (listed.empty() ? "" : ", ") + name;
  CHECK_MESSAGE(error.find("(" + listed + " or L<layers>H<heads>C<channels>[T<seq>])") != std::string::npos, error);
  o.model = "d12";
  CHECK(llmc::resolve_model_config(o).channels == 768);
}

TEST_CASE("train options: -sh's help says that llm.c shuffles too") {
  const std::string usage = llmc::train_usage("train_gpt2");
  const size_t start = usage.find("\n  -sh <0|1> ");
  REQUIRE(start != std::string::npos);
  const std::string line = usage.substr(start + 1, usage.find('\n', start + 1) - start - 1);
  CHECK_MESSAGE(line.find(" shuffle the train data every epoch, as llm.c always does") != std::string::npos, line);
  CHECK(usage.find("llm.c's sequential order") == std::string::npos);
}

TEST_CASE("llm.c's flags: -w 1 and -lg 0/-1 are what every run does; -w 0, -lg N > 0 and -ge 1 are refused") {
  CHECK(flag_error({"-w", "1"}).empty());
  CHECK(flag_error({"-lg", "0"}).empty());
  CHECK(flag_error({"-lg", "-1"}).empty());
  CHECK(starts_with(flag_error({"-w", "0"}), "-w: 0 (no fp32 master weights) is not offered"));
  const std::string lg = flag_error({"-lg", "10"});
  CHECK(starts_with(lg, "-lg: 10: this trainer prints no NVML GPU line"));
  CHECK(lg.find("nvidia-smi") != std::string::npos);
  const std::string ge = flag_error({"-ge", "1"});
  CHECK(starts_with(ge, "-ge: 1 (GELU fused into the forward GEMM only) has no counterpart here"));
  CHECK(ge.find("-ge 2 (LLMC_GELU=epilogues") != std::string::npos);
}

namespace {

// Runs f with LLMC_GELU set to value (nullptr: unset), then unsets it.
template <typename F>
void with_llmc_gelu(const char* value, F&& f) {
  if (value) ::setenv("LLMC_GELU", value, 1);
  else ::unsetenv("LLMC_GELU");
  f();
  ::unsetenv("LLMC_GELU");
}

llmc::SpeedSwitches speed_for(const std::vector<std::string>& args) {
  return llmc::cuda_speed_switches(parse_train_options(args));
}

}  // namespace

TEST_CASE("llm.c's flags: -ge maps onto LLMC_GELU: 0 = kernels, 2 = epilogues; not given = the environment's") {
  CHECK(llmc::gelu_path_for_fusion(0) == llmc::GeluPath::kKernels);
  CHECK(llmc::gelu_path_for_fusion(2) == llmc::GeluPath::kEpilogues);
  with_llmc_gelu(nullptr, [] {
    CHECK(speed_for({}).gelu == llmc::GeluPath::kMixed);
    CHECK(speed_for({"-ge", "0"}).gelu == llmc::GeluPath::kKernels);
    CHECK(speed_for({"-ge", "2", "-r", "0"}).gelu == llmc::GeluPath::kEpilogues);
    CHECK(speed_for({"-ge", "2", "-r", "auto"}).gelu == llmc::GeluPath::kEpilogues);
  });
  with_llmc_gelu("epilogues", [] {
    CHECK(speed_for({"-r", "0"}).gelu == llmc::GeluPath::kEpilogues);
    CHECK(speed_for({"-ge", "2", "-r", "0"}).gelu == llmc::GeluPath::kEpilogues);  // both given, agreeing
  });
  with_llmc_gelu("", [] { CHECK(speed_for({"-ge", "0"}).gelu == llmc::GeluPath::kKernels); });  // empty = unset
}

TEST_CASE("llm.c's flags: -ge and LLMC_GELU disagreeing, and -ge 2 with a recompute, are errors") {
  with_llmc_gelu("epilogues", [] {
    const std::string error = test_support::thrown_message<llmc::FlagError>([] { speed_for({"-ge", "0"}); });
    CHECK(error == "-ge: 0 means LLMC_GELU=kernels, but the environment sets LLMC_GELU=epilogues: give one of the "
                   "two, or the same choice in both");
  });
  with_llmc_gelu("mixed", [] {
    CHECK(starts_with(test_support::thrown_message<llmc::FlagError>([] { speed_for({"-ge", "2", "-r", "0"}); }),
                      "-ge: 2 means LLMC_GELU=epilogues, but the environment sets LLMC_GELU=mixed"));
  });
  with_llmc_gelu(nullptr, [] {
    for (const char* r : {"1", "2"}) {
      const std::string error = test_support::thrown_message<llmc::FlagError>([&] { speed_for({"-ge", "2", "-r", r}); });
      CHECK_MESSAGE(starts_with(error, "-ge: 2 (LLMC_GELU=epilogues) stores the GELU output"), error);
      CHECK(error.find(std::string("not -r ") + r) != std::string::npos);
    }
  });
}

TEST_CASE("llm.c's flags: -f 1 is refused by the FP32 build only; -f 0 and no -f are accepted by both") {
  const auto tf32_error = [](const std::vector<std::string>& args, bool fp32_build) {
    return test_support::error_message<llmc::FlagError>(
        [&] { llmc::check_tf32_flag(parse_train_options(args), fp32_build); });
  };
  CHECK(starts_with(tf32_error({"-f", "1"}, true), "-f: 1 (TF32 for fp32 matmuls) is not offered: this FP32 build"));
  CHECK(tf32_error({"-f", "0"}, true).empty());
  CHECK(tf32_error({}, true).empty());
  CHECK(tf32_error({"-f", "1"}, false).empty());
  CHECK(tf32_error({"-f", "0"}, false).empty());
}
