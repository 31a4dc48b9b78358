// The trainer's command-line flags (DESIGN.md §2, llm.c-compatible short flags), shared by the CPU
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

struct TrainOptions {
  std::string train_glob = "data/corpus/corpus_train_*.bin";  // -i
  std::string val_glob = "data/corpus/corpus_val_*.bin";      // -j
  std::string model = "d12";                                   // -e: model file or descriptor
  std::string output_dir;                                      // -o: empty = no log, no checkpoints
  int batch_size = 4;                                          // -b: micro batch per rank
  int seq_len = 1024;                                          // -t
  int64_t total_batch_tokens = -1;                             // -d: -1 = B*T*ranks
  int max_steps = -1;                                          // -x: -1 = one epoch of the train data
  float learning_rate = 3e-4f;                                 // -l
  int warmup_steps = 0;                                        // -u
  float final_lr_frac = 1.0f;                                  // -q
  std::string lr_schedule = "cosine";                          // -k: cosine, linear, constant, wsd
  float weight_decay = 0.0f;                                   // -c
  int val_every = 20;                                          // -v: 0 = never
  int val_max_steps = 20;                                      // -m: -1 = the whole val set
  int sample_every = 20;                                       // -s: 0 = never
  int gen_tokens = 64;                                         // -g
  int checkpoint_every = 0;                                    // -n: 0 = off
  int keep_checkpoints = 0;                                    // -nk: keep the newest N, 0 = all
  int major_checkpoint_every = 0;                              // -nm: steps % M == 0 are never deleted
  bool resume = false;                                         // -y
  int zero_stage = 0;                                          // -z
  int recompute = 1;                                           // -r
  bool overfit_single_batch = false;                           // -a
  bool hellaswag = false;                                      // -h
  std::string hellaswag_file = "data/hellaswag/hellaswag_val.bin";  // --hellaswag-file
  float skip_loss_z = 0.0f;                                    // -sl: 0 = off
  float skip_norm_z = 0.0f;                                    // -sg: 0 = off
  bool shuffle = true;                                         // -sh
  uint64_t seed = 1337;                                        // --seed
  float temperature = 1.0f;                                    // --temperature: 0 = greedy
  int top_k = 0;                                               // --top-k: 0 = off
  bool help = false;                                           // --help
};

// Parses argv[1..argc-1]; throws FlagError naming the flag for an unknown flag, a missing value,
// a malformed number or a value out of range. With --help anywhere, returns with help = true.
TrainOptions parse_train_options(int argc, const char* const* argv);
TrainOptions parse_train_options(const std::vector<std::string>& args);

// The --help text: every flag with its meaning and default.
std::string train_usage(const std::string& program);

}  // namespace llmc
