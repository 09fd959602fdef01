// LoRA adapters (Hu et al. 2021, as PEFT's LoraLayer): on each targeted linear layer of a block,
// y = x W (+ b) + s * (x A^T) B^T with A [r, in], B [out, r] and s = alpha/r (alpha/sqrt(r) with rsLoRA);
// the base W stays frozen, only A and B train. The adapters live in their own parameter table, one unit
// per block, named as PEFT saves them (base_model.model.<HF module>.lora_A.weight), so the ZeRO engine,
// the checkpoints and the safetensors writer treat them like any parameter table.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "model/param_source.hpp"
#include "model/param_table.hpp"

namespace zt::model {

// The matmuls of a block that LoRA can adapt; a fused matmul (Llama's q|k|v, gate|up) holds several modules.
enum class BlockMatmul { kQkv, kAttnOut, kMlpUp, kMlpDown };

// One adaptable module: where its output sits in its matmul's output columns.
struct LoraModule {
  std::string name;         // PEFT target_modules name: q_proj, c_attn, ...
  std::string path;         // inside block l: "attn.c_attn" (GPT-2) or "self_attn.q_proj" (Llama)
  BlockMatmul matmul;
  std::int64_t in = 0;      // input features
  std::int64_t out_total = 0, col = 0, width = 0;  // the matmul's output width; this module's columns [col, col+width)
};

// The adaptable modules of the shape's family, in the family's order (GPT-2's c_proj is two modules,
// attn.c_proj and mlp.c_proj, as PEFT matches the name on both).
std::vector<LoraModule> lora_modules(const GptShape& shape);

struct LoraSpec {
  int rank = 0;
  double alpha = 16;
  bool rslora = false;
  std::vector<std::string> targets;  // PEFT names (config::lora_target_modules)
  double dropout = 0;                // PEFT's lora_dropout on the adapters' input, in training passes
  std::uint64_t seed = 0;            // the dropout masks' (train.seed)
  float scale() const;
};

// The adapter table: per block l (unit l), per targeted module in family order, lora_A [r, in] then
// lora_B [width, r], both with weight decay (PEFT trains them with the optimizer's decay).
ParamTable lora_table(const GptShape& shape, const LoraSpec& spec);

// PEFT's initialisation: A Kaiming-uniform with a = sqrt(5) (nn.Linear's default: U(-1/sqrt(in),
// 1/sqrt(in))) from the counter-based RNG (seed, "lora/" + name, index); B zeros. Any slice gets the
// values the whole buffer would (as init_params_range).
void init_lora_range(const ParamTable& adapters, std::uint64_t seed, std::size_t first, std::size_t count, float* out);

// The base weight an adapter pair belongs to: "base_model.model.X.lora_A.weight" -> "X.weight".
std::string lora_base_weight(const std::string& adapter_name);

// Merges the adapters into the base weights (PEFT's merge_and_unload): W += scale * dW for every adapted
// module, dW = B A for Llama's [out, in] weights and (B A)^T for GPT-2's Conv1D [in, out], summed in
// double. base_flat: base.numel() floats; adapter_flat: adapters.numel() floats.
void merge_lora(const ParamTable& base, float* base_flat, const ParamTable& adapters, const float* adapter_flat,
                double scale);
// The same a weight at a time (a reader merging tensor by tensor, never the whole model): lora_pair_of gives,
// for each base parameter, the index in adapters of the lora_A its pair starts with (SIZE_MAX: not adapted),
// and merge_lora_pair merges the pair starting at `first` into W, its base weight's values.
std::vector<std::size_t> lora_pair_of(const ParamTable& base, const ParamTable& adapters);
void merge_lora_pair(const ParamTable& base, const ParamTable& adapters, std::size_t first, const float* adapter_flat,
                     double scale, std::span<float> W);

// PEFT's adapter_config.json for these adapters (peft_type LORA, r, lora_alpha, lora_dropout, use_rslora,
// target_modules, base_model_name_or_path, fan_in_fan_out for GPT-2's Conv1D), sorted keys.
std::string peft_adapter_config(const LoraSpec& spec, const GptShape& shape, const std::string& base_path);

// Whether matmul m is column-parallel under tensor parallelism (q|k|v, MLP up: outputs split) or
// row-parallel (attention out, MLP down: inputs split).
bool column_parallel(BlockMatmul m);

// Applies and differentiates the adapters inside a model's blocks. The model calls begin_block(l) before
// using block l in a pass, forward/backward after each adaptable matmul, and end_block(l) after.
// Tensor parallelism (tp > 1; tp/gpt2_tp.hpp, tp/llama_tp.hpp): the table is this rank's shard
// (tp_local_table of lora_table; tp_split.hpp) and the tensors passed are as the TP layer holds them:
//   column-parallel: x the whole input [N, in] (the gathered rows under SP), y and dy this rank's output
//     columns [N, out/tp]; dx is the layer's input gradient BEFORE its reduction over the group (it is
//     this rank's share and is summed with it).
//   row-parallel: x this rank's input columns [N, in/tp]; y the layer's partial output before its sum
//     over the group (the adapter adds its partial s (x_r A_r^T) B^T: the group's sum is s (x A^T) B^T
//     exactly, with no collective of its own); dy the whole output gradient [N, out] (gathered under
//     SP); dx this rank's input gradient [N, in/tp].
// The replicated factor (column: lora_A, row: lora_B) gets a partial gradient on each rank (from its
// output columns, or its part of h = x A^T): these are summed over the group once per block in
// end_block, through group_sum, so every rank ends with the whole gradient. That is one f32 all-reduce
// of the block's replicated adapters (r x (in or out) per module, a few KiB) per micro-batch, instead of
// summing h [N, r] in forward and again in backward (its recomputation); the split factors' gradients are
// exact on their rank.
class Lora {
 public:
  // micro_batch x seq_len rows; compute: the activations' dtype. adapters: lora_table's, or a pipeline
  // rank's part of it (stage_split.hpp's adapter_part_table); this is TP rank tp_rank of tp (the table is
  // then its TP shard). The table must outlive this.
  Lora(backend::Backend& backend, const ParamTable& adapters, const LoraSpec& spec, int micro_batch, DType compute,
       int tp = 1, int tp_rank = 0);

