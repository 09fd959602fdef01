// Either family over a tensor-parallel group (gpt2_tp.hpp, llama_tp.hpp), and what the optimizer needs
// of a split model beyond model::Model: the global gradient norm from the shards.
#pragma once

#include <memory>

#include "backend/backend.hpp"
#include "dist/communicator.hpp"
#include "model/model.hpp"

namespace zt::tp {

// The model of local.shape()'s family; local = model::tp_local_table(global, group.size()).
std::unique_ptr<model::Model> make_tp_model(backend::Backend& backend, dist::Communicator& group,
                                            const model::ParamTable& local, int micro_batch);

// The squared L2 norm of the whole model's gradient from each rank's shard (grads: the local table's
// flat f32 buffer): split parameters summed over the group, replicated ones counted once.
double grad_norm_squared(backend::Backend& be, dist::Communicator& group, const model::ParamTable& local,
                         const backend::Tensor& grads);

}  // namespace zt::tp
