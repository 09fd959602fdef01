// The model's vocabulary from the typed configuration, read once: the shape of a [model] section, the
// LoRA adapters of the lora.* keys and the compute dtype of train.precision.
#pragma once

#include "config/config.hpp"
#include "core/dtype.hpp"
#include "model/lora.hpp"
#include "model/param_table.hpp"

namespace zt::model {

// The model shape of a [model] section (checked; the vocabulary padded as the model pads it), by its
// family (family.hpp).
GptShape model_shape(const config::ModelConfig& m);

// The LoRA adapters of the lora.* keys (lora.rank > 0).
LoraSpec lora_spec(const config::Config& c);

// The compute dtype of train.precision (f32, bf16, f16).
DType compute_dtype(config::Precision p);

}  // namespace zt::model
