// Column- and row-parallel linear layers (linear.hpp).
#include "layers/linear.hpp"

#include "core/error.hpp"

namespace zt::layers {

using backend::Tensor;

namespace {

void check_row_blocks(const TpContext& ctx, const Tensor& block, const Tensor& full, const char* what) {
  ZT_CHECK(ctx.group != nullptr, what, ": sequence parallelism needs a tensor-parallel group");
  ZT_CHECK_EQ(full.numel(), block.numel() * ctx.size(), what, ": full must hold tp blocks of rows");
  ZT_CHECK(full.dtype == block.dtype, what, ": dtypes differ");
}
}  // namespace

void all_reduce_sum(const TpContext& ctx, Tensor t) {
  if (ctx.size() > 1) ctx.group->all_reduce(dist::span_of(t), dist::ReduceOp::kSum)->wait();
}

void gather_rows(const TpContext& ctx, Tensor block, Tensor full) {
  check_row_blocks(ctx, block, full, "gather_rows");
  ctx.group->all_gather(dist::span_of(block), dist::span_of(full))->wait();
}

void reduce_scatter_rows(const TpContext& ctx, Tensor full, Tensor block) {
  check_row_blocks(ctx, block, full, "reduce_scatter_rows");
  ctx.group->reduce_scatter(dist::span_of(full), dist::span_of(block), dist::ReduceOp::kSum)->wait();
}

void column_parallel_forward(const TpContext& ctx, Tensor out, Tensor inp, Tensor full, Tensor weight, Tensor bias,
                             backend::WeightLayout layout) {
  if (ctx.sequence_parallel) gather_rows(ctx, inp, full);
  ctx.be.matmul_forward(out, ctx.sequence_parallel ? full : inp, weight, bias, layout);
}

void column_parallel_backward(const TpContext& ctx, Tensor dinp, Tensor dfull, Tensor dweight, Tensor dbias, Tensor dout,
                              Tensor full, Tensor weight, backend::WeightLayout layout, const BeforeReduce& before) {
  // Each rank's dout_r @ W_r^T is its columns' share of dinp: summed over the group (and, under SP,
  // each rank keeps the sum of its own rows).
  const Tensor partial = ctx.sequence_parallel ? dfull : dinp;
  ctx.be.matmul_backward(partial, dweight, dbias, dout, full, weight, layout);
  if (before) before(partial);
  if (ctx.sequence_parallel) reduce_scatter_rows(ctx, dfull, dinp);
  else all_reduce_sum(ctx, dinp);
}

void row_parallel_forward(const TpContext& ctx, Tensor out, Tensor partial, Tensor inp, Tensor weight, Tensor bias,
                          backend::WeightLayout layout, const BeforeReduce& before) {
  const Tensor sum = ctx.sequence_parallel ? partial : out;
  ctx.be.matmul_forward(sum, inp, weight, ctx.rank() == 0 ? bias : Tensor{}, layout);
  if (before) before(sum);
  if (ctx.sequence_parallel) reduce_scatter_rows(ctx, partial, out);
  else all_reduce_sum(ctx, out);
}

void row_parallel_backward(const TpContext& ctx, Tensor dinp, Tensor dfull, Tensor dweight, Tensor dbias, Tensor dout,
                           Tensor inp, Tensor weight, backend::WeightLayout layout) {
  if (ctx.sequence_parallel) gather_rows(ctx, dout, dfull);
  ctx.be.matmul_backward(dinp, dweight, dbias, ctx.sequence_parallel ? dfull : dout, inp, weight, layout);
}

void column_parallel_gelu_forward(const TpContext& ctx, Tensor act, Tensor pre, Tensor inp, Tensor full, Tensor weight,
                                  Tensor bias, backend::WeightLayout layout) {
  if (ctx.sequence_parallel) gather_rows(ctx, inp, full);
  ctx.be.matmul_gelu_forward(act, pre, ctx.sequence_parallel ? full : inp, weight, bias, layout);
}

void row_parallel_dgelu_backward(const TpContext& ctx, Tensor dpre, Tensor dfull, Tensor dweight, Tensor dbias,
                                 Tensor dbias_pre, Tensor dout, Tensor act, Tensor weight, Tensor pre,
                                 backend::WeightLayout layout) {
  if (ctx.sequence_parallel) gather_rows(ctx, dout, dfull);
  const Tensor whole = ctx.sequence_parallel ? dfull : dout;
  if (!dweight.empty() || !dbias.empty())
    ctx.be.matmul_backward(Tensor(), dweight, dbias, whole, act, weight, layout);
  ctx.be.matmul_dgelu_backward(dpre, dbias_pre, whole, weight, pre, layout);
}

}  // namespace zt::layers
