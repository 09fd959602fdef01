// The SDPA operation graphs (cudnn_sdpa.hpp). Each graph is the pattern cudnn-frontend's composite SDPA
// nodes emit for cuDNN 9 below 9.21 (fp16/bf16 I/O, f32 intermediates and compute, a by-value scale,
// causal = top-left diagonal, no bias, dropout or padding): cuDNN's fused attention engines match this
// pattern, op by op and dtype by dtype, so the order, the virtual tensors' dtypes and the strides below
// follow it deliberately, including where they look arbitrary.
//
// Layouts (elements): qkv [B,T,W] with W = C + 2 NKV hs holds q | k | v per token, so head h of q is
// the [T, hs] matrix at qkv + h hs with row stride W: Q [B,NH,T,hs] strides (T W, hs, W, 1), K and V
// [B,NKV,T,hs] at offsets C and C + NKV hs; out and dout [B,NH,T,hs] strides (T C, hs, C, 1).
#include "backend/cuda/cudnn_sdpa.hpp"

#include <limits>
#include <utility>

namespace zt::backend::cuda::cudnn {
namespace {

constexpr cudnnDataType_t kF32 = CUDNN_DATA_FLOAT;

struct Dims {
  std::int64_t B, T, NH, NKV, hs, C, W;
};

Dims dims_of(const SdpaKey& k) {
  const std::int64_t C = static_cast<std::int64_t>(k.NH) * k.hs;
  return {k.B, k.T, k.NH, k.NKV, k.hs, C, C + 2 * static_cast<std::int64_t>(k.NKV) * k.hs};
}

cudnnDataType_t io_type(DType t) {
  ZT_CHECK(t == DType::kBF16 || t == DType::kF16, "cuDNN SDPA: dtype ", dtype_name(t), " is not bf16 or f16");
  return t == DType::kBF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
}

// H heads of hs columns in rows of `row` elements: [B,H,T,hs].
Shape heads(const Dims& d, std::int64_t H, std::int64_t row) {
  return {{d.B, H, d.T, d.hs}, {d.T * row, d.hs, row, 1}};
}
Shape transposed(Shape s) {  // the last two dims swapped: K^T [B,H,hs,T] over K's memory
  std::swap(s.dims[2], s.dims[3]);
  std::swap(s.strides[2], s.strides[3]);
  return s;
}
Shape scores(const Dims& d) { return {{d.B, d.NH, d.T, d.T}, {d.NH * d.T * d.T, d.T * d.T, d.T, 1}}; }
Shape scores_transposed(const Dims& d) { return transposed(scores(d)); }
Shape rows(const Dims& d) { return {{d.B, d.NH, d.T, 1}, {d.NH * d.T, d.T, 1, 1}}; }
// dK or dV of every query head before the sum over its group: [B,NH,T,hs], packed.
Shape full_heads(const Dims& d) { return {{d.B, d.NH, d.T, d.hs}, {d.NH * d.T * d.hs, d.T * d.hs, d.hs, 1}}; }

// Virtual tensors, uids 100 and up.
class Graph {
 public:
  GraphBuilder g;
  Uid virt(const Shape& s, cudnnDataType_t t = kF32) {
    g.tensor(next_, s, t, true);
    return next_++;
  }

