// The model's vocabulary from the typed configuration, read once: the shape of a [model] section, the
// LoRA adapters of the lora.* keys (and an NF4 base's quantization) and the compute dtype of train.precision.
#pragma once

#include "config/config.hpp"
#include "core/dtype.hpp"
#include "model/lora.hpp"
#include "model/nf4_params.hpp"
#include "model/param_table.hpp"

namespace zt::model {

// The model shape of a [model] section (checked; the vocabulary padded as the model pads it), by its
// family (family.hpp).
GptShape model_shape(const config::ModelConfig& m);

// The LoRA adapters of the lora.* keys (lora.rank > 0).
LoraSpec lora_spec(const config::Config& c);

// An NF4 base's quantization (lora.base_dtype=nf4): QLoRA's blocks of 64, lora.base_double_quant, over
// each whole tensor: the values the model computes with, on any layout.
Nf4Options nf4_options(const config::Config& c);
// How a rank stores that base: with double quantization only at parallel.tp = 1. A tensor-parallel shard
// keeps its blocks' scales in fp32, the whole tensor's doubly quantized ones exactly, since the nested
// statistics run over a whole tensor's scales (a shard's own would give another base on every tp).
Nf4Options nf4_store_options(const config::Config& c);

// The compute dtype of train.precision (f32, bf16, f16).
DType compute_dtype(config::Precision p);

}  // namespace zt::model
