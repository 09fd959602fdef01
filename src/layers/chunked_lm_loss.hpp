// The LM head's GEMM and the cross-entropy in vocabulary chunks, so that no [N, V] logits tensor exists:
// each chunk's logits [N, Vc] are made, reduced to per-row statistics (max, sum of exp, target logit:
// backend cross_entropy_slice_stats) and dropped; the rows' log-sum-exp comes from combining the chunks'
// statistics (and, under tensor parallelism, the ranks', through a hook), which is the vocabulary-parallel
// cross-entropy's algebra (vocab_parallel.hpp) applied to chunks of one rank's rows. The backward
// recomputes each chunk's logits (but the last forward's), turns them into dlogits in place (backend
// cross_entropy_slice_backward) and adds their products into d(input) and d(weight).
//
// One chunk and no hook is today's path op for op (matmul_forward, cross_entropy_forward/_backward,
// matmul_backward): bit-identical losses and gradients, the logits kept from forward to backward.
//
// FLOPs with Vs' = the held vocabulary rows up to the last real id: forward 2 N C Vs'; backward
// 2 N C Vs' for d(input), 2 N C Vs' for d(weight) (skipped for a frozen head) and, with more than one
// chunk, 2 N C (Vs' - Vc_last) to recompute every chunk's logits but the last forward's: at most 8 N C Vs'
// against the unchunked head's 6 (a third more; with a frozen head 6 against 4). Evaluation (forward
// only) costs the same as unchunked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "backend/backend.hpp"

namespace zt::layers {

// train.loss_chunk = 0 (auto): the whole held vocabulary in one chunk up to kLossChunkAutoWhole rows
// (GPT-2's 50,304, Llama 2's 32,000: the unchunked path, no recompute), otherwise chunks of
// kLossChunkAutoColumns rows (Llama 3's 128,256 in 4 chunks, Qwen2's 151,936 in 5), a multiple of 128 so
// that each chunk's GEMM keeps the full one's alignment.
inline constexpr std::int64_t kLossChunkAutoWhole = 65536;
inline constexpr std::int64_t kLossChunkAutoColumns = 32768;

// Vocabulary rows per chunk for a rank holding `held` rows of the LM head (Vs: all Vp at tp = 1, the
// shard under TP) and train.loss_chunk = key (0 = auto, above; > 0: that many, at most held). >= 1.
std::int64_t loss_chunk_columns(std::int64_t held, std::int64_t key);

// Chunks of `chunk` rows covering the held rows that hold real ids (rows lo .. vocab - 1 of lo .. lo +
// held - 1): chunks of padding only are never computed. 0 when the rank holds no real id.
std::int64_t loss_chunks(std::int64_t held, std::int64_t lo, std::int64_t vocab, std::int64_t chunk);

// Element-wise all-reduces over the tensor-parallel group that splits the vocabulary (both set). Every
// rank of the group calls them in the same order with the same sizes: max over N values, then sum over
// 2N (3N when the forward computes entropies). E.g. [&](std::span<double> v) { group.all_reduce_values(v, dist::ReduceOp::kMax); }.
struct RowReduce {
  std::function<void(std::span<double>)> max;
  std::function<void(std::span<double>)> sum;
};

// The LM head's rows chunk by chunk, for a head that is never whole in one view: ZeRO's split vocabulary
// (zero.split_vocab), each chunk a unit of its own that the engine gathers and reduces by itself. The loss
// asks for chunk k's rows [first, first + width) of the held head as weight(k) (then grad(k)) just before
// using them and hands them back (release, grad_done) just after, in its own order: forward 0 .. n-1,
// backward n-1 .. 0.
class HeadRows {
 public:
  virtual ~HeadRows() = default;
  virtual backend::Tensor weight(std::int64_t k, std::int64_t first, std::int64_t width) = 0;  // [width, C] X
  virtual void release(std::int64_t /*k*/) {}
  // [width, C] f32 to add chunk k's weight gradient into; empty: the head is frozen (LoRA).
  virtual backend::Tensor grad(std::int64_t k, std::int64_t first, std::int64_t width) = 0;
  virtual void grad_done(std::int64_t /*k*/) {}
};

// A head held whole ([held, C], and its gradient, empty when frozen): chunk k's rows are a block of it.
class WholeHead final : public HeadRows {
 public:
  WholeHead(const backend::Tensor& weight, const backend::Tensor& dweight) : weight_(weight), dweight_(dweight) {}
  backend::Tensor weight(std::int64_t k, std::int64_t first, std::int64_t width) override;
  backend::Tensor grad(std::int64_t k, std::int64_t first, std::int64_t width) override;

 private:
  backend::Tensor weight_, dweight_;
};

class ChunkedLmLoss {
 public:
  // chunk: vocabulary rows per chunk (loss_chunk_columns). Buffers come from `be` on the first forward
  // and are kept (regrown when N grows), or all at once from reserve().
  ChunkedLmLoss(backend::Backend& be, std::int64_t chunk);
  // Allocates now what bytes() counts for these sizes, so that a model holds its loss's memory from the
  // start (its activation bytes, as planned) and no pass allocates.
  void reserve(std::int64_t rows, std::int64_t channels, std::int64_t held, DType x);
  std::size_t held_bytes() const { return logits_buf_.bytes() + rows_buf_.bytes() + sum_buf_.bytes(); }

