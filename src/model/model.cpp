// The model factory: the family comes from the parameter table's shape.
#include "model/model.hpp"

#include "core/error.hpp"
#include "model/gpt2.hpp"
#include "model/llama.hpp"

namespace zt::model {

void Model::set_lora(Lora* lora) {
  ZT_CHECK(lora == nullptr, "LoRA adapters are not supported by this model");
}

std::unique_ptr<Model> make_model(backend::Backend& backend, const ParamTable& table, int micro_batch,
                                  Recompute recompute, DType compute, Stage stage) {
  if (table.shape().arch == Arch::kLlama)
    return std::make_unique<Llama>(backend, table, micro_batch, recompute, compute, stage);
  return std::make_unique<Gpt2>(backend, table, micro_batch, recompute, compute, stage);
}

std::size_t model_activation_bytes(const GptShape& shape, int micro_batch, Recompute recompute, DType compute,
                                   Stage stage) {
  if (shape.arch == Arch::kLlama) return Llama::activation_bytes(shape, micro_batch, recompute, compute, stage);
  return Gpt2::activation_bytes(shape, micro_batch, recompute, compute, stage);
}

}  // namespace zt::model
