// The family factory and the split model's gradient norm (tp_model.hpp).
#include "tp/tp_model.hpp"

#include "model/tp_split.hpp"
#include "tp/gpt2_tp.hpp"
#include "tp/llama_tp.hpp"

namespace zt::tp {

using backend::Tensor;

std::unique_ptr<model::Model> make_tp_model(backend::Backend& backend, dist::Communicator& group,
                                            const model::ParamTable& local, int micro_batch, bool sequence_parallel,
                                            model::Recompute recompute, DType compute, model::Stage stage) {
  if (local.shape().arch == model::Arch::kGpt2)
    return std::make_unique<Gpt2Tp>(backend, group, local, micro_batch, sequence_parallel, recompute, compute, stage);
  return std::make_unique<LlamaTp>(backend, group, local, micro_batch, sequence_parallel, recompute, compute, stage);
}

std::size_t tp_activation_bytes(const model::GptShape& shape, int micro_batch, int tp, bool sequence_parallel,
                                model::Recompute recompute, DType compute, model::Stage stage) {
  if (shape.arch == model::Arch::kGpt2)
    return Gpt2Tp::activation_bytes(shape, micro_batch, tp, sequence_parallel, recompute, compute, stage);
  return LlamaTp::activation_bytes(shape, micro_batch, tp, sequence_parallel, recompute, compute, stage);
}

TpCommBytes tp_comm_bytes(const model::GptShape& s, int micro_batch, int tp, bool sequence_parallel, DType compute) {
  if (tp == 1) return {};
  const std::uint64_t N = std::uint64_t(micro_batch) * s.seq_len, C = s.n_embd, L = s.n_layer, f32 = 4, f64 = 8;
  const std::uint64_t act = dtype_size(compute);
  const std::uint64_t activations = (4 * L + 2) * N * C, ce = 3 * N;
  if (!sequence_parallel) return {act * activations + f64 * ce, 0, 0};
  const std::uint64_t norm_kinds = s.arch == model::Arch::kGpt2 ? 2 : 1;  // LayerNorm weight + bias; RMSNorm weight
  const std::uint64_t regathered = (2 * L + 1) * N * C;  // backward's column-parallel inputs
  return {f64 * ce + f32 * norm_kinds * (2 * L + 1) * C, act * (activations + regathered), act * activations};
}

double grad_norm_squared(backend::Backend& be, dist::Communicator& group, const model::ParamTable& local,
                         const Tensor& grads) {
  double split = 0, replicated = 0;
  for (std::size_t p = 0; p < local.params().size(); ++p) {
    const model::ParamInfo& info = local.params()[p];
    const Tensor t(static_cast<float*>(grads.data) + info.offset, DType::kF32, {static_cast<std::int64_t>(info.numel)});
    const bool is_split = model::tp_split_of(info, local.shape()).kind != model::TpSplit::Kind::kReplicated;
    (is_split ? split : replicated) += be.sum_of_squares(t);
  }
  return group.all_reduce_value(split, dist::ReduceOp::kSum) + replicated;
}

}  // namespace zt::tp
