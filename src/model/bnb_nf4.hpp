// bitsandbytes' serialized 4-bit NF4 weights, the format transformers' save_pretrained writes for a
// load_in_4bit model (bitsandbytes QuantState.as_dict(packed=True) under each quantized weight's name) and
// the Hub's "-bnb-4bit" models hold:
//   NAME                                  U8 [(n + 1) / 2, 1]: the codes, two a byte (quant::Nf4Tensor::packed)
//   NAME.absmax                           F32 [blocks], or with double quantization U8 [blocks] (8-bit codes)
//   NAME.quant_map                        F32 [16]: the NF4 levels
//   NAME.nested_absmax, .nested_quant_map F32 [blocks / 256], F32 [256] (double quantization only)
//   NAME.quant_state.bitsandbytes__nf4    U8: JSON {"quant_type": "nf4", "blocksize", "dtype", "shape",
//                                         "nested_blocksize", "nested_dtype", "nested_offset"}
// and config.json's quantization_config (quant_method bitsandbytes, load_in_4bit, bnb_4bit_quant_type nf4).
// `shape` is the nn.Linear weight's [out, in]: a Llama weight's own HF shape, a GPT-2 Conv1D weight's
// transpose (transformers quantizes Conv1D weights transposed), so the blocks of a GPT-2 file run over the
// transposed elements.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/param_table.hpp"
#include "model/safetensors.hpp"
#include "quant/nf4.hpp"

namespace zt::model {

inline const std::string kBnbNf4State = ".quant_state.bitsandbytes__nf4";

// Whether `tensor` is one of the companions of the 4-bit weight `weight` (NAME.absmax, ...).
bool is_bnb_nf4_companion(const std::string& tensor, const std::string& weight);

// A stored 4-bit weight: its codes and scales, and the shape they were quantized in.
struct BnbNf4Weight {
  quant::Nf4Tensor tensor;
  std::vector<std::int64_t> shape;
};
// Reads the 4-bit weight `weight` of `file` through fetch (a companion's raw tensor, or nothing when absent);
// anything missing, of another type or size, other levels than NF4's or another map than the dynamic one is
// an InputError naming the file and the tensor.
BnbNf4Weight read_bnb_nf4(const std::string& file, const std::string& weight,
                          const std::function<std::optional<RawTensor>(const std::string&)>& fetch);

// Whether parameter p is stored transposed: a family whose matmul weights are Conv1D [in, out] (GPT-2's,
// Family::weights), which bitsandbytes quantizes as nn.Linear's [out, in].
bool bnb_transposed(const ParamTable& table, std::size_t p);

// The tensors of weight `weight` quantized as `t` in `shape`, with "dtype" (the model's compute dtype name
// in the quant state: "bfloat16", "float32").
std::vector<RawTensor> bnb_nf4_tensors(const std::string& weight, const quant::Nf4Tensor& t,
                                       const std::vector<std::int64_t>& shape, const std::string& dtype);

// zckpt quantize: writes dir/config.json (with quantization_config) and dir/model.safetensors, every
// parameter nf4_quantized() selects (the blocks' matmul weights) as bitsandbytes NF4 in blocks of `block`
// (double quantization: the scales' 8-bit codes in blocks of 256), the rest in BF16 or F32. Returns the
// number of quantized weights.
int export_bnb_nf4_directory(const std::string& dir, const ParamTable& table, const float* host_params, int block,
                             bool double_quant, bool bf16);

}  // namespace zt::model
