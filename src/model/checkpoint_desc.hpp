// The model as its checkpoints describe it (ckpt/state.hpp): the model hands ckpt plain descriptors,
// ckpt never sees the model's classes (Megatron's ShardedTensor idea), so ztrain and zckpt describe a
// model the same way without the trainer.
#pragma once

#include "ckpt/state.hpp"
#include "model/param_table.hpp"

namespace zt::model {

// The parameter table as the checkpoint describes it: every parameter's name, shapes and flat offset,
// the units, and the hyper-parameters a reader needs to rebuild the table (zckpt).
ckpt::ModelDesc describe_model(const ParamTable& table);

}  // namespace zt::model
