// What a model of a given shape costs, counted once from its family (family.hpp) for every reader: the
// pipeline's cut and the layout planner (FLOPs a token per part), the mfu metric (PaLM's count), the TP
// group's traffic (the planner, bench_tp and the tests that measure it) and the CPU backend's scratch
// (the memory planner). A family changes these through its descriptor (its parameters, its block's
// matmuls, attention_flops, head_replicated_floats), never by a branch here.
#pragma once

#include <cstdint>

#include "model/model.hpp"
#include "model/param_table.hpp"

namespace zt::model {

// A token's forward + backward FLOPs in each part of the model, PaLM's count (as the mfu metric and the
// layout planner): a block 6 x its parameters (each weight once in a forward matmul, twice in backward)
// plus its attention (Family::attention_flops: 12 A T, QK^T and AV at the full context T, A the heads'
// width; GQA and SwiGLU come in through the parameters); recompute adds a block's forward again (full:
// 2 x its parameters + a third of the attention's) or the attention's forward (selective). The head: 6 C
// Vp, the LM head's matmul (the softmax and loss are O(Vp) beside it). The embedding: 3 C, a row read
// forward and a scatter-add backward (small: it only decides ties).
struct TokenFlops {
  double embedding = 0, block = 0, head = 0;
  double block_params = 0;  // one block's parameters (every block alike)
  double attention = 0;     // one block's attention, forward + backward, without recomputation
};
TokenFlops token_flops(const GptShape& shape, Recompute recompute = Recompute::kNone);

// Model FLOPs utilisation's numerator, as the PaLM paper (and the PyTorch peer the benchmark compares
// with) counts it: 6 N per token for the parameter GEMMs, forward + backward, with N the parameters a
// matmul reads (ParamTable::n_params_for_flops: without GPT-2's position table or an untied input
// embedding), plus L x the blocks' attention (not halved for causality). Recomputation is not counted:
// MFU measures useful work. A LoRA run (adapters > 0: their parameters) computes no weight gradient for
// its frozen base: 4 N (the forward and the input gradient) plus 6 x the adapters', as the layout
// planner counts it.
double mfu_flops_per_token(const GptShape& shape, std::uint64_t matmul_params, std::uint64_t adapters = 0);
// The dense bf16 peak of an H100/H200 SXM, MFU's denominator.
constexpr double kPeakBf16Flops = 989e12;

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
// Either way, the f32 gradients of the replicated parameters a block applies per head
// (Family::head_replicated_floats: Qwen3's q_norm and k_norm; every rank holds some heads) are summed.
// tp = 1 communicates nothing. A LoRA run differs slightly (not counted): its frozen base skips the
// norms' gradient all-reduces under SP, and each block's backward all-reduces the replicated adapter
// factors' fp32 gradients (r x in or out x r per adapted module: lora.hpp).
struct TpCommBytes {
  std::uint64_t all_reduce = 0, all_gather = 0, reduce_scatter = 0;
};
TpCommBytes tp_comm_bytes(const GptShape& shape, int micro_batch, int tp, bool sequence_parallel,
                          DType compute = DType::kF32);

// The scratch the CPU backend grows to in one training step of this model on one TP rank of `tp`
// (backend::cpu_workspace_bytes over the blocks' matmuls as the rank runs them, attention, and the LM
// head and loss in chunks of loss_chunk columns): the memory planner's workspace row.
std::size_t cpu_workspace_bytes(const GptShape& shape, int micro_batch, int tp, int threads, DType compute,
                                std::int64_t loss_chunk);
// The same for a generation engine's forward of `rows` tokens (gen::Engine): the fp32 copies of its 16-bit
// GEMM operands, the LM head's (the widened [Vp/tp, C] head) the largest; its attention over the KV cache
// and its sampling take no scratch of this kind.
std::size_t cpu_generation_workspace_bytes(const GptShape& shape, std::int64_t rows, int tp, DType compute);

}  // namespace zt::model
