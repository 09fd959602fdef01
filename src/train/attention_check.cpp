// train.attention's start-up check (attention_check.hpp).
#include "train/attention_check.hpp"

#include "config/options.hpp"
#include "core/error.hpp"
#include "model/from_config.hpp"

namespace zt::train {

backend::AttentionImpl attention_impl(config::Attention a) {
  switch (a) {
    case config::Attention::kCudnn: return backend::AttentionImpl::kCudnn;
    case config::Attention::kNative: return backend::AttentionImpl::kNative;
    case config::Attention::kAuto: break;
  }
  return backend::AttentionImpl::kAuto;
}

backend::AttentionQuery attention_query(const config::Config& c) {
  const config::ModelConfig& m = c.model;
  backend::AttentionQuery q;
  q.dtype = model::compute_dtype(c.train.precision);
  q.head_size = m.n_head > 0 ? m.n_embd / m.n_head : 0;
  q.n_head = m.n_head;
  q.n_kv_head = m.n_kv_head > 0 ? m.n_kv_head : m.n_head;
  q.seq_len = m.seq_len;
  q.document_mask = c.data.document_mask || (!c.rl.prompts.empty() && c.rl.pack_rollouts);
  return q;
}

void check_attention(const config::Config& c, config::Device device) {
  if (c.train.attention != config::Attention::kCudnn) return;
  const std::string why = backend::cudnn_attention_refusal(attention_query(c), nullptr);
  if (!why.empty())
    throw ConfigError(cat("train.attention=cudnn: cuDNN's fused attention cannot run this model: ", why,
                          "; use train.attention=auto (the native kernels where cuDNN cannot) or native"));
  if (device != config::Device::kCuda)
    throw ConfigError(cat("train.attention=cudnn runs on the CUDA backend, but this rank computes on the CPU (train.device=",
                          config::to_string(c.train.device), "): use train.device=cuda on a GPU, or train.attention=auto"));
}

}  // namespace zt::train
