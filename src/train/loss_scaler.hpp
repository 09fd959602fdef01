// Loss scaling for train.precision=fp16 (Micikevicius et al. 2018; DeepSpeed's ds_config "fp16"
// block): the loss gradient is multiplied by the scale before the backward pass so that small fp16
// activation gradients do not flush to zero; the optimizer divides it out again. A step whose
// gradients overflowed (a non-finite global norm) is skipped: no update, the batch still consumed,
// the step still counted (docs/INTERFACE.md). Dynamic scaling halves the scale on overflow (not below
// loss_scale_min) and doubles it after loss_scale_window steps in a row without one. bf16 and fp32 need
// no scaling: the scaler is then disabled with scale 1 and never skips.
#pragma once

#include <cstdint>

#include "ckpt/state.hpp"
#include "config/config.hpp"

namespace zt::train {

class LossScaler {
 public:
  explicit LossScaler(const config::TrainConfig& train);

  bool enabled() const { return state_.enabled; }
  double scale() const { return state_.scale; }
  std::int64_t skipped_steps() const { return state_.skipped_steps; }  // steps with no update, ever

  // After the gradients of a step are reduced: `finite` says whether the global gradient norm (of
  // the scaled gradients) is finite. Returns whether the step is applied; adjusts the scale. Throws
  // when a dynamic scale overflows at loss_scale_min (DeepSpeed stops there too).
  bool update(bool finite);

  // The state a checkpoint keeps, so that a resumed run scales exactly as the uninterrupted one.
  const ckpt::LossScaleState& state() const { return state_; }
  // Restores a checkpoint's state: its skipped steps always (AdamW's step count leaves them out), its
  // dynamic scale where both runs scale dynamically; otherwise the configured scale.
  void restore(const ckpt::LossScaleState& saved);

 private:
  ckpt::LossScaleState state_;
  bool dynamic_ = false;
  std::int64_t window_ = 1000;
  double min_scale_ = 1;
};

}  // namespace zt::train
