// -y 1 as llm.c has it: nothing to resume starts from step 0, DONE markers of which none verifies
// stop the run, and a finished run leaves DONE_<last step> (what scripts/run_gpt2_124M.sh waits for).
// A tiny model (L1H2C16T32) on the CPU backend, with shards written here.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "llmc/cpu/cpu_backend.h"
#include "llmc/data/shard.h"
#include "llmc/dist/communicator.h"
#include "llmc/io/checkpoint_files.h"
#include "llmc/train/trainer.h"
#include "llmc/train/trainer_main.h"
#include "llmc/train/watchdog.h"
#include "tests/unit/test_support.h"

namespace fs = std::filesystem;

namespace {

// A directory with one train shard of 2,000 tokens (62 windows of B*T = 2*16).
struct TinyRun {
  test_support::TempDir dir;
  TinyRun() {
    std::vector<uint16_t> tokens(2000);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = uint16_t(i * 7919 % 50257);
    llmc::write_shard(dir.file("train_000000.bin"), tokens.data(), tokens.size());
  }
  // The options of a 4-step run into out_dir; `more` are appended.
  llmc::TrainOptions options(const std::string& out_dir, std::vector<std::string> more) const {
    std::vector<std::string> args = {"-i", dir.file("train_*.bin"), "-e", "L1H2C16T32", "-b", "2", "-t", "16",
                                     "-x", "4", "-v", "0", "-s", "0", "-o", out_dir};
    args.insert(args.end(), more.begin(), more.end());
    return llmc::parse_train_options(args);
  }
};

// Builds the Trainer (which resumes when -y 1 is set) and, with `train`, runs it on the CPU backend.
void run_trainer(const llmc::TrainOptions& o, bool train) {
  llmc::SingleProcessCommunicator host;
  llmc::Watchdog watchdog(0.0, "", [](const std::string&) {});
  llmc::Trainer trainer(o, llmc::resolve_model(o), host, llmc::ProcessLayout{}, watchdog);
  if (!train) return;
  trainer.run([](const llmc::GPT2Config& config, const llmc::TrainOptions& options,
                 const llmc::BackendPlacement& placement) {
    return std::make_unique<llmc::CpuBackend>(config, placement.partition, llmc::find_optimizer(options.optimizer));
  });
}

}  // namespace

TEST_CASE("resume: -y 1 without any checkpoint starts from step 0, in a new dir and in an empty one") {
  const TinyRun run;
  const std::string fresh = run.dir.file("not_there_yet");
  CHECK_NOTHROW(run_trainer(run.options(fresh, {"-y", "1"}), false));
  CHECK(fs::is_directory(fresh));
  const std::string empty = run.dir.file("empty");
  fs::create_directories(empty);
  test_support::write_bytes(empty + "/main.log", "s:0 trl:9.000000 lr:1.000000e-04 norm:1.000000\n");
  CHECK_NOTHROW(run_trainer(run.options(empty, {"-y", "1"}), false));
  // A fresh start owns its log: the lines of a run killed before its first checkpoint are gone.
  CHECK(test_support::read_bytes(empty + "/main.log").empty());
}

TEST_CASE("resume: DONE markers of which none verifies are an error, never a silent start from step 0") {
  const TinyRun run;
  const std::string out = run.dir.file("damaged");
  fs::create_directories(out);
  llmc::write_done_marker(out, 3);  // a marker without its model and state files
  llmc::write_done_marker(out, 2);
  const std::string error = test_support::thrown_message<llmc::FlagError>(
      [&] { run_trainer(run.options(out, {"-y", "1"}), false); });
  CHECK(test_support::starts_with(error, "-y: none of the 2 checkpoint(s) in '" + out + "'"));
  CHECK(test_support::contains(error, "newest step 3"));
  CHECK(test_support::contains(error, "not starting from step 0"));
}

TEST_CASE("resume: a run with -o and -n ends with DONE_<last step>, whatever -n; resuming it trains nothing") {
  const TinyRun run;
  const std::string out = run.dir.file("out");
  run_trainer(run.options(out, {"-n", "3"}), true);  // checkpoints at 3 and at the last step, 4
  CHECK(llmc::completed_checkpoints(out) == std::vector<int>{4, 3});
  const std::string log = test_support::read_bytes(out + "/main.log");
  run_trainer(run.options(out, {"-n", "3", "-y", "1"}), true);
  CHECK(llmc::completed_checkpoints(out) == std::vector<int>{4, 3});
  CHECK(test_support::read_bytes(out + "/main.log") == log);
}
