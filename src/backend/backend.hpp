// The one backend interface: memory (allocate, copy, fill, synchronize) and the fixed op list GPT-2 and
// Llama training need. CPU (cpu/) is the fp32 reference; CUDA (cuda/) is checked against it op by op.
//
// Shapes: B batch, T sequence, C channels, NH heads, V vocabulary (Vp padded), N = B*T rows.
// Gradient rule, once for every op: parameter gradients ACCUMULATE (+=), because micro-batches of
// one optimizer step add into the same flat gradient buffer; activation gradients are WRITTEN (=).
// Pointers may alias only where an op says so.
//
// Precision, once for every op. A run computes in fp32 (train.precision=fp32: every tensor f32) or in
// a 16-bit compute dtype X (bf16, or f16 for train.precision=fp16):
//   X    activations, activation gradients, and the weights/biases an op reads;
//   f32  LayerNorm statistics (mean, rstd), attention lse, per-token losses, and PARAMETER GRADIENTS
//        (dweight, dbias, dwte, dwpe): fp32 accumulators whatever X is, so that micro-batches and ranks
//        add without 16-bit rounding; the optimizer's master weights and moments.
// Math inside every op is fp32 (GEMMs accumulate in fp32). The CPU backend follows the same rules
// (converting on load, rounding to nearest even on store), so it is the reference for the CUDA
// backend in every precision. An op given a dtype combination outside these rules throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <span>

#include "backend/attention_support.hpp"
#include "backend/tensor.hpp"

namespace zt::backend {

// A target id the cross-entropy skips (loss 0, gradient 0), as PyTorch's ignore_index, set to -1 here.
inline constexpr std::int32_t kIgnoreTarget = -1;
// A target the vocabulary-parallel cross-entropy's slice does not hold (another TP rank's columns).
inline constexpr std::int32_t kTargetInOtherSlice = -2;
// A token whose row another piece of the table holds (the embedding looked up piece by piece: ZeRO's
// split embedding, zero.split_vocab): embedding_forward leaves its output row as it is, embedding_backward
// adds nothing for it. Only without a position table.
inline constexpr std::int32_t kTokenInOtherRows = -1;

struct MemoryStats {
  std::size_t current_bytes = 0;  // held by this backend's allocator now
  std::size_t peak_bytes = 0;     // the most it held since the last reset_peak()
  // GPUs (0 elsewhere): the allocator's raw bytes (live blocks rounded, plus its cache), and the whole
  // device's use (cudaMemGetInfo: the context, NCCL, library handles, other processes): what lies between
  // them is what plan.reserve_gb keeps free.
  std::size_t reserved_bytes = 0;
  std::size_t device_used_bytes = 0;
};

enum class WeightLayout {
  kInOut,  // weight [IC, OC]: out = inp @ W (Hugging Face GPT-2 Conv1D layout, c_attn/c_fc/c_proj)
  kOutIn,  // weight [OC, IC]: out = inp @ W^T (the tied LM head reads wte [Vp, C] this way)
};

class Backend;

// Owned backend memory; freed through its backend. Move-only.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend* owner, void* data, std::size_t bytes) : owner_(owner), data_(data), bytes_(bytes) {}
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  void reset();
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  // A view of this buffer (or of a part of it, from element offset) as a tensor.
  Tensor view(DType dtype, std::initializer_list<std::int64_t> dims, std::int64_t offset = 0) const;

