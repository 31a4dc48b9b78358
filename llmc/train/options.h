// The trainer's command-line flags (llm.c-compatible short flags, listed in the README), shared by the CPU
// trainer (train_gpt2.cpp) and the CUDA trainer. Parsing checks each value on its own; checks
// that need the model or the data (T against max_seq_len, -d against B*T*ranks, shard sizes) are
// made by the training loop, and name the flag too.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace llmc {

// A bad command line; the message names the flag.
class FlagError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The parsed flags. Each field but `help` has one row in train_flags(), named in its comment (-w
// and -lg have rows without fields: they accept only what every run does); the
// default constructor sets every such field by parsing its row's default text, so `TrainOptions o;`
// means "all defaults", exactly as --help prints them.
struct TrainOptions {
  TrainOptions();

  std::string train_glob;          // -i
  std::string val_glob;            // -j
  std::string model;               // -e: model file or descriptor
  std::string output_dir;          // -o: empty = no log, no checkpoints
  int batch_size;                  // -b
  int seq_len;                     // -t
  int64_t total_batch_tokens;      // -d: -1 = B*T*ranks
  int max_steps;                   // -x: -1 = one epoch of the train data
  float learning_rate;             // -l
  int warmup_steps;                // -u
  float final_lr_frac;             // -q
  std::string lr_schedule;         // -k: cosine, linear, constant, wsd
  float weight_decay;              // -c
  std::string optimizer;           // --optimizer: a registered one (llmc/optim/registry.h)
  int val_every;                   // -v: 0 = never
  int val_max_steps;               // -m: -1 = the whole val set
  int sample_every;                // -s: 0 = never
  int gen_tokens;                  // -g
  int checkpoint_every;            // -n: 0 = off
  int keep_checkpoints;            // -nk: keep the newest N, 0 = all
  int major_checkpoint_every;      // -nm: steps % M == 0 are never deleted
  bool resume;                     // -y
  int zero_stage;                  // -z
  bool overlap;                    // --overlap
  int recompute;                   // -r: 0, 1, 2 or kRecomputeAuto (llmc/backend.h)
  bool fp8;                        // --fp8: FP8 matmuls for the layers' linear layers (CUDA, sm_89+)
  int gelu_fusion;                 // -ge: llm.c's GELU fusion, 0 or 2; -1 = not given (LLMC_GELU decides)
  int tf32;                        // -f: llm.c's TF32 switch, 0 or 1; -1 = not given
  bool overfit_single_batch;       // -a
  bool hellaswag;                  // -h
  std::string hellaswag_file;      // --hellaswag-file
  float skip_loss_z;               // -sl: 0 = off
  float skip_norm_z;               // -sg: 0 = off
  bool shuffle;                    // -sh
  uint64_t seed;                   // --seed
  float temperature;               // --temperature: 0 = greedy
  int top_k;                       // --top-k: 0 = off
  double step_timeout;             // --step-timeout: seconds without progress before the job ends, 0 = off
  uint64_t device_memory;          // --device-memory: bytes per GPU to plan against; 0 = the GPU's free memory
  int dry_run_ranks;               // --dry-run: print the memory plan for this many ranks and exit; 0 = train
  std::string init_method;         // -pi: mpi, tcp or fs (llmc/dist/rank_options.h)
  std::string fs_dir;              // -pf: "" = none
  std::string server;              // -ps: host[:port], "" = none
  int num_processes;               // -pn: 0 = from the launcher
  int process_rank;                // -pr: -1 = from the launcher
  int gpus_per_node;               // -pg
  bool help = false;               // --help: takes no value, so it has no row
};

// One flag: everything the parser, the defaults and --help know about it.
struct FlagSpec {
  const char* name;          // "-b"
  const char* value_name;    // "<int>", shown by --help
  const char* default_text;  // the default as typed on the command line; "" = none
  const char* help;          // the meaning, shown by --help
  // Parses and range-checks `value` into the flag's field; throws FlagError naming `flag`.
  void (*set)(TrainOptions& options, const std::string& flag, const std::string& value);
};

// A memory size such as "80GiB", "40GB", "81920MiB" or "1.5TiB": a decimal number and a unit, B, KB,
// MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024); the bytes, rounded down.
// Throws FlagError naming `flag` for a missing number or unit, an unknown unit, zero, or more than
// 2^63 bytes.
uint64_t parse_memory_size(const std::string& flag, const std::string& text);

// Every flag that takes a value, in --help order.
const std::vector<FlagSpec>& train_flags();

// Parses argv[1..argc-1]; throws FlagError naming the flag for an unknown flag, a missing value,
// a malformed number or a value out of range. With --help anywhere, returns with help = true.
TrainOptions parse_train_options(int argc, const char* const* argv);
TrainOptions parse_train_options(const std::vector<std::string>& args);

// The --help text: every flag with its meaning and default.
std::string train_usage(const std::string& program);

}  // namespace llmc
