// GPT-2 model description shared by both trainers: the configuration, the parameter layout of the
// llm.c-compatible checkpoint format (docs/contract.md; the files are llmc/io/model_file.h) and
// initialisation.
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

// The 16 parameter tensors in checkpoint order.
enum ParamIndex {
  kWte, kWpe, kLn1w, kLn1b, kQkvw, kQkvb, kAttprojw, kAttprojb,
  kLn2w, kLn2b, kFcw, kFcb, kFcprojw, kFcprojb, kLnfw, kLnfb, kNumParamTensors
};

// Where a parameter tensor lies in the flat buffer. The per-layer tensors (ln1w to fcprojb) are
// L equal slices, one per layer in layer order; wte, wpe, lnfw and lnfb are one slice, shared by
// all layers. Both backends and the Hugging Face mapping find a layer's weights through at().
struct ParamTensor {
  const char* name;
  size_t offset;       // in floats, from the start of the flat parameter buffer
  size_t numel;        // the whole tensor (all layers)
  bool weight_decay;   // only wte, wpe, qkvw, attprojw, fcw, fcprojw are decayed
  bool per_layer;
  size_t slice_numel;  // one layer's slice (numel / L), or numel for a tensor that is not per layer
  // Offset of `layer`'s slice (any layer gives the one slice of a tensor that is not per layer).
  size_t at(int layer) const { return offset + (per_layer ? size_t(layer) * slice_numel : 0); }
};
std::array<ParamTensor, kNumParamTensors> param_layout(const GPT2Config& config);
size_t num_parameters(const GPT2Config& config);

// The checks every backend makes on a batch before it touches the GPU or the activations:
// 1 <= B, 1 <= T <= max_seq_len, and every input (and target, unless targets is null) a token of
// the real vocabulary. Throws std::invalid_argument naming the position and token. The shard
// reader already rejects out-of-vocabulary tokens; this also guards the other callers (sampling,
// HellaSwag rows, tests, tools), since a bad id would read outside the embedding table.
void check_batch(const GPT2Config& config, const int* inputs, const int* targets, int B, int T);

// GPT-2 initialisation from a seed: weights N(0, 0.02), the two residual projections (attprojw,
// fcprojw) N(0, 0.02/sqrt(2L)), biases 0, layernorm weights 1 and biases 0, padded vocab rows 0.
std::vector<float> init_parameters(const GPT2Config& config, uint64_t seed);

uint16_t float_to_bf16(float x);  // round to nearest even; NaN stays NaN
float bf16_to_float(uint16_t x);

}  // namespace llmc
