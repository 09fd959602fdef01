// The resume rule for a data.train blend (train_blend.hpp): the checkpoint's blend goes on when its
// weights agree, another mix is refused naming the checkpoint and data.reset_order, and with it the new
// mix starts at the checkpoint's cursor; a checkpoint from before blends counts as one corpus.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "train/train_blend.hpp"

namespace zt::train {
namespace {

ckpt::TrainState blended_state() {
  ckpt::TrainState s;
  s.step = 3;
  s.windows_consumed = 24;
  s.blend = {{"web/*.h5", 0.7, 100, 17}, {"code/*.h5", 0.3, 10, 7}};
  s.blend_start = 8;
  return s;
}

config::Config with_train(const std::string& train, bool reset = false) {
  config::Config c;
  c.data.train = train;
  c.data.reset_order = reset;
  return c;
}

TEST(BlendResume, TheSameWeightsGoOnFromTheCheckpointsStart) {
  EXPECT_EQ(blend_start_on_resume(blended_state(), with_train("7:web/*.h5,3:code/*.h5"), "ck/step_3"), 8u);
  EXPECT_EQ(blend_start_on_resume(blended_state(), with_train("7:web/*.h5,3:code/*.h5", true), "ck/step_3"), 8u);
}

TEST(BlendResume, AnotherMixIsRefusedUnlessResetOrder) {
  try {
    blend_start_on_resume(blended_state(), with_train("0.5:web/*.h5,0.5:code/*.h5"), "ck/step_3");
    FAIL() << "another mix resumed";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("checkpoint ck/step_3 was trained on data.train=0.7:web/*.h5,0.3:code/*.h5"), std::string::npos) << m;
    EXPECT_NE(m.find("data.reset_order=true to start the new mix's order at step 3 (window 24)"), std::string::npos) << m;
  }
  EXPECT_EQ(blend_start_on_resume(blended_state(), with_train("0.5:web/*.h5,0.5:code/*.h5", true), "ck/step_3"), 24u);
  EXPECT_THROW(blend_start_on_resume(blended_state(), with_train("web/*.h5"), "ck/step_3"), InputError);
}

TEST(BlendResume, ACheckpointFromBeforeBlendsIsOneCorpus) {
  ckpt::TrainState old;
  old.windows_consumed = 40;
  EXPECT_EQ(blend_start_on_resume(old, with_train("data/train_*.h5"), "ck"), 0u);
  EXPECT_THROW(blend_start_on_resume(old, with_train("0.5:a/*.h5,0.5:b/*.h5"), "ck"), InputError);
  EXPECT_EQ(blend_start_on_resume(old, with_train("0.5:a/*.h5,0.5:b/*.h5", true), "ck"), 40u);
}

}  // namespace
}  // namespace zt::train
