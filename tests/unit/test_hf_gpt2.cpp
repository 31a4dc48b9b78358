#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "llmc/gpt2.h"
#include "llmc/io/hf_gpt2.h"
#include "llmc/io/model_file.h"
#include "llmc/io/safetensors.h"
#include "llmc/rng.h"
#include "tests/unit/test_support.h"

using namespace llmc;
using namespace test_support;
namespace fs = std::filesystem;

namespace {

// A vocabulary of 50 rounded up to 128, as parse_hf_config pads.
GPT2Config tiny_config() { return two_layer_config(8, 6, 50, 128); }

// Random parameters everywhere except the padded vocabulary rows, which stay zero.
std::vector<float> random_params(const GPT2Config& c, uint64_t seed) {
  std::vector<float> p(num_parameters(c));
  Rng rng(seed);
  for (float& x : p) x = rng.normal();
  std::fill(p.begin() + size_t(c.vocab_size) * c.channels, p.begin() + size_t(c.padded_vocab_size) * c.channels, 0.0f);
  return p;
}

const HfTensor& by_name(const std::vector<HfTensor>& tensors, const std::string& name) {
  for (const HfTensor& t : tensors)
    if (t.name == name) return t;
  FAIL("no tensor " << name);
  return tensors.front();
}

// An HF directory with config.json for `c` and the given tensors (all F32).
std::string write_hf_dir(const std::string& name, const GPT2Config& c, const std::vector<HfTensor>& tensors) {
  const std::string dir = temp_path(name);
  fs::create_directories(dir);
  write_bytes(dir + "/config.json", hf_config_json(c, "float32"));
  std::vector<TensorToWrite> w;
  for (const HfTensor& t : tensors) w.push_back({t.name, DType::F32, t.shape, t.values.data()});
  write_safetensors(dir + "/model.safetensors", w, {{"format", "pt"}});
  return dir;
}

std::string import_error(const std::string& dir) {
  return error_message([&] { import_hf(dir, temp_path("import_error.bin"), kModelVersionFp32); });
}

}  // namespace

TEST_CASE("hf_gpt2: names, shapes and transposes of the exported tensors") {
  const GPT2Config c = tiny_config();
  const size_t C = 8, L = 2;
  // params[i] = i makes every value tell where it came from.
  std::vector<float> params(num_parameters(c));
  for (size_t i = 0; i < params.size(); ++i) params[i] = float(i);
  const auto layout = param_layout(c);
  const std::vector<HfTensor> hf = gpt2_to_hf(c, params.data());

  REQUIRE(hf.size() == 2 + 12 * L + 2);
  CHECK(hf[0].name == "transformer.wte.weight");
  CHECK(hf[1].name == "transformer.wpe.weight");
  CHECK(hf[2].name == "transformer.h.0.ln_1.weight");
  CHECK(hf[4].name == "transformer.h.0.attn.c_attn.weight");
  CHECK(hf[13].name == "transformer.h.0.mlp.c_proj.bias");
  CHECK(hf[14].name == "transformer.h.1.ln_1.weight");
  CHECK(hf[26].name == "transformer.ln_f.weight");
  CHECK(hf[27].name == "transformer.ln_f.bias");

  const HfTensor& wte = by_name(hf, "transformer.wte.weight");
  CHECK(wte.shape == std::vector<size_t>{50, C});  // the real vocabulary only
  CHECK(wte.values.back() == float(50 * C - 1));

  // c_attn.weight[i][o] of layer 1 is qkvw[1][o][i].
  const HfTensor& c_attn = by_name(hf, "transformer.h.1.attn.c_attn.weight");
  CHECK(c_attn.shape == std::vector<size_t>{C, 3 * C});
  for (size_t i = 0; i < C; ++i)
    for (size_t o = 0; o < 3 * C; ++o)
      CHECK(c_attn.values[i * 3 * C + o] == float(layout[kQkvw].offset + 3 * C * C + o * C + i));

  const HfTensor& fc = by_name(hf, "transformer.h.0.mlp.c_fc.weight");
  CHECK(fc.shape == std::vector<size_t>{C, 4 * C});
  CHECK(fc.values[1 * 4 * C + 5] == float(layout[kFcw].offset + 5 * C + 1));
  const HfTensor& proj = by_name(hf, "transformer.h.1.mlp.c_proj.weight");
  CHECK(proj.shape == std::vector<size_t>{4 * C, C});
  CHECK(proj.values[7 * C + 2] == float(layout[kFcprojw].offset + 4 * C * C + 2 * 4 * C + 7));
  const HfTensor& att_proj = by_name(hf, "transformer.h.0.attn.c_proj.weight");
  CHECK(att_proj.values[3 * C + 1] == float(layout[kAttprojw].offset + 1 * C + 3));
  const HfTensor& qkvb = by_name(hf, "transformer.h.1.attn.c_attn.bias");
  CHECK(qkvb.shape == std::vector<size_t>{3 * C});
  CHECK(qkvb.values[0] == float(layout[kQkvb].offset + 3 * C));
  CHECK(by_name(hf, "transformer.ln_f.bias").values[C - 1] == float(params.size() - 1));
}

