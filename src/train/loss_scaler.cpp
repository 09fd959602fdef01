// fp16 loss scaling (loss_scaler.hpp).
#include "train/loss_scaler.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"

namespace zt::train {

LossScaler::LossScaler(const config::TrainConfig& t) {
  if (t.precision != config::Precision::kFp16) return;  // disabled: scale 1, never skips
  state_.enabled = true;
  dynamic_ = t.loss_scale == "dynamic";
  state_.scale = dynamic_ ? t.loss_scale_init : std::stod(t.loss_scale);  // validated by the config
  window_ = t.loss_scale_window;
  min_scale_ = t.loss_scale_min;
}

bool LossScaler::update(bool finite) {
  if (!state_.enabled) return true;  // bf16/fp32: a non-finite norm is the loss check's business
  if (!finite) {
    // DeepSpeed's rule too: an overflow at the floor cannot be fixed by scaling, the run has diverged.
    if (dynamic_ && state_.scale <= min_scale_)
      throw Error(cat("fp16: the gradients overflowed at the minimum loss scale (train.loss_scale_min=", min_scale_,
                      "): the run diverged or its values exceed fp16's range; lower optim.lr, raise "
                      "optim.warmup_steps, or use train.precision=bf16"));
    if (dynamic_) state_.scale = std::max(min_scale_, state_.scale / 2);
    state_.good_steps = 0;
    ++state_.skipped_steps;
    return false;
  }
  if (dynamic_ && ++state_.good_steps >= window_) {
    state_.scale *= 2;
    state_.good_steps = 0;
  }
  return true;
}

void LossScaler::restore(const ckpt::LossScaleState& saved) {
  if (!state_.enabled || !saved.enabled) return;
  if (dynamic_) state_ = saved;  // a fixed scale stays what this run configures
}

}  // namespace zt::train
