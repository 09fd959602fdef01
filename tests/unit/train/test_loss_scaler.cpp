// fp16 loss scaling: DeepSpeed's dynamic rule (halve on overflow and skip, double after a window of
// good steps, never below the minimum), a fixed scale, and no scaling at all outside fp16.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "train/loss_scaler.hpp"

namespace zt::train {
namespace {

config::TrainConfig fp16(const std::string& scale = "dynamic") {
  config::TrainConfig t;
  t.precision = config::Precision::kFp16;
  t.loss_scale = scale;
  t.loss_scale_init = 1024;
  t.loss_scale_window = 3;
  t.loss_scale_min = 256;
  return t;
}

TEST(LossScaler, DisabledOutsideFp16NeverSkips) {
  for (config::Precision p : {config::Precision::kFp32, config::Precision::kBf16}) {
    config::TrainConfig t = fp16();
    t.precision = p;
    LossScaler s(t);
    EXPECT_FALSE(s.enabled());
    EXPECT_EQ(s.scale(), 1.0);
    EXPECT_TRUE(s.update(false));
    EXPECT_EQ(s.scale(), 1.0);
  }
}

TEST(LossScaler, DynamicHalvesOnOverflowDoublesAfterWindowStopsAtMin) {
  LossScaler s(fp16());
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_FALSE(s.update(false));  // overflow: skipped, halved
  EXPECT_EQ(s.scale(), 512);
  EXPECT_TRUE(s.update(true));
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 512);      // two good steps: not yet a window
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 1024);     // three in a row: doubled
  EXPECT_FALSE(s.update(false));
  EXPECT_TRUE(s.update(true));
  EXPECT_TRUE(s.update(true));
  EXPECT_FALSE(s.update(false));  // an overflow resets the run of good steps
  EXPECT_TRUE(s.update(true));
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 256);      // at loss_scale_min, not doubled: the run of good steps restarted
  EXPECT_EQ(s.skipped_steps(), 3);  // AdamW's step count leaves these out
  try {
    s.update(false);  // overflowing at the floor: diverged
    FAIL() << "no error at the minimum scale";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.loss_scale_min=256"), std::string::npos) << e.what();
  }
}

TEST(LossScaler, FixedScaleSkipsButNeverChanges) {
  LossScaler s(fp16("128"));
  EXPECT_TRUE(s.enabled());
  EXPECT_EQ(s.scale(), 128);
  EXPECT_FALSE(s.update(false));
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 128);
}

TEST(LossScaler, RestoreContinuesExactlyAndIgnoresNonFp16Checkpoints) {
  LossScaler a(fp16());
  a.update(false);
  a.update(true);
  LossScaler b(fp16());
  b.restore(a.state());
  EXPECT_EQ(b.scale(), a.scale());
  EXPECT_EQ(b.state().good_steps, a.state().good_steps);
  for (bool finite : {true, true, false, true}) EXPECT_EQ(a.update(finite), b.update(finite));
  EXPECT_EQ(b.scale(), a.scale());
  LossScaler c(fp16());
  c.restore(ckpt::LossScaleState{});  // written by a bf16 run: keep the configured start
  EXPECT_EQ(c.scale(), 1024);
}

// The skipped steps count out of AdamW's step (its bias correction): a resume takes them back whatever
// the scale (a fixed one's skips too) and whatever the precision resumed in (fp16 -> bf16 keeps them,
// and a bf16 checkpoint of them hands them on again).
TEST(LossScaler, RestoreKeepsTheSkippedStepsWhateverTheScaleAndPrecision) {
  LossScaler fixed(fp16("65536"));
  fixed.update(false), fixed.update(true), fixed.update(false);
  LossScaler resumed(fp16("65536"));
  resumed.restore(fixed.state());
  EXPECT_EQ(resumed.skipped_steps(), 2);
  EXPECT_EQ(resumed.scale(), 65536);
  config::TrainConfig bf16;
  bf16.precision = config::Precision::kBf16;
  LossScaler in_bf16(bf16);
  in_bf16.restore(fixed.state());
  EXPECT_FALSE(in_bf16.enabled());
  EXPECT_EQ(in_bf16.skipped_steps(), 2);
  EXPECT_TRUE(in_bf16.update(false));  // bf16 never skips
  LossScaler back_in_fp16(fp16());
  back_in_fp16.restore(in_bf16.state());
  EXPECT_EQ(back_in_fp16.skipped_steps(), 2);
  EXPECT_EQ(back_in_fp16.scale(), 1024);  // a disabled scaler's state has no scale to take
}

}  // namespace
}  // namespace zt::train
