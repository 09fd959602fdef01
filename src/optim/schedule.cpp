// Warm-up + cosine schedule and the clipping factor.
#include "optim/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace zt::optim {

double learning_rate(const config::OptimConfig& o, std::int64_t max_steps, std::int64_t step) {
  if (step < o.warmup_steps) return o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  if (o.schedule == config::Schedule::kConstant) return o.lr;
  const std::int64_t decay_steps = max_steps - o.warmup_steps;
  if (decay_steps <= 0) return o.lr;
  const double progress = std::min(1.0, static_cast<double>(step - o.warmup_steps) / static_cast<double>(decay_steps));
  return o.min_lr + 0.5 * (o.lr - o.min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
}

double norm_from_sum_of_squares(double sum_of_squares) {
  if (!std::isfinite(sum_of_squares)) return sum_of_squares;
  return std::sqrt(std::max(0.0, sum_of_squares));
}

double clip_factor(double grad_norm, double max_norm) {
  if (max_norm <= 0) return 1.0;
  return std::min(1.0, max_norm / (grad_norm + 1e-6));
}

}  // namespace zt::optim
