// GPT-2 model description shared by both trainers: the configuration, the parameter tensors
// (llmc/gpt2_params.def), their layout in the llm.c-compatible checkpoint format (docs/contract.md;
// the files are llmc/io/model_file.h) and their initialisation.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

struct GPT2Config {
  int max_seq_len = 1024;
  int vocab_size = 50257;
  int padded_vocab_size = 50304;
  int num_layers = 12;
  int num_heads = 12;
  int channels = 768;
};

// The width of a layer's MLP: its fc layer widens the C channels four times, fcproj narrows them back.
inline size_t mlp_width(const GPT2Config& config) { return 4 * size_t(config.channels); }

// Whether two models have the same shape (every field equal), and the shape in one line.
bool same_shape(const GPT2Config& a, const GPT2Config& b);
std::string describe_shape(const GPT2Config& config);
// Empty when the shape is usable (every size computed from it fits), else what is wrong with it.
std::string shape_problem(const GPT2Config& config);

// "d6", "d12", "d24", "d36", "d48" (GPT-2 small..XL shapes of llm.c), or a custom shape written
// "L<layers>H<heads>C<channels>" with an optional "T<max_seq_len>" (e.g. "L4H4C256T256") for small
// models. Throws std::invalid_argument naming the descriptor when it is neither, or when channels
// is not divisible by heads.
GPT2Config config_from_descriptor(const std::string& descriptor);
bool is_descriptor(const std::string& s);
// The named shapes of llmc/gpt2_shapes.def, "d6, d12, ..." with separator ", ": for --help and the
// messages that list them.
std::string named_shape_list(const std::string& separator);

// The parameter tensors in checkpoint order: the rows of llmc/gpt2_params.def.
enum ParamIndex {
#define GPT2_PARAM(id, ...) id,
#include "llmc/gpt2_params.def"
  kNumParamTensors
};

enum class ParamInit { kNormal, kResidual, kOnes, kZeros };  // the table's init column

// One slice's shape: rows x cols, or a vector of `rows` values (cols 0).
struct ParamShape {
  size_t rows, cols;
  ParamShape(size_t rows_ = 0, size_t cols_ = 0) : rows(rows_), cols(cols_) {}
  size_t row_numel() const { return cols == 0 ? 1 : cols; }
  size_t numel() const { return rows * row_numel(); }
};

// A row of llmc/gpt2_params.def for a model's shape (the columns are described there).
struct ParamSpec {
  const char* name;
  ParamShape shape;
  size_t padding;  // the shape's last rows that no real token uses
  bool per_layer, weight_decay;
  ParamInit init;
  const char* hf_name;
  bool hf_transposed;
  size_t copies(int L) const { return per_layer ? size_t(L) : 1; }  // its slices in a model of L layers
};
// The rows for `config`, indexed by ParamIndex. (Inline, as linear_layers() reads it in the kernel
// benchmarks of dev/cuda, which are built without the host library.)
inline std::array<ParamSpec, kNumParamTensors> param_specs(const GPT2Config& config) {
  // The names the rows' shapes are written in.
  const size_t C = size_t(config.channels), H = mlp_width(config), T = size_t(config.max_seq_len),
               V = size_t(config.vocab_size), Vp = size_t(config.padded_vocab_size);
  return {{
#define GPT2_PARAM(id, name, shape, padding, per_layer, init, decay, hf_name, hf_transposed) \
  {name, ParamShape shape, padding, per_layer, decay, ParamInit::init, hf_name, hf_transposed},
#include "llmc/gpt2_params.def"
  }};
}

// A parameter tensor's row and where it lies in the flat buffer: a per-layer tensor is L equal
// slices, one per layer in layer order; any other is one slice, shared by all layers. Both backends
// and the Hugging Face mapping find a layer's weights through at().
struct ParamTensor : ParamSpec {
  size_t offset;       // in floats, from the start of the flat parameter buffer
  size_t numel;        // the whole tensor (all layers); one layer's slice is shape.numel()
  // Offset of `layer`'s slice (any layer gives the one slice of a tensor that is not per layer).
  size_t at(int layer) const { return offset + (per_layer ? size_t(layer) * shape.numel() : 0); }
};
std::array<ParamTensor, kNumParamTensors> param_layout(const GPT2Config& config);
size_t num_parameters(const GPT2Config& config);

// The checks every backend makes on a batch before it touches the GPU or the activations:
// 1 <= B, 1 <= T <= max_seq_len, and every input (and target, unless targets is null) a token of
// the real vocabulary. Throws std::invalid_argument naming the position and token. The shard
// reader already rejects out-of-vocabulary tokens; this also guards the other callers (sampling,
// HellaSwag rows, tests, tools), since a bad id would read outside the embedding table.
void check_batch(const GPT2Config& config, const int* inputs, const int* targets, int B, int T);

// GPT-2 initialisation from a seed, by the init column of llmc/gpt2_params.def; the tensors draw
// their normal values in checkpoint order.
std::vector<float> init_parameters(const GPT2Config& config, uint64_t seed);

uint16_t float_to_bf16(float x);  // round to nearest even; NaN stays NaN
float bf16_to_float(uint16_t x);

}  // namespace llmc