 private:
  Backend* owner_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // ---- memory -----------------------------------------------------------------------------------
  virtual Buffer allocate(std::size_t bytes) = 0;
  virtual void release(void* data, std::size_t bytes) = 0;   // called by Buffer only
  virtual void copy_from_host(void* dst, const void* host_src, std::size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, std::size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;  // device to device
  virtual void fill_zero(Tensor t) = 0;
  virtual void synchronize() = 0;
  virtual MemoryStats memory_stats() const = 0;
  virtual void reset_peak() = 0;
  // The device stream every op is queued on (a cudaStream_t for CUDA), so collectives can start after
  // the work before them; null where ops complete on return (the CPU).
  virtual void* stream() const { return nullptr; }

  // ---- embedding: out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:] --------------------------------------
  // out [B,T,C], tokens [B,T] i32, wte [Vp,C], wpe [maxT,C] or empty (no position table: Llama; dwpe
  // empty too). positions [B,T] i32, optional (generation over a KV cache): wpe's row positions[b,t]
  // instead of t; a position of -1 (a padding token) reads row 0.
  // A token of kTokenInOtherRows (no wpe) leaves its row of out untouched.
  virtual void embedding_forward(Tensor out, Tensor tokens, Tensor wte, Tensor wpe, Tensor positions = Tensor()) = 0;
  // dwte += scatter of dout rows by token (none for kTokenInOtherRows), dwpe += sum over b of dout[b,t,:];
  // with positions (packed sequences whose positions restart, RL's packed rollouts): dwpe[positions[b,t]]
  // += dout[b,t,:] (none for -1), rows in order.
  virtual void embedding_backward(Tensor dwte, Tensor dwpe, Tensor dout, Tensor tokens, Tensor positions = Tensor()) = 0;

  // ---- layernorm over the last dim, eps 1e-5: out = (x - mean) * rstd * weight + bias ---------------
  // out, inp [N,C]; mean, rstd [N] f32 (saved for backward); weight, bias [C]
  virtual void layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight, Tensor bias) = 0;
  // dinp = (written), dweight += , dbias +=
  virtual void layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp,
                                  Tensor weight, Tensor mean, Tensor rstd) = 0;
  // The residual add fused with the LayerNorm after it (GPT-2's block, as add_rmsnorm_forward for Llama):
  // res = a + b (rounded to X, as add), then layernorm_forward(out, mean, rstd, res, weight, bias); the
  // same values as the two ops, without reading res back from memory. res may alias a or b.
  virtual void add_layernorm_forward(Tensor res, Tensor out, Tensor mean, Tensor rstd, Tensor a, Tensor b,
                                     Tensor weight, Tensor bias) = 0;
  // layernorm_backward with its input gradient added into the residual stream's: dres += dinp (dinp rounded
  // to X, then the sum, as layernorm_backward then accumulate compute it), dweight +=, dbias +=; no [N,C]
  // dinp kept. dres must not alias dout or inp.
  virtual void layernorm_backward_accumulate(Tensor dres, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp,
                                             Tensor weight, Tensor mean, Tensor rstd) = 0;

  // ---- matmul with optional bias: out[N,OC] = inp[N,IC] @ W (+ bias[OC]) -----------------------------
  virtual void matmul_forward(Tensor out, Tensor inp, Tensor weight, Tensor bias, WeightLayout layout) = 0;
  // dinp = dout @ W^T (written; skipped if dinp is empty), dweight +=, dbias += (each skipped if empty:
  // a frozen weight has no gradient)
  // (CUDA: with both dweight and dbias, dbias comes from the dweight GEMM's bias-gradient epilogue,
  // cuBLASLt BGRADA/BGRADB, where cuBLASLt offers one; else the column-sum kernel.)
  virtual void matmul_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp,
                               Tensor weight, WeightLayout layout) = 0;
  // dinp [N,IC] f32 += dout @ W^T, the product of the X operands accumulated in fp32 and never rounded to X:
  // an input gradient summed over several GEMMs (the LM head's vocabulary chunks, model/chunked_lm_loss.hpp)
  // before one rounding (cast). weight as matmul_backward's.
  virtual void matmul_backward_input_accumulate(Tensor dinp, Tensor dout, Tensor weight, WeightLayout layout) = 0;

  // ---- matmuls fused with the GELU after them (GPT-2's MLP: c_fc, GELU, c_proj) ---------------------
  // pre [N,OC] = inp @ W (+ bias) (written: the GELU's input, kept for the backward), out [N,OC] =
  // gelu(pre) (written). The CPU twin is matmul_forward(pre, ...) then gelu_forward(out, pre); CUDA
  // fuses both into one GEMM (cuBLASLt GELU_AUX_BIAS, whose GELU is the tanh form above), which applies
  // GELU to the fp32 sum before pre is rounded: out within one rounding of X of the two ops'.
  virtual void matmul_gelu_forward(Tensor out, Tensor pre, Tensor inp, Tensor weight, Tensor bias,
                                   WeightLayout layout) = 0;
  // The layer after the GELU, backward to the GELU's input: with W its weight ([IC,OC] or [OC,IC] by
  // layout, as matmul_backward) and pre [N,IC] the GELU's input saved by the forward,
  //   dpre [N,IC] = (dout @ W^T) * gelu'(pre)          (written)
  //   dbias_pre [IC] += sum over rows of dpre          (f32; the bias of the matmul BEFORE the GELU, which
  //                                                     then passes an empty dbias; skipped if empty)
  // The CPU twin is matmul_backward(dpre, {}, {}, dout, pre, W) (pre gives the shape only), gelu_backward
  // (dpre, pre, dpre), then the bias's column sums of dpre as matmul_backward forms them; CUDA fuses it
  // into one GEMM (cuBLASLt DGELU_BGRAD) where it can. The layer's own dweight/dbias come from
  // matmul_backward with an empty dinp.
  virtual void matmul_dgelu_backward(Tensor dpre, Tensor dbias_pre, Tensor dout, Tensor weight, Tensor pre,
                                     WeightLayout layout) = 0;

  // ---- causal multi-head self-attention, scale 1/sqrt(C/NH) ------------------------------------------
  // qkv [B,T,3C] as (q | k | v), each head h taking columns [h*hs, (h+1)*hs) of its third; out [B,T,C].
  // Grouped-query attention: qkv [B,T,C + 2*NKV*hs] holds NKV K/V heads (NKV divides NH, read off the
  // width); query head h uses K/V head h / (NH/NKV) (Hugging Face repeat_kv); NKV = 1 is multi-query.
  // lse [B,NH,T] f32: the log-sum-exp of each softmax row, saved so backward can rebuild the
  // probabilities without an O(T^2) tensor kept between passes (flash-attention style).
  // segment_starts [B,T] i32 (data.document_mask), optional: query t of row b attends keys
  // [segment_starts[b,t], t] only, the start of its packed sample (0 <= start <= t); empty: keys [0, t].
  virtual void attention_forward(Tensor out, Tensor lse, Tensor qkv, int n_head, Tensor segment_starts = Tensor()) = 0;
  // dqkv, the shape of qkv, written (dK, dV summed over the query heads sharing them)
  virtual void attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse, int n_head,
                                  Tensor segment_starts = Tensor()) = 0;
  // Attention over a KV cache (generation: a prompt's prefill and each decoding step, model/kv_cache.hpp).
  // k_cache, v_cache [S, maxT, NKV*hs] X: the keys (after RoPE) and values of S sequence slots at positions
  // 0..maxT-1. qkv [B,T,W] as attention_forward's; slots [B] i32: batch row b's slot; positions [B,T] i32:
  // token (b,t)'s position in its sequence, or -1 (padding). First every token's k and v heads are
  // stored at (slots[b], positions[b,t]); then query (b,t) at position p attends its slot's keys [0, p]
  // (causal: the keys this call stored included), scale 1/sqrt(hs), query head h reading K/V head
  // h / (NH/NKV). out [B,T,C]; a padding row's is 0. A slot appears in one batch row with tokens at most (rows
  // of padding only may share any), and a row's positions are distinct and below maxT. No lse: nothing is differentiated.
  virtual void attention_cached_forward(Tensor out, Tensor qkv, Tensor k_cache, Tensor v_cache, Tensor slots,
                                        Tensor positions, int n_head) = 0;
  // What runs attention calls like q, for the start-up line ("cuDNN 9.19.0 fused SDPA (train.attention=
  // auto)"); empty where a backend has one implementation (the CPU).
  virtual std::string attention_summary(const AttentionQuery& q) const {
    (void)q;
    return "";
  }

  // ---- GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) ----------------------------
  virtual void gelu_forward(Tensor out, Tensor inp) = 0;
  virtual void gelu_backward(Tensor dinp, Tensor inp, Tensor dout) = 0;  // dinp written; may alias dout

  // ---- RMSNorm over the last dim (Llama): out = x * rstd * weight, rstd = 1/sqrt(mean(x^2) + eps) ----
  // out, inp [N,C]; rstd [N] f32 (saved for backward; fp32 statistics as HF LlamaRMSNorm); weight [C]
  virtual void rmsnorm_forward(Tensor out, Tensor rstd, Tensor inp, Tensor weight, float eps) = 0;
  // dinp = rstd * (g - xhat * mean(g * xhat)), g = dout * weight, xhat = x * rstd (written); dweight +=
  virtual void rmsnorm_backward(Tensor dinp, Tensor dweight, Tensor dout, Tensor inp, Tensor weight, Tensor rstd) = 0;
  // The residual add fused with the RMSNorm after it (Llama's block): res = a + b (rounded to X, as add),
  // then rmsnorm_forward(out, rstd, res, weight, eps); the same values as the two ops, without reading res
  // back from memory. res may alias a or b.
  virtual void add_rmsnorm_forward(Tensor res, Tensor out, Tensor rstd, Tensor a, Tensor b, Tensor weight,
                                   float eps) = 0;
  // rmsnorm_backward with its input gradient added into the residual stream's: dres += dinp (dinp rounded
  // to X, then the sum, as rmsnorm_backward then accumulate compute it), dweight +=; no [N,C] dinp kept.
  virtual void rmsnorm_backward_accumulate(Tensor dres, Tensor dweight, Tensor dout, Tensor inp, Tensor weight,
                                           Tensor rstd) = 0;

  // ---- RMSNorm of attention heads (Qwen3's q_norm and k_norm, before RoPE) -------------------------
  // x [N,W] seen as heads of hs = weight.numel() columns: heads [first_head, first_head + n_heads) of every
  // row are each normalised as rmsnorm_forward normalises a row (fp32 statistic), times the shared
  // weight [hs]; out's other columns are not written. out may alias inp. rstd [N, n_heads] f32 (saved).
  virtual void head_rmsnorm_forward(Tensor out, Tensor rstd, Tensor inp, Tensor weight, int first_head, int n_heads,
                                    float eps) = 0;
  // The gradient of those heads: dinp written there (may alias dout; other columns not written), dweight +=
  // over every row and head.
  virtual void head_rmsnorm_backward(Tensor dinp, Tensor dweight, Tensor dout, Tensor inp, Tensor weight, Tensor rstd,
                                     int first_head, int n_heads) = 0;

  // ---- rotary position embedding, rotate-half form (Hugging Face Llama's q/k layout) -----------------
  // In place on x [B,T,W]: each of the first n_rot_heads heads of hs = 2*inv_freq.numel() columns, at
  // position t, with a = t * inv_freq[i] (f32 [hs/2]) for i < hs/2:
  //   (x_i, x_{i+hs/2}) <- (x_i cos a - x_{i+hs/2} sin a, x_{i+hs/2} cos a + x_i sin a).
  // Columns past the rotated heads (v in a qkv row) are untouched. positions [B,T] i32, optional
  // (generation over a KV cache, packed sequences in training): row (b,t) at position positions[b,t]
  // instead of t; -1 rows untouched.
  virtual void rope_forward(Tensor x, Tensor inv_freq, int n_rot_heads, Tensor positions = Tensor()) = 0;
  // The gradient, in place: the transposed rotation (angle -a), at the same positions.
  virtual void rope_backward(Tensor dx, Tensor inv_freq, int n_rot_heads, Tensor positions = Tensor()) = 0;

  // ---- SwiGLU (Shazeer 2020), Llama's MLP: out[n,j] = silu(inp[n,j]) * inp[n,F+j] ---------------------
  // inp [N,2F] as (gate | up) (one GEMM over the adjacent gate_proj and up_proj weights), out [N,F]
  virtual void swiglu_forward(Tensor out, Tensor inp) = 0;
  // dinp [N,2F] written: (dout * up * silu'(gate) | dout * silu(gate))
  virtual void swiglu_backward(Tensor dinp, Tensor inp, Tensor dout) = 0;

  // ---- residual: out = a + b (out may alias a or b); accumulate: dst += src (the same dtype, or dst f32
  // and src bf16/f16: widened, one rounding-free add; ZeRO's slices reduced in the compute dtype) --------
  virtual void add(Tensor out, Tensor a, Tensor b) = 0;
  virtual void accumulate(Tensor dst, Tensor src) = 0;

  // ---- fused softmax + cross-entropy over the first `vocab` columns of logits [N,Vp] ----------------
  // losses [N] f32 = logsumexp(logits[n,:V]) - logits[n, targets[n]]; targets [N] i32 in [0, vocab), or
  // kIgnoreTarget: that row's loss is 0 and its dlogits row 0 (tokens outside the loss mask).
  virtual void cross_entropy_forward(Tensor losses, Tensor logits, Tensor targets, int vocab) = 0;
  // dlogits [N,Vp] = dloss * (softmax(logits[n,:V]) - onehot(targets[n])); padded columns get 0.
  // dlogits may alias logits (computed in place, as llm.c does, to save a [N,Vp] buffer).
  // row_scale [N] f32, optional: row n's gradient also times row_scale[n] (per-token weights of a loss
  // sum_n w_n loss_n: RL's policy-gradient coefficients); empty: 1.
  virtual void cross_entropy_backward(Tensor dlogits, Tensor logits, Tensor targets, float dloss, int vocab,
                                      Tensor row_scale = Tensor()) = 0;

  // ---- cross-entropy over one slice of the vocabulary (layers/vocab_parallel.hpp: TP rank r holds the
  // logits of ids [r*Vs, (r+1)*Vs), and the ranks combine the slices' row statistics, N floats each) --
  // logits [N,Vs]: only the first `real` columns are ids (0 <= real <= Vs; the rest is padding: outside
  // the softmax, zero gradient). targets [N] i32: the target's column in this slice (< real),
  // kTargetInOtherSlice, or kIgnoreTarget.
  // stats [N,3] f32 = (m = max_{j<real} x[n,j], sum_{j<real} exp(x[n,j] - m), x[n,target] or 0 when the
  // slice does not hold it); a slice without ids (real = 0) gives (-inf, 0, 0).
  // xsum [N] f32, optional (the entropy's statistic, RL's entropy bonus): sum_{j<real} exp(x[n,j] - m) *
  // (x[n,j] - m) with the same m; 0 for a slice without ids. With S = sum exp(x - m) the slice's entropy
  // is log S - xsum / S, and slices combine as the sums of exp do (layers/chunked_lm_loss.cpp).
  virtual void cross_entropy_slice_stats(Tensor stats, Tensor logits, Tensor targets, int real,
                                         Tensor xsum = Tensor()) = 0;
  // The entropy bonus's share of a slice's backward: per row the whole distribution's entropy H_n =
  // -sum_j p_j log p_j ([N] f32) and its weight e_n ([N] f32); dH_n/dx_j = p_j (lse[n] - H_n - x[n,j]).
  // Both empty: none.
  struct EntropyGrad {
    Tensor entropy, scale;
    bool empty() const { return scale.empty(); }
  };
  // dlogits [N,Vs] = dloss * (exp(x[n,j] - lse[n]) - [j == target]) for j < real; 0 for padding and for
  // kIgnoreTarget rows. lse [N] f32: the whole vocabulary's log-sum-exp. dlogits may alias logits.
  // row_scale: as cross_entropy_backward's (it does not scale the entropy term). entropy: adds
  // dloss * e_n * dH_n/dx_j (the gradient of sum_n dloss * e_n * H_n) to the rows not ignored.
  virtual void cross_entropy_slice_backward(Tensor dlogits, Tensor logits, Tensor targets, Tensor lse, float dloss,
                                            int real, Tensor row_scale = Tensor(),
                                            const EntropyGrad& entropy = EntropyGrad()) = 0;

  // ---- optimizer ------------------------------------------------------------------------------------
  struct AdamW {
    float lr, beta1, beta2, eps, weight_decay;
    int step;            // 1-based, for bias correction
    float grad_scale;    // multiplies the gradient first (clipping factor, loss-scale inverse)
  };
  // torch.optim.AdamW over a contiguous span: param -= lr * (mhat / (sqrt(vhat) + eps) + wd * param),
  // with decoupled decay applied as param *= (1 - lr*wd) before the Adam step (PyTorch's order).
  // param (the fp32 master), grad, m, v f32 [n]. param_copy: empty, or [n] in the compute dtype X,
  // written with the updated parameter rounded to X (the working copy the model reads), in the same
  // pass so mixed precision reads the master once.
  virtual void adamw_update(Tensor param, Tensor grad, Tensor m, Tensor v, Tensor param_copy, const AdamW& hp) = 0;
  // sum of x^2 (x f32 or X) accumulated in double precision, returned on the host (gradient norm);
  // a non-finite element makes the result non-finite (fp16 overflow detection relies on it).
  virtual double sum_of_squares(Tensor x) = 0;
  // dst = src converted between f32, bf16 and f16 (same numel; round to nearest even); scale
  // multiplies x (f32 or X) in place.
  virtual void cast(Tensor dst, Tensor src) = 0;
  virtual void scale(Tensor x, float factor) = 0;

  // ---- NF4 dequantization (QLoRA's frozen base, quant/nf4.hpp's layout) ------------------------------
  // out [n] (any shape; f32, bf16 or f16: the compute dtype) from codes [(n+1)/2] u8, element 2i in
  // byte i's high nibble and 2i+1 in its low one (an odd n's last low nibble is padding, not read), and
  // absmax [ceil(n/block)] f32, one scale per block of `block` consecutive elements (a power of two; the
  // last block may be short): out[i] = level[code_i] * absmax[i / block], the 16 NF4 levels of
  // quant::nf4_levels(), the product in fp32 and rounded once to out's dtype (bitsandbytes'
  // dequantize_4bit). Double-quantized scales come from dequantize_blockwise8 first.
  virtual void dequantize_nf4(Tensor out, Tensor codes, Tensor absmax, int block) = 0;
  // Double quantization's scales (QLoRA section 3): out [n] f32 = dynamic[codes[i]] * absmax[i / block] +
  // offset, codes [n] u8 over quant::dynamic_map()'s 256 values, absmax [ceil(n/block)] f32 (block a power
  // of two), the product rounded to fp32 and then the sum (two roundings, never fused: bitsandbytes'
  // dequantize_blockwise, then absmax += offset), so the scales are quant::block_scales' bit for bit.
  virtual void dequantize_blockwise8(Tensor out, Tensor codes, Tensor absmax, int block, float offset) = 0;

  // ---- dropout with a counter-based mask (LoRA's lora_dropout) ---------------------------------------
  // out[i] = keep(k_i) ? inp[i] / (1 - p) : 0 (f32 or X; out may alias inp), where keep(k) is word 0
  // of Philox4x32-10 at counter (k, stream), key seed (core/rng.hpp) being >= p * 2^32 (the threshold
  // rounded down, p in [0, 1)). Element i = (row, col) of out seen as rows of W = out.dim(-1) has
  // k_i = first + row * row_stride + col; row_stride 0 means W (k_i = first + i). A block of columns of
  // a wider matrix (a tensor-parallel rank's input columns: first = the block's first column, row_stride
  // = the whole width) thus gets the whole matrix's mask. The mask depends on (seed, stream, k_i) only:
  // the same arguments drop the same elements in the backward pass, on any backend and thread split.
  virtual void dropout(Tensor out, Tensor inp, float p, std::uint64_t seed, std::uint64_t stream, std::uint64_t first,
                       std::int64_t row_stride = 0) = 0;
};

