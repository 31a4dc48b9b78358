// GPT-2 model files, llm.c's checkpoint format (docs/contract.md): a header, then the parameters in
// fp32 or bf16. Reading, and crash-safe writing.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "llmc/gpt2.h"

namespace llmc {

constexpr int kModelVersionFp32 = 3;
constexpr int kModelVersionBf16 = 5;

struct ModelFile {
  GPT2Config config;
  int version = kModelVersionFp32;  // the version it was stored with
  std::vector<float> params;        // always fp32 in memory
};
// Reads a version 3 (fp32) or 5 (bf16) model file; throws std::runtime_error naming the file on a
// bad magic/version/shape or a size that does not match the header.
ModelFile load_model(const std::string& path);
// The shape in a model file's header, with the same checks as load_model (magic, version, shape,
// file size), without reading the parameters.
GPT2Config load_model_config(const std::string& path);
// Writes crash-safely (path + ".tmp", fsync, rename, fsync of the directory: see
// llmc/io/checkpoint_files.h); version 5 rounds to bf16 to nearest even. Returns the Checksum64 of
// the file's bytes (checkpoints store it in their state file; the model file format has no room
// reserved for it and stays byte-identical to llm.c's). Throws std::runtime_error naming the file.
uint64_t save_model(const std::string& path, const GPT2Config& config, const float* params, int version);

}  // namespace llmc
