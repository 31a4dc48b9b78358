#include "llmc/io/hf_gpt2.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "llmc/gpt2_constants.h"
#include "llmc/io/json.h"
#include "llmc/io/model_file.h"

namespace llmc {

namespace {

// One HF tensor as a slice of our parameters: our block of `shape` at `offset` floats; HF stores it
// transposed when `transposed`.
struct Mapping {
  std::string name;  // without the "transformer." prefix
  size_t offset;
  ParamShape shape;
  bool transposed;

  std::vector<size_t> hf_shape() const {
    if (shape.cols == 0) return {shape.rows};
    return transposed ? std::vector<size_t>{shape.cols, shape.rows} : std::vector<size_t>{shape.rows, shape.cols};
  }
  // Copies the tensor from our layout to HF's (to_hf) or back, transposing it when `transposed`.
  void copy(const float* src, float* dst, bool to_hf) const {
    if (!transposed) {
      std::copy(src, src + shape.numel(), dst);
      return;
    }
    const size_t rows = to_hf ? shape.rows : shape.cols, cols = to_hf ? shape.cols : shape.rows;  // src's
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
  }
};

// The HF tensors in state_dict order, each mapped onto our layout by its row of the model table
// (llmc/gpt2_params.def). HF's order is ours, except that it groups the per-layer tensors by layer:
// h.0.*, h.1.*, ... stand where our block of per-layer tensors does.
std::vector<Mapping> mappings(const GPT2Config& config) {
  const auto layout = param_layout(config);
  std::vector<Mapping> m;
  const auto map = [&](const ParamTensor& t, int layer, const std::string& name) {
    m.push_back({name, t.at(layer), {t.shape.rows - t.padding, t.shape.cols}, t.hf_transposed});
  };
  for (int i = 0; i < kNumParamTensors; ++i) {
    if (!layout[i].per_layer) {
      map(layout[i], 0, layout[i].hf_name);
    } else if (i == 0 || !layout[i - 1].per_layer) {  // the first of a block of per-layer tensors
      for (int layer = 0; layer < config.num_layers; ++layer)
        for (int j = i; j < kNumParamTensors && layout[j].per_layer; ++j)
          map(layout[j], layer, fmt::format("h.{}.{}", layer, layout[j].hf_name));
    }
  }
  return m;
}

std::string shape_string(const std::vector<size_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The positive integer value of config.json's required entry `key`.
int config_int(const json::Value& root, const std::string& key, const std::string& path) {
  const json::Value* v = root.find(key);
  if (v == nullptr) throw std::runtime_error(fmt::format("{}: missing \"{}\"", path, key));
  if (v->kind != json::Value::Kind::Number || v->number != std::floor(v->number) || v->number < 1 ||
      v->number > (1 << 30))
    throw std::runtime_error(fmt::format("{}: \"{}\" must be a positive integer", path, key));
  return int(v->number);
}

// Requires that an optional config.json entry, when present, has the value `ok` accepts.
template <typename Ok>
void check_optional(const json::Value& root, const std::string& key, const std::string& path, Ok ok,
                    const std::string& requirement) {
  const json::Value* v = root.find(key);
  if (v != nullptr && !ok(*v))
    throw std::runtime_error(fmt::format("{}: unsupported \"{}\": {}", path, key, requirement));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::vector<HfTensor> gpt2_to_hf(const GPT2Config& config, const float* params) {
  std::vector<HfTensor> out;
  for (const Mapping& m : mappings(config)) {
    HfTensor t{"transformer." + m.name, m.hf_shape(), std::vector<float>(m.shape.numel())};
    m.copy(params + m.offset, t.values.data(), true);
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<float> hf_to_gpt2(const GPT2Config& config, const SafeTensorsFile& file) {
  std::string prefix;
  if (file.find("transformer.wte.weight") != nullptr)
    prefix = "transformer.";
  else if (file.find("wte.weight") == nullptr)
    throw std::runtime_error(fmt::format(
        "{}: has neither transformer.wte.weight nor wte.weight: not a GPT-2 checkpoint", file.path));

  std::vector<float> params(num_parameters(config), 0.0f);
  std::set<std::string> used;
  for (const Mapping& m : mappings(config)) {
    const std::string name = prefix + m.name;
    const SafeTensor* t = file.find(name);
    if (t == nullptr) throw std::runtime_error(fmt::format("{}: missing tensor {}", file.path, name));
    if (t->shape != m.hf_shape())
      throw std::runtime_error(fmt::format("{}: tensor {} has shape {}, config.json implies {}", file.path, name,
                                           shape_string(t->shape), shape_string(m.hf_shape())));
    m.copy(file.to_float(*t).data(), params.data() + m.offset, false);
    used.insert(name);
  }

  for (const SafeTensor& t : file.tensors) {
    if (used.count(t.name)) continue;
    if (t.name == "lm_head.weight") {
      const SafeTensor& wte = *file.find(prefix + "wte.weight");
      if (t.shape != wte.shape || file.to_float(t) != file.to_float(wte))
        throw std::runtime_error(fmt::format(
            "{}: lm_head.weight differs from wte.weight; only tied output embeddings are supported", file.path));
      continue;
    }
    const std::string rest = t.name.substr(0, prefix.size()) == prefix ? t.name.substr(prefix.size()) : t.name;
    // Old checkpoints store the causal-mask buffers of the attention modules as tensors.
    const bool mask_buffer =
        rest.rfind("h.", 0) == 0 && (ends_with(rest, ".attn.bias") || ends_with(rest, ".attn.masked_bias"));
    if (mask_buffer) continue;
    throw std::runtime_error(fmt::format("{}: unexpected tensor {} for a GPT-2 with {} layers", file.path, t.name,
                                         config.num_layers));
  }
  return params;
}

std::string hf_config_json(const GPT2Config& c, const std::string& torch_dtype) {
  return fmt::format(R"({{
  "model_type": "gpt2",
  "architectures": ["GPT2LMHeadModel"],
  "vocab_size": {},
  "n_positions": {},
  "n_ctx": {},
  "n_embd": {},
  "n_layer": {},
  "n_head": {},
  "n_inner": null,
  "activation_function": "gelu_new",
  "layer_norm_epsilon": 1e-05,
  "resid_pdrop": 0.0,
  "embd_pdrop": 0.0,
  "attn_pdrop": 0.0,
  "initializer_range": 0.02,
  "scale_attn_weights": true,
  "scale_attn_by_inverse_layer_idx": false,
  "reorder_and_upcast_attn": false,
  "bos_token_id": 50256,
  "eos_token_id": 50256,
  "tie_word_embeddings": true,
  "use_cache": true,
  "torch_dtype": "{}"
}}
)",
                     c.vocab_size, c.max_seq_len, c.max_seq_len, c.channels, c.num_layers, c.num_heads, torch_dtype);
}

GPT2Config parse_hf_config(const std::string& text, const std::string& path) {
  json::Value root;
  try {
    root = json::parse(text);
  } catch (const json::JsonError& e) {
    throw std::runtime_error(fmt::format("{}: {}", path, e.what()));
  }
  if (root.kind != json::Value::Kind::Object) throw std::runtime_error(fmt::format("{}: not a JSON object", path));

  using Kind = json::Value::Kind;
  check_optional(root, "model_type", path, [](const json::Value& v) { return v.kind == Kind::String && v.string == "gpt2"; },
                 "only \"gpt2\" is supported");
  // gelu_new and gelu_pytorch_tanh are both GELU's tanh approximation, the one our model uses.
  check_optional(root, "activation_function", path,
                 [](const json::Value& v) {
                   return v.kind == Kind::String && (v.string == "gelu_new" || v.string == "gelu_pytorch_tanh");
                 },
                 "only the tanh-approximated GELU (gelu_new, gelu_pytorch_tanh) is supported");
  check_optional(root, "layer_norm_epsilon", path,
                 [](const json::Value& v) {
                   return v.kind == Kind::Number && std::fabs(v.number - kLayerNormEps) < 1e-12;
                 },
                 "our layernorm uses epsilon 1e-5");
  check_optional(root, "tie_word_embeddings", path, [](const json::Value& v) { return v.kind == Kind::Bool && v.boolean; },
                 "only tied input/output embeddings are supported");
  check_optional(root, "scale_attn_weights", path, [](const json::Value& v) { return v.kind == Kind::Bool && v.boolean; },
                 "attention must be scaled by 1/sqrt(head_size)");
  check_optional(root, "scale_attn_by_inverse_layer_idx", path,
                 [](const json::Value& v) { return v.kind == Kind::Bool && !v.boolean; },
                 "per-layer attention scaling is not supported");

  GPT2Config c;
  c.vocab_size = config_int(root, "vocab_size", path);
  c.channels = config_int(root, "n_embd", path);
  c.num_layers = config_int(root, "n_layer", path);
  c.num_heads = config_int(root, "n_head", path);
  c.max_seq_len = config_int(root, root.find("n_positions") != nullptr ? "n_positions" : "n_ctx", path);
  c.padded_vocab_size = (c.vocab_size + 127) / 128 * 128;
  const double width = double(mlp_width(c));
  check_optional(root, "n_inner", path,
                 [width](const json::Value& v) { return v.kind == Kind::Null || (v.kind == Kind::Number && v.number == width); },
                 "the MLP width must be 4 * n_embd");
  if (c.channels % c.num_heads != 0)
    throw std::runtime_error(fmt::format("{}: n_embd {} is not divisible by n_head {}", path, c.channels, c.num_heads));
  return c;
}

void export_hf(const std::string& model_path, const std::string& out_dir, DType dtype) {
  if (dtype != DType::F32 && dtype != DType::BF16)
    throw std::runtime_error(fmt::format("export: dtype {} is not supported (float32 or bfloat16)", dtype_name(dtype)));
  const ModelFile model = load_model(model_path);
  std::vector<HfTensor> tensors = gpt2_to_hf(model.config, model.params.data());

  std::vector<std::vector<uint16_t>> bf16(dtype == DType::BF16 ? tensors.size() : 0);
  std::vector<TensorToWrite> to_write;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const void* data = tensors[i].values.data();
    if (dtype == DType::BF16) {
      bf16[i].resize(tensors[i].values.size());
      for (size_t j = 0; j < bf16[i].size(); ++j) bf16[i][j] = float_to_bf16(tensors[i].values[j]);
      std::vector<float>().swap(tensors[i].values);
      data = bf16[i].data();
    }
    to_write.push_back({tensors[i].name, dtype, tensors[i].shape, data});
  }

  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: cannot create directory: {}", out_dir, ec.message()));
  write_safetensors(out_dir + "/model.safetensors", to_write, {{"format", "pt"}});
  const std::string config_path = out_dir + "/config.json";
  std::ofstream config(config_path, std::ios::trunc);
  config << hf_config_json(model.config, dtype == DType::BF16 ? "bfloat16" : "float32");
  config.close();
  if (!config) throw std::runtime_error(fmt::format("{}: write error", config_path));
}

void import_hf(const std::string& hf_dir, const std::string& out_path, int version) {
  namespace fs = std::filesystem;
  const std::string config_path = hf_dir + "/config.json";
  const std::string weights_path = hf_dir + "/model.safetensors";
  if (!fs::is_directory(hf_dir)) throw std::runtime_error(fmt::format("{}: not a directory", hf_dir));
  if (!fs::is_regular_file(config_path)) throw std::runtime_error(fmt::format("{}: missing", config_path));
  if (!fs::is_regular_file(weights_path)) {
    std::string hint;
    if (fs::exists(hf_dir + "/model.safetensors.index.json"))
      hint = " (sharded checkpoints are not supported: merge the shards into one model.safetensors)";
    else if (fs::exists(hf_dir + "/pytorch_model.bin"))
      hint = " (pytorch_model.bin is not supported: save the model with safe_serialization=True)";
    throw std::runtime_error(fmt::format("{}: missing{}", weights_path, hint));
  }
  const GPT2Config config = parse_hf_config(read_text(config_path), config_path);
  const SafeTensorsFile weights = read_safetensors(weights_path);
  const std::vector<float> params = hf_to_gpt2(config, weights);
  save_model(out_path, config, params.data(), version);
}

}  // namespace llmc
