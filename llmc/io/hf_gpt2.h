// Conversion between our flat GPT-2 parameters (llmc/gpt2.h, checkpoint order) and the tensors of
// Hugging Face's GPT2LMHeadModel, plus its config.json.
//
// HF names, per layer i: transformer.h.{i}.{ln_1,attn.c_attn,attn.c_proj,ln_2,mlp.c_fc,mlp.c_proj}
// .{weight,bias}, around transformer.wte/wpe/ln_f. HF's Conv1D layers compute y = x W + b with W
// stored (in, out), while our matmuls store (out, in): c_attn, attn.c_proj, mlp.c_fc and
// mlp.c_proj are our qkvw, attprojw, fcw, fcprojw transposed. HF's wte has the real vocabulary
// (vocab_size rows); ours has padded_vocab_size rows, the extra ones zero. lm_head.weight is tied
// to wte, so exports omit it.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "llmc/gpt2.h"
#include "llmc/io/safetensors.h"

namespace llmc {

struct HfTensor {
  std::string name;           // with the "transformer." prefix
  std::vector<size_t> shape;  // HF's shape
  std::vector<float> values;  // row-major in HF's layout
};

// Every tensor of the HF model in its state_dict order, lm_head excluded.
std::vector<HfTensor> gpt2_to_hf(const GPT2Config& config, const float* params);

// Our flat parameters from an HF checkpoint of the given shape. Tensor names may carry the
// "transformer." prefix or not (OpenAI's hub checkpoints have none); the attention-mask buffers
// h.{i}.attn.bias / attn.masked_bias that old checkpoints carry are ignored; lm_head.weight, if
// present, must equal wte. Throws naming `file.path` and the tensor on a missing tensor, a wrong
// shape, or a tensor it does not know.
std::vector<float> hf_to_gpt2(const GPT2Config& config, const SafeTensorsFile& file);

// HF's config.json for our shape; torch_dtype is "float32" or "bfloat16".
std::string hf_config_json(const GPT2Config& config, const std::string& torch_dtype);
// Our shape from config.json's text (padded_vocab_size: vocab_size rounded up to 128, as llm.c
// does). Rejects, naming `path`, settings our model does not implement: another model_type or
// activation, a layer_norm_epsilon other than 1e-5, untied embeddings, n_inner != 4 * n_embd.
GPT2Config parse_hf_config(const std::string& text, const std::string& path);

// ./hf_convert export: MODEL.bin -> out_dir/config.json + out_dir/model.safetensors (out_dir is
// created if missing). dtype F32 or BF16.
void export_hf(const std::string& model_path, const std::string& out_dir, DType dtype);
// ./hf_convert import: hf_dir/config.json + hf_dir/model.safetensors -> our model file with the
// given version (kModelVersionFp32 or kModelVersionBf16).
void import_hf(const std::string& hf_dir, const std::string& out_path, int version);

}  // namespace llmc
