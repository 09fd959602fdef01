// The model's vocabulary from the configuration (from_config.hpp).
#include "model/from_config.hpp"

#include "config/lora.hpp"
#include "model/family.hpp"

namespace zt::model {

GptShape model_shape(const config::ModelConfig& m) { return family_of(m.arch).shape_of(m); }

LoraSpec lora_spec(const config::Config& c) {
  return {static_cast<int>(c.lora.rank), c.lora.alpha, c.lora.rslora, config::lora_target_modules(c), c.lora.dropout,
          c.train.seed};
}

Nf4Options nf4_options(const config::Config& c) { return {.block = 64, .double_quant = c.lora.base_double_quant}; }

Nf4Options nf4_store_options(const config::Config& c) {
  return {.block = 64, .double_quant = c.lora.base_double_quant && c.parallel.tp == 1};
}

DType compute_dtype(config::Precision p) {
  switch (p) {
    case config::Precision::kFp32: return DType::kF32;
    case config::Precision::kBf16: return DType::kBF16;
    case config::Precision::kFp16: return DType::kF16;
  }
  return DType::kF32;
}

}  // namespace zt::model
