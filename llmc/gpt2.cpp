#include "llmc/gpt2.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "llmc/rng.h"

namespace llmc {

namespace {

// Upper bounds on a checkpoint's shape. They are far beyond any GPT-2 model yet keep every size
// computed from a header well inside size_t, so a corrupt header is reported as such instead of
// turning into an overflow or a huge allocation.
constexpr int kMaxLayers = 1024;
constexpr int kMaxChannels = 1 << 16;
constexpr int kMaxSeqLen = 1 << 20;
constexpr int kMaxVocab = 1 << 22;

struct NamedShape {
  const char* name;
  int layers, heads, channels;
};
constexpr NamedShape kNamedShapes[] = {
#define GPT2_SHAPE(name, layers, heads, channels) {#name, layers, heads, channels},
#include "llmc/gpt2_shapes.def"
#undef GPT2_SHAPE
};

// Parses the decimal number at s[pos...] (at least one digit); false on no digits or overflow.
bool parse_number(const std::string& s, size_t& pos, int& value) {
  size_t start = pos;
  long long v = 0;
  while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
    v = v * 10 + (s[pos] - '0');
    if (v > (1 << 30)) return false;
    ++pos;
  }
  value = int(v);
  return pos > start;
}

// "L<layers>H<heads>C<channels>[T<max_seq_len>]" into config; false when s has another form.
bool parse_custom_descriptor(const std::string& s, GPT2Config& config) {
  // The keys in order, each with the field its number sets; T is optional.
  const char keys[] = "LHCT";
  int GPT2Config::*const fields[] = {&GPT2Config::num_layers, &GPT2Config::num_heads, &GPT2Config::channels,
                                     &GPT2Config::max_seq_len};
  size_t pos = 0;
  for (int i = 0; i < 4; ++i) {
    if (i == 3 && pos == s.size()) break;
    if (pos >= s.size() || s[pos] != keys[i]) return false;
    ++pos;
    if (!parse_number(s, pos, config.*fields[i])) return false;
  }
  return pos == s.size();
}

bool find_descriptor(const std::string& s, GPT2Config& config) {
  for (const NamedShape& shape : kNamedShapes) {
    if (s == shape.name) {
      config.num_layers = shape.layers;
      config.num_heads = shape.heads;
      config.channels = shape.channels;
      return true;
    }
  }
  return parse_custom_descriptor(s, config);
}

void fill_normal(Rng& rng, float* p, size_t n, float stddev) {
  for (size_t i = 0; i < n; ++i) p[i] = stddev * rng.normal();
}

}  // namespace

std::string shape_problem(const GPT2Config& c) {
  if (c.num_layers < 1 || c.num_layers > kMaxLayers)
    return fmt::format("num_layers {} is outside 1..{}", c.num_layers, kMaxLayers);
  if (c.channels < 1 || c.channels > kMaxChannels)
    return fmt::format("channels {} is outside 1..{}", c.channels, kMaxChannels);
  if (c.num_heads < 1 || c.channels % c.num_heads != 0)
    return fmt::format("channels {} is not divisible by num_heads {}", c.channels, c.num_heads);
  if (c.max_seq_len < 1 || c.max_seq_len > kMaxSeqLen)
    return fmt::format("max_seq_len {} is outside 1..{}", c.max_seq_len, kMaxSeqLen);
  if (c.vocab_size < 1 || c.vocab_size > kMaxVocab)
    return fmt::format("vocab_size {} is outside 1..{}", c.vocab_size, kMaxVocab);
  if (c.padded_vocab_size < c.vocab_size || c.padded_vocab_size > kMaxVocab)
    return fmt::format("padded_vocab_size {} is outside {}..{}", c.padded_vocab_size, c.vocab_size,
                       kMaxVocab);
  return "";
}

bool same_shape(const GPT2Config& a, const GPT2Config& b) {
  return a.max_seq_len == b.max_seq_len && a.vocab_size == b.vocab_size &&
         a.padded_vocab_size == b.padded_vocab_size && a.num_layers == b.num_layers &&
         a.num_heads == b.num_heads && a.channels == b.channels;
}