TEST_CASE("hf_gpt2: export then import reproduces the model file byte for byte") {
  const GPT2Config c = tiny_config();
  const std::vector<float> params = random_params(c, 7);
  const std::string model = temp_path("model.bin"), back = temp_path("back.bin"), dir = temp_path("export");

  SUBCASE("fp32") {
    save_model(model, c, params.data(), kModelVersionFp32);
    export_hf(model, dir, DType::F32);
    import_hf(dir, back, kModelVersionFp32);
    CHECK(read_bytes(back) == read_bytes(model));
    CHECK(read_safetensors(dir + "/model.safetensors").tensors[0].dtype == DType::F32);
  }
  SUBCASE("bf16 model, bf16 export, bf16 import") {
    save_model(model, c, params.data(), kModelVersionBf16);
    export_hf(model, dir, DType::BF16);
    const SafeTensorsFile st = read_safetensors(dir + "/model.safetensors");
    CHECK(st.tensors[0].dtype == DType::BF16);
    CHECK(st.metadata.at("format") == "pt");
    import_hf(dir, back, kModelVersionBf16);
    CHECK(read_bytes(back) == read_bytes(model));
    CHECK(read_bytes(dir + "/config.json").find("\"torch_dtype\": \"bfloat16\"") != std::string::npos);
  }
  fs::remove_all(dir);
  fs::remove(model);
  fs::remove(back);
}

TEST_CASE("hf_gpt2: F16 tensors, no 'transformer.' prefix, mask buffers and a tied lm_head are accepted") {
  const GPT2Config c = tiny_config();
  // Multiples of 1/256 in (-1, 1) are exact in f16, bf16 and f32.
  std::vector<float> params = random_params(c, 3);
  for (float& x : params) x = std::round(std::tanh(x) * 255.0f) / 256.0f;
  std::fill(params.begin() + size_t(c.vocab_size) * c.channels, params.begin() + size_t(c.padded_vocab_size) * c.channels, 0.0f);
  std::vector<HfTensor> hf = gpt2_to_hf(c, params.data());

  // f16 bits of k/256 for |k| < 256, computed from the definition: sign, 5-bit exponent (bias
  // 15), 10-bit mantissa; k = m * 2^e with 1 <= m < 2.
  auto to_f16 = [](float x) -> uint16_t {
    if (x == 0.0f) return std::signbit(x) ? 0x8000 : 0;
    int e;
    const float m = std::frexp(std::fabs(x), &e);  // x = m * 2^e, 0.5 <= m < 1
    const uint16_t sign = x < 0 ? 0x8000 : 0;
    return uint16_t(sign | ((e - 1 + 15) << 10) | uint16_t(std::lround((m * 2 - 1) * 1024)));
  };
  std::vector<std::vector<uint16_t>> halves;
  std::vector<TensorToWrite> w;
  for (const HfTensor& t : hf) {
    halves.emplace_back();
    for (float x : t.values) halves.back().push_back(to_f16(x));
  }
  for (size_t i = 0; i < hf.size(); ++i)
    w.push_back({hf[i].name.substr(std::string("transformer.").size()), DType::F16, hf[i].shape, halves[i].data()});
  const std::vector<float> mask(36, 1.0f);
  w.push_back({"h.0.attn.bias", DType::F32, {1, 1, 6, 6}, mask.data()});
  w.push_back({"h.1.attn.masked_bias", DType::F32, {}, mask.data()});
  w.push_back({"lm_head.weight", DType::F16, hf[0].shape, halves[0].data()});

  const std::string dir = temp_path("f16");
  fs::create_directories(dir);
  write_bytes(dir + "/config.json",
              R"({"model_type": "gpt2", "vocab_size": 50, "n_ctx": 6, "n_embd": 8, "n_layer": 2, "n_head": 2,
                 "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05, "n_inner": 32})");
  write_safetensors(dir + "/model.safetensors", w, {});
  const std::string out = temp_path("f16.bin");
  import_hf(dir, out, kModelVersionFp32);
  const ModelFile m = load_model(out);
  CHECK(m.config.vocab_size == 50);
  CHECK(m.config.padded_vocab_size == 128);
  CHECK(m.config.max_seq_len == 6);
  CHECK(m.params == params);

  // An lm_head that differs from wte is an untied model, which we cannot represent.
  std::vector<uint16_t> other_head = halves[0];
  other_head[3] ^= 0x0400;
  w.back().data = other_head.data();
  write_safetensors(dir + "/model.safetensors", w, {});
  CHECK(import_error(dir).find("lm_head.weight differs from wte.weight") != std::string::npos);
  fs::remove_all(dir);
  fs::remove(out);
}

