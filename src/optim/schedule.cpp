// Warm-up, stable and decay phases of the learning rate, and the clipping factor.
#include "optim/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace zt::optim {

namespace {
// The share of (lr - min_lr) left at decay progress p in [0, 1].
double remaining(config::Schedule schedule, double p) {
  switch (schedule) {
    case config::Schedule::kCosine: return 0.5 * (1.0 + std::cos(std::numbers::pi * p));
    case config::Schedule::kLinear: return 1.0 - p;
    case config::Schedule::kSqrt: return 1.0 - std::sqrt(p);
    case config::Schedule::kConstant: break;
  }
  return 1.0;
}
}  // namespace

double learning_rate(const config::OptimConfig& o, std::int64_t max_steps, std::int64_t step) {
  if (step < o.warmup_steps) return o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  if (o.schedule == config::Schedule::kConstant) return o.lr;
  const std::int64_t after_warmup = max_steps - o.warmup_steps;
  const auto decay_steps = static_cast<std::int64_t>(std::llround(o.decay_fraction * static_cast<double>(after_warmup)));
  if (decay_steps <= 0) return o.lr;
  const std::int64_t start = max_steps - decay_steps;
  if (step < start) return o.lr;
  const double p = std::min(1.0, static_cast<double>(step - start) / static_cast<double>(decay_steps));
  return o.min_lr + (o.lr - o.min_lr) * remaining(o.schedule, p);
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