  // The backend bytes it holds at its peak (in backward) for N = rows, C = channels, Vs = held, chunk
  // rows a chunk and compute dtype x (the memory planner's figure; an upper bound, counting every chunk
  // as active):  N Vc |x| (one chunk's logits, Vc = min(chunk, Vs))
  //            + 20 N n_c (each chunk's target columns i32, statistics 3 x f32 and entropy statistic f32,
  //                        n_c = ceil(Vs / Vc))
  //            + 8 N (the rows' log-sum-exp and entropy)
  //            + 4 N C when x is 16-bit and n_c > 1 (d(input)'s fp32 sum over the chunks, backward only).
  static std::size_t bytes(std::int64_t rows, std::int64_t channels, std::int64_t held, std::int64_t chunk,
                           DType x);

  // Per-row losses (host, N, fp32): loss_n = logsumexp over ids v < vocab of x_n . w_v, minus x_n . w_t
  // for t = targets[n]; 0 where targets[n] is backend::kIgnoreTarget.
  //   x [N, C] X: the final norm's output, whole rows (under sequence parallelism: the gathered rows).
  //   weight [Vs, C] X: the head's rows for ids lo .. lo + Vs - 1; rows >= vocab are padding.
  //   targets (host, N): ids in [0, vocab) or kIgnoreTarget (checked: DataError naming the first bad one).
  //   reduce: null when this rank holds the whole vocabulary (lo = 0); else the TP group's hook, and the
  //   losses come out the same on every rank of the group.
  //   entropy: also each row's entropy of the whole softmax, H_n = -sum_v p_v log p_v (entropies(); RL's
  //   entropy bonus and metric), through the slice ops even with one chunk (their statistics give it).
  std::vector<float> forward(backend::Tensor x, backend::Tensor weight, const std::int32_t* targets, std::int64_t lo,
                             std::int64_t vocab, const RowReduce* reduce = nullptr, bool entropy = false);
  // The same with the head's rows by chunk (HeadRows) over `held` rows.
  std::vector<float> forward(backend::Tensor x, HeadRows& head, std::int64_t held, const std::int32_t* targets,
                             std::int64_t lo, std::int64_t vocab, const RowReduce* reduce = nullptr, bool entropy = false);
  // The latest forward's entropies (host, N; 0 for ignored rows), when it computed them; else empty.
  const std::vector<float>& entropies() const { return entropies_; }

  // The gradients of sum_n dloss * (s_n * loss_n + e_n * H_n) for the rows the latest forward saw (x and
  // weight unchanged since; one backward per forward), s_n = row_scale[n] ([N] f32 on the backend; empty:
  // 1), e_n = entropy_scale[n] ([N] f32; empty: no entropy term; needs a forward with entropy):
  //   dx [N, C] X, WRITTEN (empty: not computed): this rank's vocabulary's share of d(x), to be summed
  //     over the TP group (all-reduce, or reduce-scatter under SP) as a column-parallel layer's is.
  //   dweight [Vs, C] f32, ADDED (+=; empty: a frozen head, LoRA); its padding rows get nothing.
  void backward(backend::Tensor dx, backend::Tensor dweight, backend::Tensor x, backend::Tensor weight, float dloss,
                backend::Tensor row_scale = backend::Tensor(), backend::Tensor entropy_scale = backend::Tensor());

  // The same with the head's rows and gradient by chunk (HeadRows::grad).
  void backward(backend::Tensor dx, const backend::Tensor& x, HeadRows& head, float dloss,
                backend::Tensor row_scale = backend::Tensor(), backend::Tensor entropy_scale = backend::Tensor());

  std::int64_t chunk() const { return chunk_; }

 private:
  struct Chunk {
    std::int64_t first, width, real;  // held rows [first, first + width), of which the first `real` are ids
  };
  Chunk chunk_at(std::int64_t k) const;
  void bind(std::int64_t rows, std::int64_t chunks, std::int64_t width, DType x);
  backend::Tensor logits(std::int64_t width) const;  // [N, width] view of the chunk buffer
  backend::Tensor targets(std::int64_t k) const;     // [N] i32: chunk k's target columns
  backend::Tensor stats(std::int64_t k) const;       // [N, 3] f32: chunk k's statistics
  backend::Tensor xsums(std::int64_t k) const;       // [N] f32: chunk k's entropy statistic
  backend::Tensor lse() const;                       // [N] f32: the rows' log-sum-exp
  backend::Tensor entropy() const;                   // [N] f32: the rows' entropy
  void compute_logits(const Chunk& c, const backend::Tensor& x, const backend::Tensor& w);  // w: the chunk's rows
  std::vector<float> combine(const std::int32_t* targets, const RowReduce* reduce);
  void backward_whole(backend::Tensor dx, const backend::Tensor& x, HeadRows& head, float dloss,
                      const backend::Tensor& row_scale, const backend::Backend::EntropyGrad& entropy);

  backend::Backend& be_;
  std::int64_t chunk_;
  backend::Buffer logits_buf_;  // one chunk's logits [N, Vc] in X
  backend::Buffer rows_buf_;    // per chunk: target columns [n_c, N] i32, statistics [n_c, N, 3] f32, entropy
                                // statistic [n_c, N] f32; lse [N] f32, entropy [N] f32
  backend::Buffer sum_buf_;     // d(input)'s fp32 sum over the chunks [N, C] (16-bit X, several chunks)
  std::int64_t rows_ = 0;       // N of the latest forward
  bool ready_ = false;          // a forward's statistics and chunk are in place for one backward
  std::int64_t lo_ = 0, vocab_ = 0, held_ = 0, n_chunks_ = 0;
  std::int64_t kept_ = -1;      // the chunk whose logits the buffer still holds (-1: none)
  bool exact_ = false;          // one chunk, no hook, no entropy: today's cross_entropy_forward/_backward ops
  bool entropy_ = false;        // the latest forward computed entropies
  std::vector<float> entropies_;
  DType dtype_ = DType::kF32;
};

}  // namespace zt::layers
