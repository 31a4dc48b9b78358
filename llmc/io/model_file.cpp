#include "llmc/io/model_file.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>

#include "llmc/io/checkpoint_files.h"

namespace llmc {

namespace {

constexpr int32_t kModelMagic = 20240326;
constexpr int kModelHeaderInts = 256;
// The shape's fields in the header, from its int 2 on (docs/contract.md).
constexpr int GPT2Config::*kHeaderShape[] = {&GPT2Config::max_seq_len, &GPT2Config::vocab_size,
                                             &GPT2Config::num_layers,  &GPT2Config::num_heads,
                                             &GPT2Config::channels,    &GPT2Config::padded_vocab_size};

// Opens a model file and reads and checks its header: magic, version, shape, and that the file's
// size is the header plus exactly the parameters it implies. Returns the stream positioned at the
// parameters; `model` gets the config and version, not the parameters.
std::ifstream open_model(const std::string& path, ModelFile& model) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error(fmt::format("cannot open model file '{}'", path));
  const auto file_size = static_cast<unsigned long long>(in.tellg());
  in.seekg(0);
  const unsigned long long header_bytes = kModelHeaderInts * sizeof(int32_t);
  if (file_size < header_bytes)
    throw std::runtime_error(fmt::format("model file '{}' is {} bytes, shorter than its {}-byte header",
                                         path, file_size, header_bytes));
  int32_t header[kModelHeaderInts];
  in.read(reinterpret_cast<char*>(header), header_bytes);
  if (!in) throw std::runtime_error(fmt::format("cannot read the header of model file '{}'", path));
  if (header[0] != kModelMagic)
    throw std::runtime_error(fmt::format("model file '{}' has magic {}, expected {}: not a GPT-2 model file",
                                         path, header[0], kModelMagic));
  if (header[1] != kModelVersionFp32 && header[1] != kModelVersionBf16)
    throw std::runtime_error(fmt::format("model file '{}' has version {}, expected {} (fp32) or {} (bf16)",
                                         path, header[1], kModelVersionFp32, kModelVersionBf16));
  model.version = header[1];
  for (size_t i = 0; i < std::size(kHeaderShape); ++i) model.config.*kHeaderShape[i] = header[2 + i];
  std::string problem = shape_problem(model.config);
  if (!problem.empty())
    throw std::runtime_error(fmt::format("model file '{}' has a bad shape: {}", path, problem));

  const size_t n = num_parameters(model.config);
  const size_t bytes_per_param = model.version == kModelVersionFp32 ? 4 : 2;
  const unsigned long long expected = header_bytes + n * bytes_per_param;
  if (file_size != expected)
    throw std::runtime_error(fmt::format(
        "model file '{}' is {} bytes but its header (version {}, {} parameters) needs {} bytes",
        path, file_size, model.version, n, expected));
  return in;
}

}  // namespace

GPT2Config load_model_config(const std::string& path) {
  ModelFile model;
  open_model(path, model);
  return model.config;
}

ModelFile load_model(const std::string& path) {
  ModelFile model;
  std::ifstream in = open_model(path, model);
  const size_t n = num_parameters(model.config);
  model.params.resize(n);
  if (model.version == kModelVersionFp32) {
    in.read(reinterpret_cast<char*>(model.params.data()), std::streamsize(n * 4));
  } else {
    std::vector<uint16_t> raw(n);
    in.read(reinterpret_cast<char*>(raw.data()), std::streamsize(n * 2));
    for (size_t i = 0; i < n; ++i) model.params[i] = bf16_to_float(raw[i]);
  }
  if (!in) throw std::runtime_error(fmt::format("cannot read the parameters of model file '{}'", path));
  return model;
}

uint64_t save_model(const std::string& path, const GPT2Config& config, const float* params, int version) {
  if (version != kModelVersionFp32 && version != kModelVersionBf16)
    throw std::invalid_argument(fmt::format("cannot save model '{}' as version {}: only {} and {} exist",
                                            path, version, kModelVersionFp32, kModelVersionBf16));
  std::string problem = shape_problem(config);
  if (!problem.empty())
    throw std::invalid_argument(fmt::format("cannot save model '{}': {}", path, problem));
  int32_t header[kModelHeaderInts] = {};
  header[0] = kModelMagic;
  header[1] = version;
  for (size_t i = 0; i < std::size(kHeaderShape); ++i) header[2 + i] = config.*kHeaderShape[i];
  const size_t n = num_parameters(config);
  Checksum64 checksum;
  // Crash-safe (.tmp, fsync, rename): a checkpoint's model file is either complete or absent.
  write_file_atomically(path, [&](FILE* f) {
    const auto put = [&](const void* data, size_t bytes) {
      checksum.update(data, bytes);
      return std::fwrite(data, 1, bytes, f) == bytes;
    };
    if (!put(header, sizeof(header))) return false;
    if (version == kModelVersionFp32) return put(params, n * 4);
    std::vector<uint16_t> raw(n);
    for (size_t i = 0; i < n; ++i) raw[i] = float_to_bf16(params[i]);
    return put(raw.data(), n * 2);
  });
  return checksum.digest();
}

}  // namespace llmc
