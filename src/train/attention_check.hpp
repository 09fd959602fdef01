// train.attention at start-up: the model's attention calls as the backend's support rule sees them,
// the exit-2 check of train.attention=cudnn where cuDNN cannot run them, and the choice handed to the
// CUDA backend.
#pragma once

#include "backend/backend.hpp"
#include "config/config.hpp"

namespace zt::train {

backend::AttentionImpl attention_impl(config::Attention a);

// The model's attention calls: the compute dtype of train.precision, hs = n_embd / n_head, the heads,
// model.seq_len and data.document_mask.
backend::AttentionQuery attention_query(const config::Config& c);

// train.attention=cudnn with what cuDNN's fused attention cannot run (fp32, a document mask, a head size
// outside its matrix, ranks computing on the CPU: `device` is where they do, or what --plan plans for)
// is a ConfigError naming the keys and the fix, before any work. What depends on the GPU and the cuDNN
// library (compute capability, version, a build without cuDNN) is checked when the backend is made.
void check_attention(const config::Config& c, config::Device device);

}  // namespace zt::train