  // Where the adapters and their gradients come from for the next passes (grads null: forward only).
  void bind(ParamSource* params, GradSink* grads) { params_ = params, grads_ = grads; }
  // tp > 1: sums an f32 tensor in place over the TP group (the TP model sets it in set_lora).
  void set_group_sum(std::function<void(const backend::Tensor&)> sum) { group_sum_ = std::move(sum); }
  int tp() const { return tp_; }
  // Dropout (spec.dropout > 0) in the passes from here on: on for a training micro-batch whose first
  // token is global token `first_row` of the run's window order (so the masks do not depend on the world
  // size or the accumulation), off for evaluation and sampling.
  void set_dropout(bool on, std::uint64_t first_row = 0) {
    dropout_on_ = on, dropout_rows_ = {{.first = 0, .count = -1, .key = first_row}};
  }
  // Dropout on for runs of the micro-batch's rows only, run k's rows [first, first + count) masked as
  // global tokens key, key + 1, ... (RL's packed rollouts: each rollout's rows keyed as where it would sit
  // alone in a row, so the masks do not depend on the packing or the world size); other rows undropped.
  struct DropoutRows {
    std::int64_t first = 0, count = -1;  // -1: to the last row
    std::uint64_t key = 0;
  };
  void set_dropout_rows(std::vector<DropoutRows> rows) { dropout_on_ = true, dropout_rows_ = std::move(rows); }
  // Whether any adapter sits on matmul m (a fused op that skips the point where one joins cannot run).
  bool adapts(BlockMatmul m) const;
  void begin_block(int l, bool backward);
  void end_block(int l, bool backward);
  // y [N, out_total] += the adapters of matmul m on x [N, in]; N up to the rows it was made for (a
  // generation model's fewer rows too; backward: exactly those).
  void forward(BlockMatmul m, const backend::Tensor& x, const backend::Tensor& y);
  // Given dy [N, out_total] and the same x: dA, dB +=, and dx [N, in] += the adapters' input gradient
  // (dx already holds the base matmul's).
  void backward(BlockMatmul m, const backend::Tensor& x, const backend::Tensor& dy, const backend::Tensor& dx);

  std::size_t scratch_bytes() const { return arena_.bytes(); }
  static std::size_t scratch_bytes(const GptShape& shape, int rank, int micro_batch, DType compute, int tp = 1);

 private:
  struct Site {
    LoraModule module;        // in, out_total, col, width as this TP rank holds them
    std::size_t a_param = 0;  // index of lora_A in a block's unit (lora_B follows): the same in every block
    std::int64_t in_global = 0, in_first = 0;  // the input's whole width and this rank's first column (dropout)
    std::int64_t rep_offset = 0;               // tp > 1: the replicated factor's gradient in Scratch::rep
  };
  struct Scratch {
    backend::Tensor h, dh, delta, dx, e, de;  // h, dh [N,r]; delta [N,Wmax]; dx [N,Imax]; e [Wmax,r] X; de f32
    backend::Tensor xd;                       // [N,Imax]: the input after dropout
    backend::Tensor rep;                      // tp > 1: f32, the replicated factors' partial gradients of a block
  };
  // The modules as TP rank `tp_rank` of tp holds them (tp = 1: lora_modules(s)).
  static std::vector<LoraModule> local_modules(const GptShape& s, int tp);
  // The gradient view the backward pass accumulates the replicated factor p of `site` into: g_'s own at
  // tp = 1, its slot in Scratch::rep under TP (summed over the group in end_block).
  backend::Tensor replicated_grad(const Site& site, std::size_t p, std::int64_t rows, std::int64_t cols);
  void sum_replicated_grads();
  // The adapters' input: x, or x after this site's dropout mask (the same mask in forward and backward).
  backend::Tensor adapter_input(const Site& site, const backend::Tensor& x);
  void drop(const Site& site, const backend::Tensor& t);  // t [N, in] *= this site's mask / (1-p)
  static std::size_t layout(const GptShape& s, int rank, int B, DType compute, int tp, std::byte* base, Scratch* out);
  backend::Tensor view(const backend::Tensor& unit, std::size_t p, std::int64_t rows, std::int64_t cols) const;
  // B itself when the module is its matmul's whole output, else B placed at its rows of a zeroed [out_total, r].
  backend::Tensor expanded_b(const Site& site, const backend::Tensor& b);

  backend::Backend& be_;
  const ParamTable& table_;
  int rank_, tp_;
  float scale_;
  float dropout_;
  std::uint64_t seed_;
  bool dropout_on_ = false;
  std::vector<DropoutRows> dropout_rows_;
  DType dtype_;
  std::int64_t n_rows_;
  std::vector<Site> sites_;
  backend::Buffer arena_;
  Scratch s_;
  ParamSource* params_ = nullptr;
  GradSink* grads_ = nullptr;
  std::function<void(const backend::Tensor&)> group_sum_;
  int block_ = -1;
  backend::Tensor w_, g_;  // block_'s adapters and gradients (flat unit views)
};

}  // namespace zt::model
