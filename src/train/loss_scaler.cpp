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
  // The skipped steps made no update, and AdamW's step count (its bias correction) leaves them out:
  // carried whatever the scale and the precision, a fixed scale's skips and an fp16 run resumed in bf16
  // included (as torch keeps its optimizer's step apart from the GradScaler).
  state_.skipped_steps = saved.skipped_steps;
  if (!state_.enabled || !saved.enabled || !dynamic_) return;  // a fixed scale stays what this run configures
  state_.scale = saved.scale;
  state_.good_steps = saved.good_steps;
}

}  // namespace zt::train
