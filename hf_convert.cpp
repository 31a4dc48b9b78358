// hf_convert: moves GPT-2 weights between our model files and Hugging Face's GPT2LMHeadModel
// format (config.json + model.safetensors), and dumps our CPU forward pass's logits so that the
// two implementations can be compared (dev/hf_parity.py). See docs/interop.md.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "llmc/cpu/cpu_backend.h"
#include "llmc/gpt2.h"
#include "llmc/io/hf_gpt2.h"
#include "llmc/io/model_file.h"

namespace {

const char* kUsage = R"(usage: ./hf_convert COMMAND ...

commands:
  export MODEL.bin OUT_DIR [--dtype float32|bfloat16]
        write OUT_DIR/config.json and OUT_DIR/model.safetensors for transformers'
        GPT2LMHeadModel (default dtype float32; bfloat16 rounds to nearest even)
  import HF_DIR OUT.bin [--bf16]
        read HF_DIR/config.json and HF_DIR/model.safetensors (F32, BF16 or F16 tensors) into a
        model file: version 3 (fp32), or version 5 (bf16) with --bf16
  logits MODEL.bin OUT.f32 TOKEN...
        run our CPU forward pass on the T given token ids and write the T x vocab_size logits
        (row t predicts the token after position t) as raw little-endian float32
  --help
        print this help
)";

[[noreturn]] void usage_error(const std::string& what) {
  throw std::runtime_error(fmt::format("{} (see ./hf_convert --help)", what));
}

int parse_token(const std::string& s, int vocab_size) {
  size_t used = 0;
  long value = -1;
  try {
    value = std::stol(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || s.empty() || value < 0 || value >= vocab_size)
    usage_error(fmt::format("logits: token '{}' is not an integer in 0..{}", s, vocab_size - 1));
  return int(value);
}

void run_export(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  llmc::DType dtype = llmc::DType::F32;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--dtype") {
      if (i + 1 >= args.size()) usage_error("--dtype needs a value");
      const std::string v = args[++i];
      if (v == "float32")
        dtype = llmc::DType::F32;
      else if (v == "bfloat16")
        dtype = llmc::DType::BF16;
      else
        usage_error(fmt::format("--dtype '{}' is not float32 or bfloat16", v));
    } else if (args[i].rfind("--", 0) == 0) {
      usage_error(fmt::format("export: unknown option {}", args[i]));
    } else {
      positional.push_back(args[i]);
    }
  }
  if (positional.size() != 2) usage_error("export needs MODEL.bin and OUT_DIR");
  llmc::export_hf(positional[0], positional[1], dtype);
  fmt::print("exported {} to {}/config.json and {}/model.safetensors ({})\n", positional[0], positional[1],
             positional[1], dtype == llmc::DType::BF16 ? "bfloat16" : "float32");
}

void run_import(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  int version = llmc::kModelVersionFp32;
  for (const std::string& a : args) {
    if (a == "--bf16")
      version = llmc::kModelVersionBf16;
    else if (a.rfind("--", 0) == 0)
      usage_error(fmt::format("import: unknown option {}", a));
    else
      positional.push_back(a);
  }
  if (positional.size() != 2) usage_error("import needs HF_DIR and OUT.bin");
  llmc::import_hf(positional[0], positional[1], version);
  fmt::print("imported {} into {} (version {})\n", positional[0], positional[1], version);
}

void run_logits(const std::vector<std::string>& args) {
  if (args.size() < 3) usage_error("logits needs MODEL.bin, OUT.f32 and at least one token");
  const llmc::ModelFile model = llmc::load_model(args[0]);
  const llmc::GPT2Config& config = model.config;
  std::vector<int> tokens;
  for (size_t i = 2; i < args.size(); ++i) tokens.push_back(parse_token(args[i], config.vocab_size));
  const int T = int(tokens.size());
  if (T > config.max_seq_len)
    usage_error(fmt::format("logits: {} tokens exceed the model's max_seq_len {}", T, config.max_seq_len));

  llmc::CpuBackend backend(config);
  backend.set_parameters(model.params.data());
  const float* logits = backend.forward_logits(tokens.data(), 1, T);

  std::ofstream out(args[1], std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(fmt::format("{}: cannot create: {}", args[1], std::strerror(errno)));
  // Drop the padded vocabulary columns: the HF model has only the real ones.
  for (int t = 0; t < T; ++t)
    out.write(reinterpret_cast<const char*>(logits + size_t(t) * config.padded_vocab_size),
              std::streamsize(sizeof(float) * config.vocab_size));
  out.close();
  if (!out) throw std::runtime_error(fmt::format("{}: write error", args[1]));
  fmt::print("wrote {} x {} float32 logits to {}\n", T, config.vocab_size, args[1]);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) usage_error("missing command");
    const std::string command = argv[1];
    const std::vector<std::string> args(argv + 2, argv + argc);
    if (command == "--help" || command == "-h") {
      fmt::print("{}", kUsage);
    } else if (command == "export") {
      run_export(args);
    } else if (command == "import") {
      run_import(args);
    } else if (command == "logits") {
      run_logits(args);
    } else {
      usage_error(fmt::format("unknown command '{}'", command));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
