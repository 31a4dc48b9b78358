#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "llmc/gpt2.h"
#include "llmc/train/options.h"
#include "llmc/train/trainer_main.h"

using llmc::parse_train_options;

namespace {

// The message of the FlagError that parsing args throws, or "" if it parses.
std::string flag_error(const std::vector<std::string>& args) {
  try {
    parse_train_options(args);
  } catch (const llmc::FlagError& e) {
    return e.what();
  }
  return "";
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The defaults README.md and --help promise, field by field.
void check_documented_defaults(const llmc::TrainOptions& o) {
  CHECK(o.train_glob == "data/corpus/corpus_train_*.bin");
  CHECK(o.val_glob == "data/corpus/corpus_val_*.bin");
  CHECK(o.model == "d12");
  CHECK(o.output_dir.empty());
  CHECK(o.batch_size == 4);
  CHECK(o.seq_len == 1024);
  CHECK(o.total_batch_tokens == -1);
  CHECK(o.max_steps == -1);
  CHECK(o.learning_rate == 3e-4f);
  CHECK(o.warmup_steps == 0);
  CHECK(o.final_lr_frac == 1.0f);
  CHECK(o.lr_schedule == "cosine");
  CHECK(o.weight_decay == 0.0f);
  CHECK(o.val_every == 20);
  CHECK(o.val_max_steps == 20);
  CHECK(o.sample_every == 20);
  CHECK(o.gen_tokens == 64);
  CHECK(o.checkpoint_every == 0);
  CHECK_FALSE(o.resume);
  CHECK(o.zero_stage == 0);
  CHECK(o.recompute == 1);
  CHECK_FALSE(o.overfit_single_batch);
  CHECK_FALSE(o.hellaswag);
  CHECK(o.hellaswag_file == "data/hellaswag/hellaswag_val.bin");
  CHECK(o.keep_checkpoints == 0);
  CHECK(o.major_checkpoint_every == 0);
  CHECK(o.skip_loss_z == 0.0f);
  CHECK(o.skip_norm_z == 0.0f);
  CHECK(o.shuffle);
  CHECK(o.seed == 1337);
  CHECK(o.temperature == 1.0f);
  CHECK(o.top_k == 0);
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
  const llmc::TrainOptions o = parse_train_options(std::vector<std::string>{
      "-i", "tr*.bin", "-j", "va*.bin", "-e", "model.bin", "-o", "out", "-b", "8", "-t", "128", "-d", "2048",
      "-x", "100", "-l", "1e-3", "-u", "10", "-q", "0.1", "-k", "wsd", "-c", "0.1", "-v", "5", "-m", "-1",
      "-s", "0", "-g", "16", "-n", "25", "-y", "1", "-z", "1", "-r", "2", "-a", "1", "-h", "1", "-sh", "0",
      "--seed", "7", "--temperature", "0.8", "--top-k", "40", "-nk", "3", "-nm", "100", "-sl", "5", "-sg", "4.5",
      "--hellaswag-file", "hs.bin"});
  CHECK(o.train_glob == "tr*.bin");
  CHECK(o.val_glob == "va*.bin");
  CHECK(o.model == "model.bin");
  CHECK(o.output_dir == "out");
  CHECK(o.batch_size == 8);
  CHECK(o.seq_len == 128);
  CHECK(o.total_batch_tokens == 2048);
  CHECK(o.max_steps == 100);
  CHECK(o.learning_rate == 1e-3f);
  CHECK(o.warmup_steps == 10);
  CHECK(o.final_lr_frac == 0.1f);
  CHECK(o.lr_schedule == "wsd");
  CHECK(o.weight_decay == 0.1f);
  CHECK(o.val_every == 5);
  CHECK(o.val_max_steps == -1);
  CHECK(o.sample_every == 0);
  CHECK(o.gen_tokens == 16);
  CHECK(o.checkpoint_every == 25);
  CHECK(o.resume);
  CHECK(o.zero_stage == 1);
  CHECK(o.recompute == 2);
  CHECK(o.overfit_single_batch);
  CHECK(o.hellaswag);
  CHECK(o.hellaswag_file == "hs.bin");
  CHECK(o.keep_checkpoints == 3);
  CHECK(o.major_checkpoint_every == 100);
  CHECK(o.skip_loss_z == 5.0f);
  CHECK(o.skip_norm_z == 4.5f);
  CHECK_FALSE(o.shuffle);
  CHECK(o.seed == 7);
  CHECK(o.temperature == 0.8f);
  CHECK(o.top_k == 40);
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
      {"-sg", "nan"}, {"--hellaswag-file", ""}};
  for (const auto& args : bad) {
    const std::string msg = flag_error(args);
    CHECK_MESSAGE(starts_with(msg, args[0] + ":"), args[0], " ", args[1], " -> '", msg, "'");
  }
}

TEST_CASE("train options: unknown flags and missing values") {
  CHECK(flag_error({"-w", "1"}).find("'-w'") != std::string::npos);
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
  try {
    llmc::check_options_for_model(o, config);
    FAIL("expected an error");
  } catch (const llmc::FlagError& e) {
    CHECK(starts_with(e.what(), "-t:"));
    CHECK(std::string(e.what()).find("1024") != std::string::npos);
  }
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