std::string describe_shape(const GPT2Config& c) {
  return fmt::format("L={} H={} C={} maxT={} V={} Vp={}", c.num_layers, c.num_heads, c.channels, c.max_seq_len,
                     c.vocab_size, c.padded_vocab_size);
}

std::string named_shape_list(const std::string& separator) {
  std::string list;
  for (const NamedShape& shape : kNamedShapes) list += (list.empty() ? "" : separator) + shape.name;
  return list;
}

bool is_descriptor(const std::string& s) {
  GPT2Config config;
  return find_descriptor(s, config);
}

GPT2Config config_from_descriptor(const std::string& descriptor) {
  GPT2Config config;
  if (!find_descriptor(descriptor, config))
    throw std::invalid_argument(fmt::format(
        "model descriptor '{}' is not one of {} or L<layers>H<heads>C<channels>[T<seq>]", descriptor,
        named_shape_list(", ")));
  std::string problem = shape_problem(config);
  if (!problem.empty())
    throw std::invalid_argument(fmt::format("model descriptor '{}': {}", descriptor, problem));
  return config;
}

std::array<ParamTensor, kNumParamTensors> param_layout(const GPT2Config& config) {
  const auto specs = param_specs(config);
  std::array<ParamTensor, kNumParamTensors> layout{};
  size_t offset = 0;
  for (int i = 0; i < kNumParamTensors; ++i) {
    const size_t numel = specs[i].shape.numel() * specs[i].copies(config.num_layers);
    layout[i] = ParamTensor{specs[i], offset, numel};
    offset += numel;
  }
  return layout;
}

size_t num_parameters(const GPT2Config& config) {
  auto layout = param_layout(config);
  return layout[kNumParamTensors - 1].offset + layout[kNumParamTensors - 1].numel;
}

void check_batch(const GPT2Config& config, const int* inputs, const int* targets, int B, int T) {
  if (B < 1 || T < 1 || T > config.max_seq_len)
    throw std::invalid_argument(fmt::format("batch B={} T={} is invalid for a model with max_seq_len {}", B, T,
                                            config.max_seq_len));
  const int V = config.vocab_size;
  for (size_t i = 0; i < size_t(B) * T; ++i) {
    if (inputs[i] < 0 || inputs[i] >= V)
      throw std::invalid_argument(fmt::format("input token {} at position {} is outside the vocabulary 0..{}",
                                              inputs[i], i, V - 1));
    if (targets && (targets[i] < 0 || targets[i] >= V))
      throw std::invalid_argument(fmt::format("target token {} at position {} is outside the vocabulary 0..{}",
                                              targets[i], i, V - 1));
  }
}

std::vector<float> init_parameters(const GPT2Config& config, uint64_t seed) {
  std::vector<float> params(num_parameters(config), 0.0f);
  Rng rng(seed);
  // GPT-2 scales the residual projections so the residual stream's variance does not grow with
  // depth: each of the 2L residual additions contributes 1/(2L) of it.
  const float residual_std = 0.02f / std::sqrt(2.0f * config.num_layers);
  for (const ParamTensor& t : param_layout(config)) {
    // Each slice's padding rows stay 0: no real token maps to them. Slice by slice in layer order
    // draws the same values as the whole tensor at once.
    const size_t n = (t.shape.rows - t.padding) * t.shape.row_numel();
    for (size_t layer = 0; layer < t.copies(config.num_layers); ++layer) {
      float* p = params.data() + t.at(int(layer));
      switch (t.init) {
        case ParamInit::kNormal: fill_normal(rng, p, n, 0.02f); break;
        case ParamInit::kResidual: fill_normal(rng, p, n, residual_std); break;
        case ParamInit::kOnes: std::fill(p, p + n, 1.0f); break;
        case ParamInit::kZeros: break;
      }
    }
  }
  return params;
}

uint16_t float_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0)
    return uint16_t((bits >> 16) | 0x0040u);  // keep NaN a (quiet) NaN even if truncation zeroes the payload
  // Round to nearest even: add just under half an ulp of bf16, plus one when the kept part is odd.
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

float bf16_to_float(uint16_t x) {
  uint32_t bits = uint32_t(x) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace llmc
