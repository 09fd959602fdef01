// The resume rule for a data.train blend (train_blend.hpp): the checkpoint's blend goes on when its
// weights and its corpora's shards agree, another mix or another shard set is refused naming the
// checkpoint, what changed and data.reset_order, and with it the new order starts at the checkpoint's
// cursor; a checkpoint from before blends counts as one corpus, one from before shard fingerprints is
// compared by windows per epoch.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "train/train_blend.hpp"

namespace zt::train {
namespace {

ckpt::TrainState blended_state() {
  ckpt::TrainState s;
  s.step = 3;
  s.windows_consumed = 24;
  s.blend = {{"web/*.h5", 0.7, 100, 17, 3, 25700, "aa"}, {"code/*.h5", 0.3, 10, 7, 1, 2570, "cc"}};
  s.blend_start = 8;
  return s;
}

// This run's corpora: the checkpoint's shards (the same fingerprints) unless changed.
std::vector<ckpt::CorpusCursor> now(const std::string& web_sha = "aa", std::uint64_t web_shards = 3,
                                    std::uint64_t web_tokens = 25700) {
  return {{"web/*.h5", 0.7, 100, 0, web_shards, web_tokens, web_sha}, {"code/*.h5", 0.3, 10, 0, 1, 2570, "cc"}};
}

config::Config with_train(const std::string& train, bool reset = false) {
  config::Config c;
  c.data.train = train;
  c.data.reset_order = reset;
  return c;
}

TEST(BlendResume, TheSameWeightsGoOnFromTheCheckpointsStart) {
  EXPECT_EQ(blend_start_on_resume(blended_state(), with_train("7:web/*.h5,3:code/*.h5"), "ck/step_3", now()), 8u);
  EXPECT_EQ(blend_start_on_resume(blended_state(), with_train("7:web/*.h5,3:code/*.h5", true), "ck/step_3", now()), 8u);
}

TEST(BlendResume, AnotherMixIsRefusedUnlessResetOrder) {
  try {
    blend_start_on_resume(blended_state(), with_train("0.5:web/*.h5,0.5:code/*.h5"), "ck/step_3", now());
    FAIL() << "another mix resumed";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("checkpoint ck/step_3 was trained on data.train=0.7:web/*.h5,0.3:code/*.h5"), std::string::npos) << m;
    EXPECT_NE(m.find("data.reset_order=true to start the new mix's order at step 3 (window 24)"), std::string::npos) << m;
  }
  EXPECT_EQ(blend_start_on_resume(blended_state(), with_train("0.5:web/*.h5,0.5:code/*.h5", true), "ck/step_3", now()), 24u);
  EXPECT_THROW(blend_start_on_resume(blended_state(), with_train("web/*.h5"), "ck/step_3", now()), InputError);
}

TEST(BlendResume, ACheckpointFromBeforeBlendsIsOneCorpus) {
  ckpt::TrainState old;
  old.windows_consumed = 40;
  EXPECT_EQ(blend_start_on_resume(old, with_train("data/train_*.h5"), "ck", {{"", 1, 0, 0}}), 0u);
  EXPECT_THROW(blend_start_on_resume(old, with_train("0.5:a/*.h5,0.5:b/*.h5"), "ck", {{"", 1, 0, 0}}), InputError);
  EXPECT_EQ(blend_start_on_resume(old, with_train("0.5:a/*.h5,0.5:b/*.h5", true), "ck", {{"", 1, 0, 0}}), 40u);
}

TEST(BlendResume, ChangedShardsAreRefusedUnlessResetOrder) {
  try {
    blend_start_on_resume(blended_state(), with_train("7:web/*.h5,3:code/*.h5"), "ck/step_3", now("ab", 4, 30000));
    FAIL() << "another shard set resumed";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("checkpoint ck/step_3 read 3 shard(s) of 25700 tokens; this run's glob matches 4 shard(s) of 30000 "
                     "tokens (a shard added, removed or rewritten) in corpus 1 of data.train (web/*.h5)"),
              std::string::npos) << m;
    EXPECT_NE(m.find("set data.reset_order=true to start an order over these shards at step 3 (window 24)"),
              std::string::npos) << m;
  }
  EXPECT_EQ(blend_start_on_resume(blended_state(), with_train("7:web/*.h5,3:code/*.h5", true), "ck/step_3",
                                  now("ab", 4, 30000)),
            24u);
  try {  // the same counts, other contents
    blend_start_on_resume(blended_state(), with_train("7:web/*.h5,3:code/*.h5"), "ck/step_3", now("ab"));
    FAIL() << "rewritten shards resumed";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("the same counts, but a shard renamed or rewritten"), std::string::npos) << e.what();
  }
  // The same shards under another glob (moved data) go on from the checkpoint's start.
  EXPECT_EQ(blend_start_on_resume(blended_state(), with_train("7:/new/web/*.h5,3:code/*.h5"), "ck/step_3", now()), 8u);
}

// Checkpoints from before shard fingerprints: the windows per epoch tell a changed shard set, at the
// same model.seq_len (another seq_len changes them by itself).
TEST(BlendResume, OlderCheckpointsCompareWindowsPerEpoch) {
  ckpt::TrainState old = blended_state();
  for (ckpt::CorpusCursor& k : old.blend) k.shards_sha256.clear();
  old.seq_len = 64;
  config::Config c = with_train("7:web/*.h5,3:code/*.h5");
  c.model.seq_len = 64;
  std::vector<ckpt::CorpusCursor> grown = now();
  grown[1].windows_per_epoch = 12;
  EXPECT_EQ(blend_start_on_resume(old, c, "ck/step_3", now()), 8u);
  try {
    blend_start_on_resume(old, c, "ck/step_3", grown);
    FAIL() << "a changed shard set resumed";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("had 10 windows per epoch; this run's shards give 12 (a shard added, removed or "
                                         "rewritten) in corpus 2 of data.train (code/*.h5)"),
              std::string::npos) << e.what();
  }
  c.model.seq_len = 32;
  EXPECT_EQ(blend_start_on_resume(old, c, "ck/step_3", grown), 8u);
  ckpt::TrainState plain;  // before blends: one corpus, the stream's windows per epoch
  plain.windows_consumed = 40, plain.windows_per_epoch = 50;
  EXPECT_EQ(blend_start_on_resume(plain, with_train("data/train_*.h5"), "ck", {{"data/train_*.h5", 1, 50, 0}}), 0u);
  try {
    blend_start_on_resume(plain, with_train("data/train_*.h5"), "ck", {{"data/train_*.h5", 1, 60, 0}});
    FAIL() << "a changed shard set resumed";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("had 50 windows per epoch; this run's shards give 60 (a shard added, removed or "
                                         "rewritten) in data.train (data/train_*.h5)"),
              std::string::npos) << e.what();
  }
  EXPECT_EQ(blend_start_on_resume(plain, with_train("data/train_*.h5", true), "ck", {{"data/train_*.h5", 1, 60, 0}}), 40u);
}

}  // namespace
}  // namespace zt::train
