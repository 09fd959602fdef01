// The interface every model family implements (one Decoder, decoder.hpp, over a family's blocks) and the
// trainer, sampler and planner use: forward and backward of one micro-batch over a ParamSource/GradSink,
// logits for sampling, and the activation bytes; make_model picks the family from the table's shape.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "dist/communicator.hpp"
#include "model/lora.hpp"
#include "model/param_source.hpp"
#include "model/param_table.hpp"

namespace zt::model {

// Activation recomputation (train.recompute): trade forward FLOPs in the backward pass for memory.
//   kNone       every block keeps all its activations;
//   kSelective  the attention output and the MLP activation (GELU or SwiGLU output) are recomputed from
//               what is kept (cheap ops: one attention forward and one pointwise op per block);
//   kFull       only each block's output (C) is kept; a block's forward runs again inside its backward,
//               on working buffers shared by all blocks.
// Gradients are bit-identical in every mode (the same ops on the same inputs).
using Recompute = config::Recompute;

// A pipeline stage's share of the model (parallel.pp, stage_split.hpp): blocks [first_block, end_block).
// The stage with block 0 embeds the tokens; the one with the last block runs the final norm, the LM head
// and the loss. The default is the whole model. The same forward and backward code runs either way.
struct Stage {
  int first_block = 0, end_block = -1;  // -1: through the last block
  int end(int n_layer) const { return end_block < 0 ? n_layer : end_block; }
  bool has_embedding() const { return first_block == 0; }
  bool has_head(int n_layer) const { return end(n_layer) == n_layer; }
};

// How a model runs: its micro-batch of micro_batch sequences of table.shape().seq_len, recomputation,
// the activations' dtype (f32, bf16 or f16; backend.hpp's precision rules), its pipeline stage, and its
// tensor-parallel group: null (tp = 1) with the whole table, or a group of tp ranks with the table
// model::tp_local_table(global, tp) (tp_split.hpp), under sequence parallelism or not; and the LM head's
// loss chunks (layers/chunked_lm_loss.hpp).
struct ModelOptions {
  int micro_batch = 1;
  Recompute recompute = Recompute::kNone;
  DType compute = DType::kF32;
  Stage stage = {};
  dist::Communicator* tp_group = nullptr;
  bool sequence_parallel = false;
  std::int64_t loss_chunk = 0;  // train.loss_chunk: vocabulary rows per chunk of the LM head's loss (0: auto)
  // Generation (forward_cached only): rows of tokens_per_row new tokens over a KV cache (a decoding
  // step's 1, a prompt chunk's more) instead of training's seq_len; no loss, no backward; the whole
  // model on one stage, no sequence parallelism, and recompute kFull's one working set of activations.
  bool generation = false;
  std::int64_t tokens_per_row = 0;
  int tp() const { return tp_group ? tp_group->size() : 1; }
};

class KvCache;

// One forward of generation over a KV cache (kv_cache.hpp), host arrays: micro_batch rows of
// tokens_per_row tokens [B*T] (ids in [0, vocab_size); padding 0), each token's position in its sequence
// [B*T] (-1: padding), each row's cache slot [B], and the rows (b*T + t) whose logits come back, in order.
struct CachedBatch {
  const std::int32_t* tokens = nullptr;
  const std::int32_t* positions = nullptr;
  const std::int32_t* slots = nullptr;
  std::vector<std::int64_t> logit_rows;
};

class Model {
 public:
  virtual ~Model() = default;
  // tokens, targets: host arrays [B*T] with ids in [0, vocab_size); a target may be
  // backend::kIgnoreTarget (outside the loss mask: no loss, no gradient). Returns the SUM of the token
  // losses (the caller divides by the global count of trained targets). Keeps what backward needs.
  virtual double forward(const std::int32_t* tokens, const std::int32_t* targets, ParamSource& params) = 0;
  // Gradients of sum_i dloss * loss_i, accumulated (+=) into `grads`; needs the preceding forward() and the
  // same parameters; runs once per forward.
  virtual void backward(ParamSource& params, GradSink& grads, float dloss) = 0;
  // Per-token loss weights (RL's policy-gradient coefficients, weighted fine-tuning): host [B*T] f32,
  // token n's loss counts w_n times in the backward passes from here on (the gradients of
  // sum_n dloss * w_n * loss_n); nullptr: 1 (training's plain loss). forward() still returns the plain sum.
  virtual void set_loss_weights(const float* weights) = 0;
  // The latest forward's per-token losses (host [B*T], -log p(target); 0 for an ignored target), on the
  // stage with the head: what a policy-gradient method reads as its log-probabilities.
  virtual const std::vector<float>& token_losses() const = 0;
  // RL's entropy bonus and metric: forwards from here on also give each token's entropy of the model's
  // whole next-token distribution, H_n = -sum_v p_v log p_v (token_entropies(), host [B*T]; 0 for an
  // ignored target; empty when off), on the stage with the head. Off by default: the loss then keeps its
  // exact one-chunk op (layers/chunked_lm_loss.hpp).
  virtual void set_entropy(bool on) = 0;
  virtual const std::vector<float>& token_entropies() const = 0;
  // RL's rollout temperature: forwards and backwards from here on divide the LM head's logits by t
  // before the loss (the tokens' log-probabilities and entropies are the sampling distribution's, as
  // verl's actor divides its logits by the rollout temperature); 1: none. A language model's only.
  virtual void set_logit_temperature(float t) = 0;
  // Per-token entropy weights e_n (host [B*T] f32): backward passes from here on also give the gradients
  // of sum_n dloss * e_n * H_n (the forward must have computed entropies); nullptr: none.
  virtual void set_entropy_weights(const float* weights) = 0;
  // A value head's model (GptShape::value_head, PPO's critic): its forward's per-token values v_n (host
  // [B*T]) instead of losses; forward() returns their sum, ignores the targets (may be null), and
  // backward() gives the gradients of sum_n dloss * w_n * v_n with w from set_loss_weights, which it needs:
  // the value loss's d(loss)/d(v_n), computed on the host.
  virtual const std::vector<float>& values() const = 0;
  // Document mask (data.document_mask): host [B*T] i32, the first key each position attends (the start
  // of its packed sample) in the forward and backward passes from here on; nullptr: all earlier keys.
  // Under TP every rank of the group passes the same starts (each holds the whole sequence in attention).
  virtual void set_segment_starts(const std::int32_t* starts) = 0;
  // Packed sequences whose positions restart (RL's packed rollouts, with their segment starts): host
  // [B*T] i32, each token's position in its own sequence, in [0, seq_len) (-1: padding, which reads
  // position 0 and adds nothing to the position table's gradient), read by the position table (GPT-2's
  // wpe) and RoPE in the forward and backward passes from here on; nullptr: position t. TP: every rank of
  // the group passes the same positions.
  virtual void set_positions(const std::int32_t* positions) = 0;
  // Logits [B, T, V] on the host (padded columns dropped; gathered from the TP group), for tests and
  // sampling; no loss, no backward. On a pipeline stage (Stage above) the stage's part: without the
  // embedding it reads stage_input(); without the head it returns {} and leaves its output in stage_output().
  virtual std::vector<float> forward_logits(const std::int32_t* tokens, ParamSource& params) = 0;
  // The same for one row only (b*T + t, the next token's position when sampling): its V logits. The LM
  // head is then one row's matmul, not B*T rows' (at V = 50k it is most of a small model's forward).
  virtual std::vector<float> forward_row_logits(const std::int32_t* tokens, ParamSource& params, std::int64_t row) = 0;
  // Generation: the batch's keys and values stored in `cache`, every token attending its sequence's
  // cached keys up to its position; returns the logits [logit_rows, V] on the host (gathered from the TP
  // group; none asked: the head is skipped, a prompt chunk that only fills the cache). Needs a model made
  // with ModelOptions::generation.
  virtual std::vector<float> forward_cached(const CachedBatch& batch, KvCache& cache, ParamSource& params) = 0;
  // LoRA (lora.hpp): adapters on the targeted matmuls of every block from here on; null: none. The
  // model does not own it. Under TP the adapters are the rank's shard (Lora's tp = the group's size).
  virtual void set_lora(Lora* lora) = 0;
  // Pipeline stages (Stage above): forward() on a stage without the embedding reads its input hidden
  // states (compute dtype) from stage_input(), written by the caller (the previous stage's output); a
  // stage without the head returns 0 from forward() and needs d(its output) written into
  // stage_output_grad() before backward(). After forward, stage_output() is the last block's output;
  // after backward, stage_input_grad() is d(stage input). All four are this rank's part of the residual
  // stream: [B*T, C], or its [B*T/tp, C] rows under sequence parallelism, so TP rank r of one stage
  // talks to TP rank r of the next.
  virtual backend::Tensor stage_input() = 0;
  virtual backend::Tensor stage_output() = 0;
  virtual backend::Tensor stage_output_grad() = 0;
  virtual backend::Tensor stage_input_grad() = 0;
  virtual const ParamTable& table() const = 0;
  virtual int micro_batch() const = 0;
  virtual DType compute_dtype() const = 0;
  // Bytes this model holds on the backend (activations, their gradients, tokens), as allocated.
  virtual std::size_t activation_bytes() const = 0;
};

// The model of the table's family (family.hpp) with these options. The table (and the group) must
// outlive the model.
std::unique_ptr<Model> make_model(backend::Backend& backend, const ParamTable& table, const ModelOptions& options);
// Model::activation_bytes for any shape, options and tensor-parallel degree tp, allocating nothing (for
// the memory planner; options.tp_group is not read).
std::size_t model_activation_bytes(const GptShape& shape, const ModelOptions& options, int tp = 1);

}  // namespace zt::model
