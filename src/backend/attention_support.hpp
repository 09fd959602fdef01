// Which attention implementation the CUDA backend runs (train.attention), and the rule for where
// cuDNN's fused SDPA (scaled dot-product attention) applies: a pure function of the shape, dtype,
// mask, compute capability and cuDNN version, taken from cuDNN's documented support matrix for
// fp16/bf16 causal SDPA (the checks cudnn-frontend's sdpa nodes make before building a graph). It
// has no CUDA types, so the start-up checks and the unit tests use it without a GPU.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.hpp"

namespace zt::backend {

enum class AttentionImpl {
  kAuto,    // cuDNN's fused SDPA where it supports the call, the native kernels elsewhere
  kCudnn,   // cuDNN only: an unsupported call is an error, said at start-up where it can be
  kNative,  // the native flash-attention kernels (backend/cuda/attention.cu), the CPU-checked reference
};
const char* attention_impl_name(AttentionImpl impl);  // "auto", "cudnn", "native" (train.attention's values)

// One attention call (or, at start-up, the model's: seq_len 0 when it is not known).
struct AttentionQuery {
  DType dtype = DType::kBF16;     // the compute dtype of qkv and out
  std::int64_t head_size = 0;     // hs = C / n_head
  std::int64_t n_head = 0;        // query heads (on this rank)
  std::int64_t n_kv_head = 0;     // K/V heads (grouped-query attention when below n_head)
  std::int64_t seq_len = 0;       // T; 0 = not known (start-up: the model's seq_len is given)
  bool document_mask = false;     // segment starts given (data.document_mask, rl.pack_rollouts)
};

// What the device and the loaded cuDNN are. sm = major * 10 + minor (0: not known); version is
// cudnnGetVersion()'s (major * 10000 + minor * 100 + patch, e.g. 91900; 0: not known).
struct CudnnRuntime {
  int sm = 0;
  int version = 0;
  bool deterministic = true;  // the backward pass asked for (cuDNN's dP-workspace algorithm, no atomics)
};

// Why cuDNN's fused SDPA cannot run this call; "" when it can. With runtime == nullptr only what the
// configuration decides is checked (dtype, mask, head size, seq_len): the start-up check before any
// device is touched. The reasons name the configuration key behind them, for the exit-2 message.
std::string cudnn_attention_refusal(const AttentionQuery& q, const CudnnRuntime* runtime);

// The part of that rule no call changes: the cuDNN version and the device ("" when both can run SDPA).
std::string cudnn_runtime_refusal(const CudnnRuntime& runtime);

// "9.19.0" from 91900.
std::string cudnn_version_string(int version);

// The start-up line's words for what attention runs as: "cuDNN 9.19.0 fused SDPA (train.attention=auto)"
// or "native kernels (train.attention=auto: <why not cuDNN>)". unavailable: why cuDNN cannot run at all
// in this process (not built in, failed to load, device too old); "" when it can.
std::string attention_choice(AttentionImpl impl, const AttentionQuery& q, const CudnnRuntime& runtime,
                             const std::string& unavailable);

// The CUDA backend's attention over a KV cache (attention_cached_forward): each query's keys in splits of
// kCachedAttentionKeysPerSplit (flash decoding), each split's partial (max, sum, acc[hs]) in an fp32
// scratch, the (row, head) queries in groups whose partials fit kCachedAttentionScratchBudget. Here, with
// no CUDA types, so the memory plans (gen::Engine::bytes) count what the kernel allocates.
inline constexpr std::int64_t kCachedAttentionKeysPerSplit = 256;
inline constexpr std::uint64_t kCachedAttentionScratchBudget = 64ull << 20;
// The queries a group holds: `items` (rows x heads) at most, as many as the budget allows, at least one.
std::int64_t cached_attention_group(std::int64_t items, std::int64_t max_len, std::int64_t head_size);
// Its scratch: the group's partials (a cache of max_len tokens, head size head_size).
std::uint64_t cached_attention_scratch_bytes(std::int64_t items, std::int64_t max_len, std::int64_t head_size);

}  // namespace zt::backend