TEST_CASE("hf_gpt2: import rejects missing files, missing or misshapen tensors and unknown tensors") {
  const GPT2Config c = tiny_config();
  const std::vector<float> params = random_params(c, 11);
  std::vector<HfTensor> hf = gpt2_to_hf(c, params.data());

  CHECK(import_error(temp_path("nowhere")).find("not a directory") != std::string::npos);
  {
    const std::string dir = write_hf_dir("nofiles", c, hf);
    fs::remove(dir + "/model.safetensors");
    write_bytes(dir + "/model.safetensors.index.json", "{}");
    CHECK(import_error(dir).find("sharded checkpoints are not supported") != std::string::npos);
    fs::remove(dir + "/config.json");
    CHECK(import_error(dir).find("config.json: missing") != std::string::npos);
    fs::remove_all(dir);
  }
  {
    std::vector<HfTensor> missing(hf.begin(), hf.end() - 1);
    const std::string dir = write_hf_dir("missing", c, missing);
    CHECK(import_error(dir).find("missing tensor transformer.ln_f.bias") != std::string::npos);
    fs::remove_all(dir);
  }
  {
    std::vector<HfTensor> bad = hf;
    bad[4].shape = {3 * 8, 8};  // c_attn stored in our orientation instead of HF's
    const std::string dir = write_hf_dir("shape", c, bad);
    CHECK(import_error(dir).find("transformer.h.0.attn.c_attn.weight has shape (24, 8), config.json implies (8, 24)") !=
          std::string::npos);
    fs::remove_all(dir);
  }
  {
    std::vector<HfTensor> extra = hf;
    extra.push_back({"transformer.h.2.ln_1.weight", {8}, std::vector<float>(8, 1.0f)});
    const std::string dir = write_hf_dir("extra", c, extra);
    CHECK(import_error(dir).find("unexpected tensor transformer.h.2.ln_1.weight") != std::string::npos);
    fs::remove_all(dir);
  }
  {
    const std::string dir = write_hf_dir("notgpt2", c, {{"model.embed_tokens.weight", {2}, {1, 2}}});
    CHECK(import_error(dir).find("not a GPT-2 checkpoint") != std::string::npos);
    fs::remove_all(dir);
  }
}

TEST_CASE("hf_gpt2: config.json is written with HF's keys and read back; unsupported settings are rejected") {
  GPT2Config c = tiny_config();
  c.vocab_size = 50257;
  c.padded_vocab_size = 50304;
  const std::string text = hf_config_json(c, "float32");
  for (const char* needle : {"\"model_type\": \"gpt2\"", "\"architectures\": [\"GPT2LMHeadModel\"]",
                             "\"vocab_size\": 50257", "\"n_positions\": 6", "\"n_embd\": 8", "\"n_layer\": 2",
                             "\"n_head\": 2", "\"n_inner\": null", "\"activation_function\": \"gelu_new\"",
                             "\"layer_norm_epsilon\": 1e-05", "\"tie_word_embeddings\": true",
                             "\"bos_token_id\": 50256", "\"eos_token_id\": 50256", "\"torch_dtype\": \"float32\""})
    CHECK_MESSAGE(text.find(needle) != std::string::npos, needle);
  check_shape(parse_hf_config(text, "config.json"), 2, 2, 8, 6, 50257, 50304);

  auto error = [](const std::string& json) {
    return error_message([&] { parse_hf_config(json, "cfg/config.json"); });
  };
  const std::string base = R"("vocab_size": 100, "n_positions": 8, "n_embd": 8, "n_layer": 1, "n_head": 2)";
  CHECK(error("{" + base + "}").empty());
  CHECK(error("{" + base + R"(, "activation_function": "relu"})").find("\"activation_function\"") != std::string::npos);
  CHECK(error("{" + base + R"(, "activation_function": "gelu_pytorch_tanh"})").empty());
  CHECK(error("{" + base + R"(, "layer_norm_epsilon": 1e-6})").find("epsilon 1e-5") != std::string::npos);
  CHECK(error("{" + base + R"(, "model_type": "llama"})").find("\"model_type\"") != std::string::npos);
  CHECK(error("{" + base + R"(, "tie_word_embeddings": false})").find("tied") != std::string::npos);
  CHECK(error("{" + base + R"(, "n_inner": 64})").find("4 * n_embd") != std::string::npos);
  CHECK(error("{" + base + R"(, "scale_attn_by_inverse_layer_idx": true})").find("per-layer") != std::string::npos);
  CHECK(error(R"({"vocab_size": 100, "n_positions": 8, "n_layer": 1, "n_head": 2})").find("missing \"n_embd\"") !=
        std::string::npos);
  CHECK(error(R"({"vocab_size": 100, "n_positions": 8, "n_embd": 8.5, "n_layer": 1, "n_head": 2})")
            .find("positive integer") != std::string::npos);
  CHECK(error(R"({"vocab_size": 100, "n_positions": 8, "n_embd": 9, "n_layer": 1, "n_head": 2})")
            .find("not divisible") != std::string::npos);
  CHECK(error("{" + base).find("cfg/config.json") != std::string::npos);
}
