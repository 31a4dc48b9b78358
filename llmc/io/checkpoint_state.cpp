#include "llmc/io/checkpoint_state.h"

#include "llmc/io/checkpoint_files.h"

#include <algorithm>
#include <cstdio>
#include <fmt/format.h>
#include <iterator>
#include <stdexcept>

namespace llmc {

namespace {

constexpr int kChecksumWord = 20;
constexpr int kKernelChoicesWord = 21;
constexpr int kScalingStateWord = 22;

// The arrays after the header, in file order: pointers to const for a TrainState that is.
template <class State>
auto payload_of(State& s) {
  std::vector<decltype(&s.loss_window)> payload;
  for (auto& t : s.optimizer_state) payload.push_back(&t.values);
  payload.push_back(&s.loss_window);
  payload.push_back(&s.norm_window);
  return payload;
}

// The checksum of the header (word kChecksumWord read as 0) and the payload.
uint64_t state_checksum(const uint64_t (&header)[kStateHeaderWords], const TrainState& s) {
  uint64_t h[kStateHeaderWords];
  std::copy(std::begin(header), std::end(header), h);
  h[kChecksumWord] = 0;
  Checksum64 checksum;
  checksum.update(h, sizeof h);
  for (const auto* p : payload_of(s)) checksum.update(p->data(), p->size() * sizeof(float));
  if (!s.kernel_choices.empty()) checksum.update(s.kernel_choices.data(), s.kernel_choices.size());
  if (!s.scaling_state.empty()) checksum.update(s.scaling_state.data(), s.scaling_state.size());
  return checksum.digest();
}

void read_bytes(FILE* f, void* data, size_t bytes, const std::string& path) {
  if (bytes > 0 && std::fread(data, 1, bytes, f) != bytes)
    throw std::runtime_error(fmt::format("{}: unexpected end of file", path));
}

}  // namespace

void write_train_state(const std::string& path, const TrainState& s) {
  for (const OptimizerTensor& t : s.optimizer_state)
    if (t.values.size() != s.state_size)
      throw std::invalid_argument(fmt::format("{}: optimizer state tensor {} has {} entries, not {}", path, t.name,
                                              t.values.size(), s.state_size));
  if (s.kernel_choices.size() > kMaxKernelChoiceBytes)
    throw std::invalid_argument(fmt::format("{}: {} bytes of kernel choices, more than the {} a state file holds", path,
                                            s.kernel_choices.size(), kMaxKernelChoiceBytes));
  if (s.scaling_state.size() > kMaxScalingStateBytes)
    throw std::invalid_argument(fmt::format("{}: {} bytes of scaling state, more than the {} a state file holds", path,
                                            s.scaling_state.size(), kMaxScalingStateBytes));
  uint64_t h[kStateHeaderWords] = {};
  h[0] = kStateMagic;
  h[1] = kStateVersion;
  h[2] = uint64_t(s.step);
  h[3] = uint64_t(s.world_size);
  h[4] = uint64_t(s.rank);
  h[5] = uint64_t(s.batch_size);
  h[6] = uint64_t(s.seq_len);
  h[7] = s.shuffle ? 1 : 0;
  h[8] = s.seed;
  h[9] = uint64_t(s.loader.epoch);
  h[10] = uint64_t(s.loader.shard);
  h[11] = uint64_t(s.loader.step);
  h[12] = s.loader.epoch_rng_state;
  h[13] = s.sample_rng_state;
  h[14] = s.num_parameters;
  h[15] = s.state_offset;
  h[16] = s.state_size;
  h[17] = s.model_checksum;
  h[18] = s.loss_window.size();
  h[19] = s.norm_window.size();
  h[kKernelChoicesWord] = s.kernel_choices.size();
  h[kScalingStateWord] = s.scaling_state.size();
  h[kChecksumWord] = state_checksum(h, s);
  write_file_atomically(path, [&](FILE* f) {
    bool ok = std::fwrite(h, 1, sizeof h, f) == sizeof h;
    for (const auto* p : payload_of(s))
      ok = ok && std::fwrite(p->data(), sizeof(float), p->size(), f) == p->size();
    for (const std::vector<uint8_t>* bytes : {&s.kernel_choices, &s.scaling_state})
      ok = ok && (bytes->empty() || std::fwrite(bytes->data(), 1, bytes->size(), f) == bytes->size());
    return ok;
  });
}

TrainState read_train_state(const std::string& path, const std::vector<std::string>& state_names) {
  const FileHandle f = open_for_reading(path);
  uint64_t h[kStateHeaderWords];
  if (std::fread(h, 1, sizeof h, f.get()) != sizeof h)
    throw std::runtime_error(fmt::format("{}: shorter than the {}-byte train state header", path, sizeof h));
  if (h[0] != kStateMagic)
    throw std::runtime_error(fmt::format("{}: bad magic {} (expected {}): not a train state file", path, h[0], kStateMagic));
  if (h[1] < 1 || h[1] > kStateVersion)
    throw std::runtime_error(fmt::format("{}: unsupported train state version {} (expected 1 to {})", path, h[1],
                                         kStateVersion));
  const uint64_t n = h[16];
  const uint64_t windows = h[18] + h[19];
  if (h[3] < 1 || h[4] >= h[3] || h[5] < 1 || h[6] < 1 || h[7] > 1 || h[15] > h[14] || n > h[14] - h[15] ||
      h[2] > uint64_t(INT32_MAX) || h[5] > uint64_t(INT32_MAX) || h[6] > uint64_t(INT32_MAX) ||
      h[3] > uint64_t(INT32_MAX) || h[18] > 100 || h[19] > 100 || (h[1] == 1 && (windows != 0 || h[17] != 0)) ||
      h[kKernelChoicesWord] > kMaxKernelChoiceBytes || (h[1] < 3 && h[kKernelChoicesWord] != 0) ||
      h[kScalingStateWord] > kMaxScalingStateBytes || (h[1] < 4 && h[kScalingStateWord] != 0))
    throw std::runtime_error(fmt::format("{}: inconsistent train state header", path));
  if (std::fseek(f.get(), 0, SEEK_END) != 0) throw std::runtime_error(fmt::format("{}: cannot seek", path));
  const long size = std::ftell(f.get());
  const uint64_t expected = sizeof h + (state_names.size() * n + windows) * sizeof(float) + h[kKernelChoicesWord] +
                            h[kScalingStateWord];
  if (size < 0 || uint64_t(size) != expected)
    throw std::runtime_error(fmt::format("{}: header says {} tensor(s) of optimizer state over {} parameters, {} "
                                         "bytes of kernel choices and {} of scaling state ({} bytes in all) but the "
                                         "file has {} bytes",
                                         path, state_names.size(), n, h[kKernelChoicesWord], h[kScalingStateWord],
                                         expected, size));
  std::fseek(f.get(), long(sizeof h), SEEK_SET);
  TrainState s;
  s.step = int64_t(h[2]);
  s.world_size = int(h[3]);
  s.rank = int(h[4]);
  s.batch_size = int(h[5]);
  s.seq_len = int(h[6]);
  s.shuffle = h[7] == 1;
  s.seed = h[8];
  s.loader.epoch = int64_t(h[9]);
  s.loader.shard = int64_t(h[10]);
  s.loader.step = int64_t(h[11]);
  s.loader.epoch_rng_state = h[12];
  s.sample_rng_state = h[13];
  s.num_parameters = h[14];
  s.state_offset = h[15];
  s.state_size = n;
  for (const std::string& name : state_names) s.optimizer_state.push_back({name, std::vector<float>(n)});
  s.model_checksum = h[17];
  s.loss_window.resize(h[18]);
  s.norm_window.resize(h[19]);
  s.kernel_choices.resize(h[kKernelChoicesWord]);
  s.scaling_state.resize(h[kScalingStateWord]);
  for (std::vector<float>* p : payload_of(s)) read_bytes(f.get(), p->data(), p->size() * sizeof(float), path);
  read_bytes(f.get(), s.kernel_choices.data(), s.kernel_choices.size(), path);
  read_bytes(f.get(), s.scaling_state.data(), s.scaling_state.size(), path);
  if (h[1] >= 2) {
    const uint64_t stored = h[kChecksumWord], computed = state_checksum(h, s);
    if (computed != stored)
      throw std::runtime_error(fmt::format("{}: checksum mismatch (stored {:016x}, computed {:016x}): the file is corrupt",
                                           path, stored, computed));
  }
  return s;
}

}  // namespace llmc
