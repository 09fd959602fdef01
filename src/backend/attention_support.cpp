// The cuDNN SDPA support rule (attention_support.hpp). Sources: cuDNN 9's SDPA support matrix and
// the checks cudnn-frontend's sdpa / sdpa_backward nodes make before they build a graph
// (sdpa_support_surface.h, CompositeSDPABackwardNode::pre_validate_node), for the one variant we
// build: fp16/bf16, causal (top-left diagonal), no bias, dropout or padding, a scalar scale.
#include "backend/attention_support.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace zt::backend {
namespace {

// The largest head size cuDNN's fp16/bf16 SDPA takes (forward and backward): 256 on Hopper (sm 9.x),
// 128 elsewhere (Ampere, Ada, Blackwell: the backward's limit there, which the forward's must match
// for a training step to stay on one implementation).
int max_head_size(int sm) { return sm / 10 == 9 ? 256 : 128; }

std::string shape_refusal(const AttentionQuery& q) {
  if (q.dtype != DType::kBF16 && q.dtype != DType::kF16)
    return cat("compute dtype ", dtype_name(q.dtype), " (train.precision=fp32): cuDNN's fused attention runs in bf16 or "
               "fp16 only");
  if (q.document_mask)
    return "a document mask (data.document_mask=true, or RL's packed rollouts, rl.pack_rollouts=true): per-document "
           "masks are not expressible in cuDNN's causal SDPA without a [T, T] bias tensor";
  if (q.head_size <= 0 || q.head_size % 8 != 0 || q.head_size > 256)
    return cat("head size ", q.head_size, " (model.n_embd / model.n_head): cuDNN's SDPA needs a multiple of 8 up to 256");
  if (q.n_head <= 0 || q.n_kv_head <= 0 || q.n_head % q.n_kv_head != 0)
    return cat("n_kv_head=", q.n_kv_head, " does not divide n_head=", q.n_head);
  if (q.seq_len == 1) return "seq_len 1: cuDNN's SDPA backward does not take a single query and key";
  return "";
}

std::string runtime_refusal(const AttentionQuery& q, const CudnnRuntime& r) {
  if (std::string why = cudnn_runtime_refusal(r); !why.empty()) return why;
  if (r.sm != 0 && q.head_size > max_head_size(r.sm))
    return cat("head size ", q.head_size, " is above ", max_head_size(r.sm), ", the largest cuDNN's SDPA takes on "
               "compute capability ", r.sm / 10, ".", r.sm % 10);
  // cuDNN up to 9.15.0 computes a wrong backward when the key length is not a multiple of 128 unless a
  // padding mask is added (cudnn-frontend adds one as a workaround); we run those lengths natively.
  if (r.version != 0 && r.version <= 91500 && q.seq_len > 0 && q.seq_len % 128 != 0)
    return cat("seq_len ", q.seq_len, " is not a multiple of 128, which cuDNN ", cudnn_version_string(r.version),
               "'s SDPA backward needs (newer than 9.15.0 does not)");
  if (r.deterministic && r.sm / 10 == 10 && r.version != 0 && r.version < 91800)
    return cat("a deterministic SDPA backward on compute capability ", r.sm / 10, ".", r.sm % 10,
               " needs cuDNN 9.18 or newer, this is ", cudnn_version_string(r.version));
  return "";
}

}  // namespace

std::string cudnn_runtime_refusal(const CudnnRuntime& r) {
  if (r.version != 0 && r.version < 90000)
    return cat("cuDNN ", cudnn_version_string(r.version), " is older than 9.0, the first with the SDPA graphs built here");
  if (r.version == 91000 || r.version == 91001)
    return cat("cuDNN ", cudnn_version_string(r.version), " has a known fp16/bf16 SDPA forward bug (fixed in 9.10.2)");
  if (r.sm != 0 && r.sm < 80)
    return cat("compute capability ", r.sm / 10, ".", r.sm % 10, ": cuDNN's fused SDPA needs 8.0 (Ampere) or newer");
  return "";
}

const char* attention_impl_name(AttentionImpl impl) {
  switch (impl) {
    case AttentionImpl::kAuto: return "auto";
    case AttentionImpl::kCudnn: return "cudnn";
    case AttentionImpl::kNative: return "native";
  }
  return "?";
}

std::string cudnn_attention_refusal(const AttentionQuery& q, const CudnnRuntime* runtime) {
  std::string why = shape_refusal(q);
  if (why.empty() && runtime != nullptr) why = runtime_refusal(q, *runtime);
  return why;
}

std::string cudnn_version_string(int version) {
  return cat(version / 10000, ".", version % 10000 / 100, ".", version % 100);
}

std::string attention_choice(AttentionImpl impl, const AttentionQuery& q, const CudnnRuntime& runtime,
                             const std::string& unavailable) {
  const std::string key = cat("train.attention=", attention_impl_name(impl));
  if (impl == AttentionImpl::kNative) return cat("native kernels (", key, ")");
  if (!unavailable.empty()) return cat("native kernels (", key, ": ", unavailable, ")");
  const std::string why = cudnn_attention_refusal(q, &runtime);
  if (!why.empty()) return cat("native kernels (", key, ": ", why, ")");
  return cat("cuDNN ", cudnn_version_string(runtime.version), " fused SDPA (", key, ")");
}

namespace {
std::uint64_t partials_per_query(std::int64_t max_len, std::int64_t head_size) {
  const std::int64_t splits = (max_len + kCachedAttentionKeysPerSplit - 1) / kCachedAttentionKeysPerSplit;
  return static_cast<std::uint64_t>(splits * (head_size + 2)) * sizeof(float);
}
}  // namespace

std::int64_t cached_attention_group(std::int64_t items, std::int64_t max_len, std::int64_t head_size) {
  const auto fit = static_cast<std::int64_t>(kCachedAttentionScratchBudget / partials_per_query(max_len, head_size));
  return std::max<std::int64_t>(1, std::min(items, fit));
}

std::uint64_t cached_attention_scratch_bytes(std::int64_t items, std::int64_t max_len, std::int64_t head_size) {
  if (items <= 0) return 0;
  return static_cast<std::uint64_t>(cached_attention_group(items, max_len, head_size)) *
         partials_per_query(max_len, head_size);
}

}  // namespace zt::backend
