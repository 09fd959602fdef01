// The family factory and the split model's gradient norm (tp_model.hpp).
#include "tp/tp_model.hpp"

#include "model/tp_split.hpp"
#include "tp/gpt2_tp.hpp"
#include "tp/llama_tp.hpp"

namespace zt::tp {

using backend::Tensor;

std::unique_ptr<model::Model> make_tp_model(backend::Backend& backend, dist::Communicator& group,
                                            const model::ParamTable& local, int micro_batch) {
  if (local.shape().arch == model::Arch::kGpt2) return std::make_unique<Gpt2Tp>(backend, group, local, micro_batch);
  return std::make_unique<LlamaTp>(backend, group, local, micro_batch);
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
