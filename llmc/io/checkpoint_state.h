// The optimizer and loop state of a checkpoint, one file per rank next to the model file:
// DIR/state_%08d_%05d.bin (step, rank). Layout, all little-endian:
//   64 uint64 header: [0]=kStateMagic [1]=kStateVersion [2]=step [3]=world size [4]=rank
//     [5]=B [6]=T [7]=shuffle [8]=seed [9]=loader epoch [10]=loader shard [11]=loader step
//     [12]=loader epoch Rng state [13]=sampling Rng state [14]=number of model parameters
//     [15]=first parameter of this rank's optimizer state [16]=number n of parameters it covers
//     [17]=Checksum64 of the checkpoint's model file (0 = none) [18]=number of loss-window values a
//     [19]=number of grad-norm-window values b [20]=Checksum64 of this file's bytes with word [20]
//     read as 0 [21]=number of bytes c of the backend's kernel choices [22]=number of bytes d of the
//     backend's scaling state; the rest 0
//   then the optimizer's state tensors, n fp32 each, in the order of its registration
//   (llmc/optim/registry.h; AdamW: m, then v), the loss outlier window (a fp32, oldest first), the
//   grad-norm outlier window (b fp32), then the kernel choices (c bytes, Backend::kernel_choices:
//   the CUDA backend's GEMM algorithm table of llmc/cuda/gemm_table.h with LLMC_GEMM_SEARCH=timed;
//   only rank 0's file holds them, c = 0 elsewhere and without timed choices), then the scaling state
//   (d bytes, Backend::scaling_state: the CUDA backend's FP8 scales and amax history with --fp8 1,
//   each rank's own in its own file; d = 0 without). The file does not name the optimizer: the
//   reader says which tensors it expects.
// With one rank (or ZeRO off) a file holds the state of all parameters: offset 0, n = their number.
// Version 3 files (word 22 zero, no scaling state), version 2 files (words 21-22 zero, no kernel
// choices) and version 1 files (words 17-22 zero, no windows) are still read; version 1 files carry
// no checksums.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "llmc/data/dataloader.h"
#include "llmc/optim/optimizer.h"

namespace llmc {

constexpr uint64_t kStateMagic = 20240527;
constexpr uint64_t kStateVersion = 4;
constexpr int kStateHeaderWords = 64;
// A bound on TrainState::kernel_choices, so that a corrupt header cannot ask for any size: a GEMM
// algorithm table holds a few dozen shapes of 160 bytes.
constexpr uint64_t kMaxKernelChoiceBytes = uint64_t(1) << 20;
// Likewise for TrainState::scaling_state: the FP8 state of a 48-layer model is about 40 KiB.
constexpr uint64_t kMaxScalingStateBytes = uint64_t(1) << 24;

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
  // The parameters [state_offset, state_offset + state_size) whose optimizer state this file holds:
  // each tensor of optimizer_state has state_size values.
  uint64_t state_offset = 0;
  uint64_t state_size = 0;
  std::vector<OptimizerTensor> optimizer_state;
  uint64_t model_checksum = 0;  // of the model file written with this state; 0 = not recorded
  std::vector<float> loss_window, norm_window;  // OutlierDetector::values(), at most 100 each
  // Backend::kernel_choices() (rank 0's file; empty: none), at most kMaxKernelChoiceBytes.
  std::vector<uint8_t> kernel_choices;
  // Backend::scaling_state() of this file's rank (empty: none), at most kMaxScalingStateBytes.
  std::vector<uint8_t> scaling_state;
};

// Writes crash-safely (write_file_atomically); throws std::runtime_error naming the file, and
// std::invalid_argument when a state tensor does not have state_size values.
void write_train_state(const std::string& path, const TrainState& state);
// Reads a file whose optimizer state is the tensors `state_names` (the optimizer's, in order).
// Throws std::runtime_error naming the file on a bad magic/version, a size that does not match
// the header and those tensors, inconsistent fields, or a checksum that does not match the bytes
// (a corrupt file).
TrainState read_train_state(const std::string& path, const std::vector<std::string>& state_names);

}  // namespace llmc