 private:
  Uid next_ = 100;
};

// Keys after the query masked: score[i][j] kept where i >= j (row >= column), else kNegInf. This is
// cudnn-frontend's causal mask (top-left diagonal band, right bound 0) before cuDNN 9.21.
Uid causal_mask(Graph& gr, Uid score, const Shape& s) {
  const Uid row = gr.virt(s, CUDNN_DATA_INT32), col = gr.virt(s, CUDNN_DATA_INT32);
  const Uid keep = gr.virt(s, CUDNN_DATA_BOOLEAN), out = gr.virt(s);
  gr.g.pointwise(CUDNN_POINTWISE_GEN_INDEX, score, row, GraphBuilder::kNone, GraphBuilder::kNone, kF32, 2);
  gr.g.pointwise(CUDNN_POINTWISE_GEN_INDEX, score, col, GraphBuilder::kNone, GraphBuilder::kNone, kF32, 3);
  gr.g.pointwise(CUDNN_POINTWISE_CMP_GE, row, keep, col, GraphBuilder::kNone, CUDNN_DATA_BOOLEAN);
  gr.g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, score, out, kNegInf, keep);  // keep ? score : neg_inf
  return out;
}

// S = scale Q K^T, the same first steps in both passes.
Uid scaled_scores(Graph& gr, const Dims& d) {
  const Uid s0 = gr.virt(scores(d)), s1 = gr.virt(scores(d));
  gr.g.matmul(kQ, kK, s0);
  gr.g.pointwise(CUDNN_POINTWISE_MUL, s0, s1, kScale);
  return s1;
}

// out = softmax(mask(S)) V, Stats = M + log Z (M = row max, Z = sum exp(S - M)).
void forward_graph(Graph& gr, const Dims& d, cudnnDataType_t io) {
  GraphBuilder& g = gr.g;
  g.tensor(kQ, heads(d, d.NH, d.W), io, false);
  g.tensor(kK, transposed(heads(d, d.NKV, d.W)), io, false);
  g.tensor(kV, heads(d, d.NKV, d.W), io, false);
  g.tensor(kO, heads(d, d.NH, d.C), io, false);
  g.tensor(kStats, rows(d), kF32, false);
  g.scalar(kScale);
  g.scalar(kNegInf);
  const Uid s = causal_mask(gr, scaled_scores(gr, d), scores(d));
  const Uid m = gr.virt(rows(d)), shifted = gr.virt(scores(d)), e = gr.virt(scores(d));
  const Uid z = gr.virt(rows(d)), log_z = gr.virt(rows(d)), p = gr.virt(scores(d), io);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, s, m);
  g.pointwise(CUDNN_POINTWISE_SUB, s, shifted, m);
  g.pointwise(CUDNN_POINTWISE_EXP, shifted, e);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, z);
  g.pointwise(CUDNN_POINTWISE_LOG, z, log_z);
  g.pointwise(CUDNN_POINTWISE_ADD, m, kStats, log_z);
  g.pointwise(CUDNN_POINTWISE_DIV, e, p, z);  // P rounded to the I/O dtype for the second matmul
  g.matmul(p, kV, kO);
}

// dK or dV: the product into `out` directly when every query head has its own K/V head, else into
// a [B,NH,T,hs] tensor summed over each group of NH/NKV query heads (cudnn-frontend's GQA lowering).
void grouped_matmul(Graph& gr, const Dims& d, cudnnDataType_t io, Uid a, Uid b, Uid out) {
  if (d.NH == d.NKV) return gr.g.matmul(a, b, out);
  const Uid full = gr.virt(full_heads(d), io);
  gr.g.matmul(a, b, full);
  gr.g.reduction(CUDNN_REDUCE_TENSOR_ADD, full, out);
}

void backward_tensors(GraphBuilder& g, const Dims& d, cudnnDataType_t io, bool dq_accum) {
  g.tensor(kQ, heads(d, d.NH, d.W), io, false);
  g.tensor(kK, transposed(heads(d, d.NKV, d.W)), io, false);
  g.tensor(kV, transposed(heads(d, d.NKV, d.W)), io, false);  // V^T [B,NKV,hs,T]
  g.tensor(kO, heads(d, d.NH, d.C), io, false);
  g.tensor(kDO, heads(d, d.NH, d.C), io, false);
  g.tensor(kStats, rows(d), kF32, false);
  g.tensor(kDQ, heads(d, d.NH, d.W), io, false);
  g.tensor(kDK, heads(d, d.NKV, d.W), io, false);
  g.tensor(kDV, heads(d, d.NKV, d.W), io, false);
  g.tensor(kSoftmaxSum, rows(d), kF32, false);
  if (dq_accum) g.tensor(kDQAccum, full_heads(d), kF32, false);
  g.scalar(kScale);
  g.scalar(kNegInf);
  g.scalar(kOne);
}

