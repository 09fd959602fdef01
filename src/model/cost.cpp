// What a model costs (cost.hpp), from its family's descriptor.
#include "model/cost.hpp"

#include <algorithm>
#include <vector>

#include "layers/chunked_lm_loss.hpp"
#include "model/family.hpp"
#include "model/tp_split.hpp"

namespace zt::model {

TokenFlops token_flops(const GptShape& shape, Recompute recompute) {
  const Family& family = family_of(shape.arch);
  TokenFlops f;
  GptShape one_block = shape;  // every block alike: one block's table says it (a whole table of
  one_block.n_layer = 1;       // thousands of blocks, built per layout costed, slowed the planner's search)
  f.block_params = static_cast<double>(ParamTable(one_block).units()[1].numel);
  f.attention = family.attention_flops(shape);
  f.block = 6 * f.block_params + f.attention;
  if (recompute == Recompute::kFull) f.block += 2 * f.block_params + f.attention / 3;
  if (recompute == Recompute::kSelective) f.block += f.attention / 3;
  const double C = shape.n_embd, V = shape.padded_vocab;
  f.embedding = 3 * C, f.head = 6 * C * V;
  return f;
}

double mfu_flops_per_token(const GptShape& shape, std::uint64_t matmul_params, std::uint64_t adapters) {
  const double base = (adapters > 0 ? 4.0 : 6.0) * static_cast<double>(matmul_params);
  return base + 6.0 * static_cast<double>(adapters) + shape.n_layer * family_of(shape.arch).attention_flops(shape);
}

TpCommBytes tp_comm_bytes(const GptShape& s, int micro_batch, int tp, bool sequence_parallel, DType compute) {
  if (tp == 1) return {};
  const Family& family = family_of(s.arch);
  const std::uint64_t N = std::uint64_t(micro_batch) * s.seq_len, C = s.n_embd, L = s.n_layer, f32 = 4, f64 = 8;
  const std::uint64_t act = dtype_size(compute);
  const std::uint64_t activations = (4 * L + 2) * N * C, ce = 3 * N;
  const std::uint64_t per_head = f32 * L * static_cast<std::uint64_t>(family.head_replicated_floats(s));
  if (!sequence_parallel) return {act * activations + f64 * ce + per_head, 0, 0};
  const std::uint64_t norm_kinds = family.norm == layers::NormKind::kLayerNorm ? 2 : 1;  // weight (+ bias)
  const std::uint64_t regathered = (2 * L + 1) * N * C;  // backward's column-parallel inputs
  return {f64 * ce + f32 * norm_kinds * (2 * L + 1) * C + per_head, act * (activations + regathered), act * activations};
}

namespace {
// The GEMMs of a forward on TP rank r of tp: the blocks' and the LM head's (head_columns of it at a time).
std::vector<backend::GemmExtent> rank_gemms(const GptShape& s, int tp, std::int64_t head_columns) {
  std::vector<backend::GemmExtent> gemms;
  for (const BlockMatmulShape& m : family_of(s.arch).block_matmuls(s))
    gemms.push_back(m.column_parallel ? backend::GemmExtent{m.in, m.out / tp} : backend::GemmExtent{m.in / tp, m.out});
  gemms.push_back({s.n_embd, head_columns});
  return gemms;
}
}  // namespace

std::size_t cpu_workspace_bytes(const GptShape& s, int micro_batch, int tp, int threads, DType compute,
                                std::int64_t loss_chunk) {
  const std::int64_t head_columns = layers::loss_chunk_columns(vocab_shard_rows(s, tp), loss_chunk);
  const std::vector<backend::GemmExtent> gemms = rank_gemms(s, tp, head_columns);
  // The attention's widths: its [N, A] output (never narrower than C: the planner's figure since Qwen3)
  // and its q|k|v input, as the rank's heads.
  return backend::cpu_workspace_bytes(threads, s.seq_len, compute, std::int64_t{micro_batch} * s.seq_len,
                                      std::max<std::int64_t>(s.n_embd, s.attn_width()), s.qkv_width() / tp, gemms,
                                      head_columns);
}

std::size_t cpu_generation_workspace_bytes(const GptShape& s, std::int64_t rows, int tp, DType compute) {
  if (compute == DType::kF32) return 0;
  std::size_t most = 0;
  for (const backend::GemmExtent& g : rank_gemms(s, tp, vocab_shard_rows(s, tp)))
    most = std::max(most, backend::cpu_gemm_workspace_bytes(rows, g));
  return most;
}

}  // namespace zt::model