// The backends: every caller makes them here, so nothing outside backend/ includes cpu/ or cuda/.
// The CPU reference backend (fp32 math in every precision, OpenBLAS GEMMs, OpenMP elsewhere;
// deterministic for a given number of threads). threads = 0 uses OpenMP's default.
std::unique_ptr<Backend> make_cpu_backend(int threads);
// The CUDA backend's choices, fixed at creation.
struct CudaBackendOptions {
  AttentionImpl attention = AttentionImpl::kAuto;  // train.attention
  // cuDNN's SDPA backward: the bitwise-repeatable algorithm (dP in the workspace, no atomics on dQ), as
  // the native kernels are; false takes cuDNN's faster atomic dQ (for benchmarks).
  bool deterministic_attention = true;
};
// The CUDA backend (cuda/: every op on device buffers of one GPU, GEMMs through cuBLASLt, attention
// through cuDNN's fused SDPA or our kernels, a caching allocator, one compute stream) on device `device`
// (the node-local rank's GPU): selects the device for the calling thread, creates the stream, the
// cuBLASLt handle, the allocator and (unless attention is native) the cuDNN handle. Throws ConfigError
// naming the device when it cannot (no such device, no driver, or a build without CUDA), and naming
// train.attention when it is cudnn and cuDNN cannot run here (not built in, device or version).
std::unique_ptr<Backend> make_cuda_backend(int device, const CudaBackendOptions& options = {});
// Whether this build has the CUDA backend (ZTRAIN_CUDA found nvcc); without it make_cuda_backend throws.
bool cuda_backend_built();
// The largest scratch the CPU backend allocates for itself (attention backward) at sequence length T:
// the memory planner adds it to its prediction. This is the fp32 figure.
std::size_t cpu_workspace_bytes(int threads, std::int64_t seq_len);
// One GEMM of a step: [rows, in] x [in, out].
struct GemmExtent {
  std::int64_t in = 0, out = 0;
};
// The same for a training step in compute dtype `compute` over rows = micro_batch * seq_len tokens: the
// attention (output attn_width wide, its q|k|v input qkv_width wide), the GEMMs (a block's and the LM
// head's, as the rank runs them) and the cross-entropy over vocab_columns. A 16-bit X adds the fp32
// copies the ops widen their operands into; the LM head's GEMM is usually the largest (rows*C + Vp*C +
// rows*Vp floats). model::cpu_workspace_bytes gives the model's arguments.
std::size_t cpu_workspace_bytes(int threads, std::int64_t seq_len, DType compute, std::int64_t rows,
                                std::int64_t attn_width, std::int64_t qkv_width, std::span<const GemmExtent> gemms,
                                std::int64_t vocab_columns);
// One GEMM's part of it in a 16-bit compute dtype: its operands' and output's fp32 copies over `rows` rows.
std::size_t cpu_gemm_workspace_bytes(std::int64_t rows, GemmExtent gemm);

}  // namespace zt::backend