// dS = P (dP - D) scale with P = exp(mask(S) - Stats), dP = dO V^T, D = rowsum(dO O); then
// dV = P^T dO, dK = dS^T Q, dQ = dS K (through an f32 accumulator unless deterministic).
void backward_graph(Graph& gr, const Dims& d, cudnnDataType_t io, bool dq_accum) {
  GraphBuilder& g = gr.g;
  backward_tensors(g, d, io, dq_accum);
  // D, with the odd strides cudnn-frontend gives this virtual product.
  const Uid dO_O = gr.virt({{d.B, d.NH, d.T, d.hs}, {d.NH * d.T * d.hs, d.T * d.hs, d.NH * d.hs, 1}});
  const Uid row_sum = gr.virt(rows(d));
  g.pointwise(CUDNN_POINTWISE_MUL, kDO, dO_O, kO);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, dO_O, row_sum);
  g.pointwise(CUDNN_POINTWISE_MUL, row_sum, kSoftmaxSum, kOne);

  const Uid centred = gr.virt(scores(d));
  g.pointwise(CUDNN_POINTWISE_SUB, scaled_scores(gr, d), centred, kStats);
  const Uid p = gr.virt(scores(d)), p_t = gr.virt(scores_transposed(d), io);
  g.pointwise(CUDNN_POINTWISE_EXP, causal_mask(gr, centred, scores(d)), p);
  g.reshape(p, p_t);
  grouped_matmul(gr, d, io, p_t, kDO, kDV);

  const Uid dp = gr.virt(scores(d)), dp_centred = gr.virt(scores(d)), ds0 = gr.virt(scores(d));
  const Uid ds = gr.virt(scores(d)), ds_t = gr.virt(scores_transposed(d), io);
  g.matmul(kDO, kV, dp);
  g.pointwise(CUDNN_POINTWISE_SUB, dp, dp_centred, kSoftmaxSum);
  g.pointwise(CUDNN_POINTWISE_MUL, dp_centred, ds0, p);
  g.pointwise(CUDNN_POINTWISE_MUL, ds0, ds, kScale);
  g.reshape(ds, ds_t);
  grouped_matmul(gr, d, io, ds_t, kQ, kDK);

  const Uid k = gr.virt(heads(d, d.NKV, d.W));  // K seen untransposed again (f32-typed, as the frontend's)
  g.reshape(kK, k);
  if (!dq_accum) return g.matmul(ds, k, kDQ);
  g.matmul(ds, k, kDQAccum);
  g.pointwise(CUDNN_POINTWISE_IDENTITY, kDQAccum, kDQ);
}

std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

GraphBuilder sdpa_graph(const SdpaKey& key) {
  const Dims d = dims_of(key);
  const cudnnDataType_t io = io_type(key.dtype);
  Graph gr;
  if (key.pass == SdpaKey::Pass::kForward) forward_graph(gr, d, io);
  else backward_graph(gr, d, io, !key.deterministic);
  return std::move(gr.g);
}

std::unique_ptr<SdpaPlan> build_sdpa_plan(cudnnHandle_t handle, const SdpaKey& key, int cudnn_version) {
  const Dims d = dims_of(key);
  const bool forward = key.pass == SdpaKey::Pass::kForward;
  const bool dq_accum = !forward && !key.deterministic;
  auto plan = std::make_unique<SdpaPlan>();
  plan->graph = sdpa_graph(key);
  plan->exec = plan->graph.build(handle, !forward && key.deterministic);
  const std::size_t rows_bytes = static_cast<std::size_t>(d.B * d.NH * d.T) * sizeof(float);
  std::size_t at = 0;
  if (dq_accum) {
    plan->has_dq_accum = true;
    plan->zero_dq_accum = cudnn_version < 90600;
    at = align256(rows_bytes * static_cast<std::size_t>(d.hs));
  }
  if (!forward) {
    plan->softmax_sum_offset = at;
    at = align256(at + rows_bytes);
  }
  plan->engine_offset = at;
  plan->workspace_bytes = at + static_cast<std::size_t>(plan->exec.workspace_bytes);
  // cuDNN before 9.10 wants the lowest finite float as the masked score (cudnn-frontend's choice too).
  plan->neg_inf = cudnn_version < 91000 ? std::numeric_limits<float>::lowest() : -std::numeric_limits<float>::infinity();
  return plan;
}

}  // namespace zt::backend::cuda::cudnn
