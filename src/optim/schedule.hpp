// Learning-rate schedule and gradient clipping, as a PyTorch user writes them (torch semantics).
#pragma once

#include <cstdint>

#include "config/config.hpp"

namespace zt::optim {

// lr for optimizer step s (0-based): lr*(s+1)/warmup while s < warmup; then lr until the decay starts,
// and min_lr + (lr - min_lr) f(p) over the decay's D steps, p = (s - start) / D in [0, 1), f = the
// schedule's: cosine (1 + cos(pi p)) / 2, linear 1 - p, sqrt 1 - sqrt(p); constant: lr throughout. D =
// decay_fraction x (max_steps - warmup) rounded, the decay the last D steps (torchtitan's
// warmup-stable-decay with decay_ratio; decay_fraction 1: from the warm-up's end, as llm.c and
// nanoGPT's cosine). Past max_steps: min_lr.
double learning_rate(const config::OptimConfig& optim, std::int64_t max_steps, std::int64_t step);

// torch.nn.utils.clip_grad_norm_: gradients are multiplied by min(1, max_norm / (norm + 1e-6));
// max_norm = 0 turns clipping off (factor 1).
double clip_factor(double grad_norm, double max_norm);

// The gradient norm from a sum of squares assembled over ranks (parts minus what is counted twice, so
// rounding may leave it a hair below 0: clamped). An inf or NaN sum stays inf or NaN (max(0, NaN) would
// be 0, a finite norm): every rank then sees the overflow and the loss scaler skips the step.
double norm_from_sum_of_squares(double sum_of_squares);

}  // namespace zt::optim
