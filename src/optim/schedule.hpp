// Learning-rate schedule and gradient clipping, as a PyTorch user writes them (torch semantics).
#pragma once

#include <cstdint>

#include "config/config.hpp"

namespace zt::optim {

// lr for optimizer step s (0-based): lr*(s+1)/warmup while s < warmup; then cosine from lr to min_lr
// over [warmup, max_steps) (schedule=cosine) or lr (schedule=constant).
double learning_rate(const config::OptimConfig& optim, std::int64_t max_steps, std::int64_t step);

// torch.nn.utils.clip_grad_norm_: gradients are multiplied by min(1, max_norm / (norm + 1e-6));
// max_norm = 0 turns clipping off (factor 1).
double clip_factor(double grad_norm, double max_norm);

}  // namespace zt::optim
