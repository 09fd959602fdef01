// The model factory: one decoder over the table's family (family.hpp).
#include "model/model.hpp"

#include "model/decoder.hpp"

namespace zt::model {

std::unique_ptr<Model> make_model(backend::Backend& backend, const ParamTable& table, const ModelOptions& options) {
  return std::make_unique<Decoder>(backend, table, options);
}

std::size_t model_activation_bytes(const GptShape& shape, const ModelOptions& options, int tp) {
  return Decoder::activation_bytes(shape, options, tp);
}

}  // namespace zt::model
