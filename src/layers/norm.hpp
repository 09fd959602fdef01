// The pre-norms of a decoder's residual stream: LayerNorm (weight and bias, GPT-2) or RMSNorm (weight,
// Llama), on the rows this rank holds ([N, C], or its [N/tp, C] block under sequence parallelism).
// Under SP each rank's norm sees its rows only, so its weight (and bias) gradients are partial: they are
// computed into a scratch, summed over the TP group, then added (+=) to the micro-batches' gradients. A
// frozen norm (empty dweight: LoRA's base) writes them to the scratch and drops them, with no collective.
// Statistics are f32: LayerNorm keeps mean and rstd, RMSNorm rstd only (its mean tensor is empty).
#pragma once

#include <cstdint>

#include "backend/backend.hpp"
#include "backend/carver.hpp"
#include "layers/linear.hpp"

namespace zt::layers {

enum class NormKind { kLayerNorm, kRmsNorm };

struct NormStats {
  backend::Tensor mean, rstd;  // [R] f32; mean empty for RMSNorm
};

// The norm's gradient scratch: the partial (SP) or dropped (frozen) weight | bias gradients [2C] f32.
struct NormScratch {
  backend::Tensor dnorm;
};

class Norm {
 public:
  // eps: RMSNorm's epsilon (LayerNorm's is the op's 1e-5). C: the channels.
  Norm(const TpContext& ctx, NormKind kind, float eps, std::int64_t C) : ctx_(ctx), kind_(kind), eps_(eps), C_(C) {}
  NormKind kind() const { return kind_; }
  // The statistics of `rows` rows (a block keeps them for backward; `shared`: the recompute mode rebuilds
  // them in one working set), and the norm's gradient scratch, carved from the model's arena.
  static NormStats carve_stats(backend::Carver& c, NormKind kind, std::int64_t rows, bool shared, NormStats& working);
  static NormScratch carve_scratch(backend::Carver& c, std::int64_t C);
  void set_scratch(const NormScratch& scratch) { scratch_ = scratch; }

  // out = norm(x) * weight (+ bias).
  void forward(backend::Tensor out, const NormStats& st, backend::Tensor x, backend::Tensor weight,
               backend::Tensor bias) const;
  // res = a + b (the residual add, rounded to the compute dtype), then out = norm(res): one fused op.
  void add_forward(backend::Tensor res, backend::Tensor out, const NormStats& st, backend::Tensor a, backend::Tensor b,
                   backend::Tensor weight, backend::Tensor bias) const;
  // dinp = d norm (written); dweight, dbias += (partial sums reduced under SP; empty: frozen).
  void backward(backend::Tensor dinp, backend::Tensor dweight, backend::Tensor dbias, backend::Tensor dout,
                backend::Tensor x, backend::Tensor weight, const NormStats& st);
  // dres += d norm: the residual stream's gradient takes the norm's input gradient.
  void backward_accumulate(backend::Tensor dres, backend::Tensor dweight, backend::Tensor dbias, backend::Tensor dout,
                           backend::Tensor x, backend::Tensor weight, const NormStats& st);

 private:
  // The weight (and bias) gradient views the op writes: the parameters' own, or the scratch.
  bool direct(const backend::Tensor& dweight) const { return !ctx_.sequence_parallel && !dweight.empty(); }
  backend::Tensor scratch_weight() const;
  backend::Tensor scratch_bias() const;
  void reduce_scratch(backend::Tensor dweight, backend::Tensor dbias);  // SP: sum, then +=; frozen: drop

  const TpContext& ctx_;
  NormKind kind_;
  float eps_;
  std::int64_t C_;
  NormScratch scratch_;
};

}  // namespace zt::layers
