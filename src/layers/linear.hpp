// Megatron's tensor-parallel linear layers (Shoeybi et al. 2019, §3: its f and g operators) over the
// backend's matmul and the TP group's communicator. N rows (B*T tokens), tp ranks in the group.
//   column-parallel: out_r [N, OC/tp] = inp [N, IC] @ W_r (+ b_r); the input is whole on every rank, so
//     backward's dinp is the sum over the group of each rank's dout_r @ W_r^T (all-reduce).
//   row-parallel: out [N, OC] = sum_r inp_r [N, IC/tp] @ W_r (all-reduce), + b once; backward needs no
//     communication: dinp_r = dout @ W_r^T, and every rank's dbias is the whole (replicated) gradient.
// Sequence parallel (Korthikanti et al. 2022): outside these layers each rank holds a block of rows,
// [N/tp, C] (rank r: rows r*N/tp ...); column-parallel all-gathers its input first and reduce-scatters
// dinp, row-parallel reduce-scatters its output instead of all-reducing and all-gathers dout first.
// The collectives run in the activations' dtype (f32, bf16 or f16): NCCL sums 16 bits natively, the MPI
// communicator widens each element to fp32, sums and rounds once.
// tp = 1 (no group, or a group of one) is the plain layer: the same matmul, no collective, no copy, so
// a model written on these layers is the single-rank model too (Megatron-Core's mappings do the same).
#pragma once

#include <functional>

#include "backend/backend.hpp"
#include "dist/communicator.hpp"

namespace zt::layers {

// The layers' view of tensor parallelism: the backend, the TP group (null: tp = 1) and whether the
// residual stream is split by rows (sequence parallelism; never at tp = 1).
struct TpContext {
  backend::Backend& be;
  dist::Communicator* group = nullptr;
  bool sequence_parallel = false;
  int size() const { return group ? group->size() : 1; }
  int rank() const { return group ? group->rank() : 0; }
};

// What joins a layer's result before the group sums it (LoRA's adapters): called with the tensor about
// to be reduced, in its layout ([N, .]: the whole rows, also under SP): a row-parallel layer's partial
// output, a column-parallel layer's partial input gradient. Empty: nothing joins.
using BeforeReduce = std::function<void(const backend::Tensor&)>;

// inp: the layer input as this rank holds it ([N, IC]; under SP [N/tp, IC]). full [N, IC]: under SP the
// scratch the gathered input is written to (backward reads it as `full`); otherwise pass inp again.
void column_parallel_forward(const TpContext& ctx, backend::Tensor out, backend::Tensor inp, backend::Tensor full,
                             backend::Tensor weight, backend::Tensor bias, backend::WeightLayout layout);
// dinp shaped as inp (written). dfull [N, IC]: scratch under SP (empty otherwise). full: as forward
// left it. dweight, dbias +=; empty ones (a frozen weight) are not computed.
void column_parallel_backward(const TpContext& ctx, backend::Tensor dinp, backend::Tensor dfull, backend::Tensor dweight,
                              backend::Tensor dbias, backend::Tensor dout, backend::Tensor full, backend::Tensor weight,
                              backend::WeightLayout layout, const BeforeReduce& before = {});

// out [N, OC] (under SP [N/tp, OC], with partial [N, OC] scratch for the sum before it is scattered;
// otherwise pass out again). inp [N, IC/tp]. The bias (replicated) is added by TP rank 0 only, so the
// sum holds it once.
void row_parallel_forward(const TpContext& ctx, backend::Tensor out, backend::Tensor partial, backend::Tensor inp,
                          backend::Tensor weight, backend::Tensor bias, backend::WeightLayout layout,
                          const BeforeReduce& before = {});
// dinp [N, IC/tp] (written). dout as out; under SP dfull [N, OC] is scratch for the gathered dout
// (empty otherwise). dweight, dbias +=.
void row_parallel_backward(const TpContext& ctx, backend::Tensor dinp, backend::Tensor dfull, backend::Tensor dweight,
                           backend::Tensor dbias, backend::Tensor dout, backend::Tensor inp, backend::Tensor weight,
                           backend::WeightLayout layout);

// GPT-2's MLP with its GELU fused into the GEMMs (backend.hpp's matmul_gelu_forward and
// matmul_dgelu_backward): c_fc column-parallel with the GELU in its epilogue, pre and act its output
// before and after the GELU ([N, OC/tp] each; inp and full as column_parallel_forward's) ...
void column_parallel_gelu_forward(const TpContext& ctx, backend::Tensor act, backend::Tensor pre, backend::Tensor inp,
                                  backend::Tensor full, backend::Tensor weight, backend::Tensor bias,
                                  backend::WeightLayout layout);
// ... and c_proj row-parallel backward straight to d(pre): its weight and bias gradients (+=), then
// dpre [N, IC/tp] = (dout @ W^T) * gelu'(pre) (written) with c_fc's bias gradient dbias_pre += (this
// rank's columns). dout and dfull as row_parallel_backward's; act is the GELU's output (c_proj's input).
// c_fc's own backward then passes no dbias.
void row_parallel_dgelu_backward(const TpContext& ctx, backend::Tensor dpre, backend::Tensor dfull,
                                 backend::Tensor dweight, backend::Tensor dbias, backend::Tensor dbias_pre,
                                 backend::Tensor dout, backend::Tensor act, backend::Tensor weight, backend::Tensor pre,
                                 backend::WeightLayout layout);

// The SP collectives on rows, also what the model's norm/residual regions use: all-gather of each rank's
// block of rows into full [N, C]; reduce-scatter of full [N, C] (summed over the group) into the blocks.
void gather_rows(const TpContext& ctx, backend::Tensor block, backend::Tensor full);
void reduce_scatter_rows(const TpContext& ctx, backend::Tensor full, backend::Tensor block);
// In-place sum over the group (nothing at tp = 1).
void all_reduce_sum(const TpContext& ctx, backend::Tensor t);

}  // namespace zt::layers
