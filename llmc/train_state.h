// The optimizer and loop state of a checkpoint, one file per rank next to the model file:
// DIR/state_%08d_%05d.bin (step, rank). Layout, all little-endian:
//   64 uint64 header: [0]=kStateMagic [1]=kStateVersion [2]=step [3]=world size [4]=rank
//     [5]=B [6]=T [7]=shuffle [8]=seed [9]=loader epoch [10]=loader shard [11]=loader step
//     [12]=loader epoch Rng state [13]=sampling Rng state [14]=number of model parameters
//     [15]=offset of this rank's moments [16]=number of moments n in this file; the rest 0
//   then AdamW m (n fp32), then AdamW v (n fp32).
// With one rank (or ZeRO off) a file holds all moments: offset 0, n = number of parameters.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "llmc/dataloader.h"

namespace llmc {

constexpr uint64_t kStateMagic = 20240527;
constexpr uint64_t kStateVersion = 1;
constexpr int kStateHeaderWords = 64;

struct TrainState {
  int64_t step = 0;  // the next step to run
  int world_size = 1;
  int rank = 0;
  int batch_size = 0;
  int seq_len = 0;
  bool shuffle = false;
  uint64_t seed = 0;
  DataLoaderPosition loader;
  uint64_t sample_rng_state = 0;
  uint64_t num_parameters = 0;
  uint64_t moment_offset = 0;
  std::vector<float> m, v;  // equal sizes
};

// Writes path + ".tmp" then renames it to path; throws std::runtime_error naming the file.
void write_train_state(const std::string& path, const TrainState& state);
// Throws std::runtime_error naming the file on a bad magic/version, a size that does not match
// the header, or inconsistent fields.
TrainState read_train_state(const std::string& path);

}  // namespace llmc
