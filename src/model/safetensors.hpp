// GPT-2 weights in the safetensors format (an 8-byte header length, a JSON header, raw little-endian
// data): loading Hugging Face files into the flat parameter buffer, and exporting ztrain's weights so
// that transformers' GPT2LMHeadModel.from_pretrained loads them.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/param_table.hpp"
#include "quant/nf4.hpp"

namespace zt::model {

// One tensor as a safetensors file stores it: its dtype name ("U8", "F32", "BF16", ...), shape and raw bytes.
struct RawTensor {
  std::string name, dtype;
  std::vector<std::int64_t> shape;
  std::vector<char> bytes;
};

// bitsandbytes 4-bit NF4 weights read as stored (model/bnb_nf4.hpp), by parameter index in the table: those
// whose stored layout is the table's (Llama's nn.Linear weights, not GPT-2's transposed Conv1D ones), so an
// NF4 LoRA base takes their codes and scales as they are.
using Nf4Weights = std::map<std::size_t, quant::Nf4Tensor>;

// Fills host_params (table.numel() floats) from a safetensors file. Accepts GPT2LMHeadModel names
// (transformer.*) and the Hub's gpt2 names (no prefix); F32, F16 and BF16 (widened to f32). Ignores the
// attn.bias / attn.masked_bias buffers; lm_head.weight must equal wte (ztrain ties them). A wpe with more
// rows than seq_len is cut to its first seq_len rows (as nanoGPT's crop_block_size). wte's padded rows
// are set to 0. A weight stored as bitsandbytes' 4-bit NF4 (its codes under the weight's name, beside
// NAME.absmax, NAME.quant_map, NAME.quant_state.bitsandbytes__nf4 ...) is dequantized, as transformers
// dequantizes it; `nf4` (optional) receives those stored in the table's layout. Anything else that does not
// fit throws InputError naming the file, the first tensor that does not fit, and what was expected vs found.
void load_safetensors(const std::string& path, const ParamTable& table, float* host_params, Nf4Weights* nf4 = nullptr);

// The same from the shards of one model (a Hugging Face directory): each tensor in exactly one file;
// a missing tensor is reported against `where` (the index or the directory), any other misfit against
// the file that holds it.
void load_safetensors_files(const std::vector<std::string>& files, const std::string& where, const ParamTable& table,
                            float* host_params, Nf4Weights* nf4 = nullptr);

// The same weights read range by range in the table's flat order, never whole: the files' headers are
// read and checked at construction as load_safetensors_files checks them (and a tied head against the
// embedding), each range's bytes when read (widened to fp32, checked finite; a padded vocabulary's rows
// 0; a 4-bit weight dequantized whole, one at a time). A rank that loads its part (a ZeRO shard, a TP
// or pipeline part) holds a unit of it at a time, not the model (outside sweep 26: every rank held a
// whole fp32 copy, 30 GiB for an 8B model). Not thread-safe.
class SafetensorsReader {
 public:
  SafetensorsReader(const std::vector<std::string>& files, const std::string& where, const ParamTable& table);
  ~SafetensorsReader();
  SafetensorsReader(SafetensorsReader&&) noexcept;
  // Flat values [offset, offset + count) of the table, in fp32.
  void read(std::int64_t offset, std::int64_t count, float* out) const;
  // Parameter i's codes and scales as stored (a bitsandbytes 4-bit weight in the table's layout) into
  // `into`; nothing for one stored otherwise.
  void read_stored_nf4(std::size_t i, Nf4Weights& into) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes tensors as stored (names sorted, metadata {"format": "pt"}), to path.tmp, then renamed. Throws IoError.
void save_raw_tensors(const std::string& path, std::vector<RawTensor> tensors);

// Writes every parameter under its Hugging Face name with its HF shape (wte, embed_tokens, lm_head: V
// rows), fp32, names sorted, metadata {"format": "pt"} and nothing time-dependent: identical weights give identical bytes.
// Written to path.tmp, then renamed. Throws IoError.
void save_safetensors(const std::string& path, const ParamTable& table, const float* host_params);

// The same for a subset of the parameters (one shard), in F32 or BF16 (rounded to nearest even).
void save_tensors(const std::string& path, const std::vector<const ParamInfo*>& params, const float* host_params,
                  bool bf16);

// The config.json transformers needs for GPT2LMHeadModel (model_type gpt2, gelu_new, n_positions =
// n_ctx = seq_len, layer_norm_epsilon 1e-5, tied embeddings), or for LlamaForCausalLM (the shape fields,
// rms_norm_eps, rope_theta, rope_scaling, tie_word_embeddings), with sorted keys.
std::string hf_config_json(const GptShape& shape, const std::string& torch_dtype = "float32");

// Writes text to path.tmp, then renames it over path. Throws IoError.
void write_text_file(const std::string& path, const std::string& text);

// save_safetensors(path) plus config.json in the same directory: a folder from_pretrained loads.
void export_pretrained(const std::string& path, const ParamTable& table, const float* host_params);

}  // namespace zt::model
