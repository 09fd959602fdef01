// LayerNorm and RMSNorm on the residual stream's rows (norm.hpp).
#include "layers/norm.hpp"

#include "core/error.hpp"

namespace zt::layers {

using backend::Tensor;

NormStats Norm::carve_stats(backend::Carver& c, NormKind kind, std::int64_t rows, bool shared, NormStats& working) {
  NormStats st;
  if (kind == NormKind::kLayerNorm) st.mean = c.per_block(shared, working.mean, {rows}, true);
  st.rstd = c.per_block(shared, working.rstd, {rows}, true);
  return st;
}

NormScratch Norm::carve_scratch(backend::Carver& c, std::int64_t C) { return {c.stat({2 * C})}; }

Tensor Norm::scratch_weight() const { return Tensor(scratch_.dnorm.data, DType::kF32, {C_}); }
Tensor Norm::scratch_bias() const {
  if (kind_ != NormKind::kLayerNorm) return Tensor();
  return Tensor(static_cast<float*>(scratch_.dnorm.data) + C_, DType::kF32, {C_});
}

void Norm::forward(Tensor out, const NormStats& st, Tensor x, Tensor weight, Tensor bias) const {
  if (kind_ == NormKind::kLayerNorm) return ctx_.be.layernorm_forward(out, st.mean, st.rstd, x, weight, bias);
  ctx_.be.rmsnorm_forward(out, st.rstd, x, weight, eps_);
}

void Norm::add_forward(Tensor res, Tensor out, const NormStats& st, Tensor a, Tensor b, Tensor weight,
                       Tensor bias) const {
  if (kind_ == NormKind::kRmsNorm) return ctx_.be.add_rmsnorm_forward(res, out, st.rstd, a, b, weight, eps_);
  ctx_.be.add_layernorm_forward(res, out, st.mean, st.rstd, a, b, weight, bias);
}

void Norm::reduce_scratch(Tensor dweight, Tensor dbias) {
  if (dweight.empty()) return;  // frozen: dropped
  const std::int64_t used = kind_ == NormKind::kLayerNorm ? 2 * C_ : C_;  // weight (| bias)
  all_reduce_sum(ctx_, Tensor(scratch_.dnorm.data, DType::kF32, {used}));
  ctx_.be.accumulate(dweight, scratch_weight());
  if (kind_ == NormKind::kLayerNorm) ctx_.be.accumulate(dbias, scratch_bias());
}

void Norm::backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor x, Tensor weight,
                    const NormStats& st) {
  const bool own = direct(dweight);
  if (!own && !dweight.empty()) ctx_.be.fill_zero(scratch_.dnorm);  // a frozen norm's scratch is dropped: no need
  const Tensor dw = own ? dweight : scratch_weight(), db = own ? dbias : scratch_bias();
  if (kind_ == NormKind::kLayerNorm) ctx_.be.layernorm_backward(dinp, dw, db, dout, x, weight, st.mean, st.rstd);
  else ctx_.be.rmsnorm_backward(dinp, dw, dout, x, weight, st.rstd);
  if (!own) reduce_scratch(dweight, dbias);
}

void Norm::backward_accumulate(Tensor dres, Tensor dweight, Tensor dbias, Tensor dout, Tensor x, Tensor weight,
                               const NormStats& st) {
  const bool own = direct(dweight);
  if (!own && !dweight.empty()) ctx_.be.fill_zero(scratch_.dnorm);
  const Tensor dw = own ? dweight : scratch_weight(), db = own ? dbias : scratch_bias();
  if (kind_ == NormKind::kLayerNorm)
    ctx_.be.layernorm_backward_accumulate(dres, dw, db, dout, x, weight, st.mean, st.rstd);
  else ctx_.be.rmsnorm_backward_accumulate(dres, dw, dout, x, weight, st.rstd);
  if (!own) reduce_scratch(dweight, dbias);
}

}  // namespace zt::layers
