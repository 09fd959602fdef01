// Either family over a tensor-parallel group (gpt2_tp.hpp, llama_tp.hpp), and what the optimizer needs
// of a split model beyond model::Model: the global gradient norm from the shards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/backend.hpp"
#include "dist/communicator.hpp"
#include "model/model.hpp"

namespace zt::tp {

// The model of local.shape()'s family; local = model::tp_local_table(global, group.size()). stage: a
// pipeline stage's blocks (parallel.pp x parallel.tp), with local the TP cut of its rank's table
// (model/stage_split.hpp's PipelineCut::table); default the whole model.
std::unique_ptr<model::Model> make_tp_model(backend::Backend& backend, dist::Communicator& group,
                                            const model::ParamTable& local, int micro_batch,
                                            bool sequence_parallel = false,
                                            model::Recompute recompute = model::Recompute::kNone,
                                            DType compute = DType::kF32, model::Stage stage = {});

// Model::activation_bytes of make_tp_model's model for any shape and degree, allocating nothing (the
// memory planner's activations row under parallel.tp; one model of a pipeline stage's with `stage`).
std::size_t tp_activation_bytes(const model::GptShape& shape, int micro_batch, int tp, bool sequence_parallel,
                                model::Recompute recompute = model::Recompute::kNone, DType compute = DType::kF32,
                                model::Stage stage = {});

// The theory of what a rank hands its TP group per micro-batch (forward + backward, recompute=none;
// full recomputation repeats each block's forward collectives in backward), in dist::CommStats'
// payload bytes (the buffer passed; gathers and scatters count the whole [N, C]). The [N, C]
// activations travel in the compute dtype (its bytes below, f32 = 4), the cross-entropy's statistics
// in f64 (host values: Communicator::all_reduce_values) and the norms' weight gradients in f32.
// With N = B*T rows, L blocks, C channels:
//   without SP: all-reduce of [N, C] after the embedding and each row-parallel layer (2L) forward, and
//     after each column-parallel layer's dinp (2L) and the LM head's backward: (4L + 2) N C; plus the
//     cross-entropy's per-row max, sum-exp and target logit: 3N.
//   with SP: each of those all-reduces becomes an all-gather plus a reduce-scatter of [N, C]:
//     (4L + 2) N C each, and backward gathers the 2L + 1 column-parallel inputs again (Megatron-SP
//     keeps only each rank's rows): all-gathers (6L + 3) N C in all. The all-reduces left are the
//     cross-entropy's 3N and the norms' weight (and GPT-2's bias) gradients: (2L + 1) C per kind.
// tp = 1 communicates nothing. A LoRA run differs slightly (not counted): its frozen base skips the norms'
// gradient all-reduces under SP, and each block's backward all-reduces the replicated adapter factors'
// fp32 gradients (r x in or out x r per adapted module: model/lora.hpp).
struct TpCommBytes {
  std::uint64_t all_reduce = 0, all_gather = 0, reduce_scatter = 0;
};
TpCommBytes tp_comm_bytes(const model::GptShape& shape, int micro_batch, int tp, bool sequence_parallel,
                          DType compute = DType::kF32);

// The squared L2 norm of the whole model's gradient from each rank's shard (grads: the local table's
// flat f32 buffer): split parameters summed over the group, replicated ones counted once.
double grad_norm_squared(backend::Backend& be, dist::Communicator& group, const model::ParamTable& local,
                         const backend::Tensor& grads);

}  // namespace zt::tp
