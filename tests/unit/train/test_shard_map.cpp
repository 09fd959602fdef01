// Pipeline stages' cut of the model (model/stage_split.hpp) and the checkpoint contract of a rank's part
// of the model (train/shard_map.hpp): the block split and its log line; a stage's table keeps the
// model's unit numbers with its own parameters only (the last stage of a tied model a copy of the token
// embedding), and so does its TP cut; over every grid of pp x dp x tp ranks the saved runs tile the
// global flat buffer exactly once, and read_local gives each rank (the tied copy too: the same
// vocabulary shard as the first stage's) the global values of its parameters.
#include <gtest/gtest.h>

#include <vector>

#include "model/param_table.hpp"
#include "model/stage_split.hpp"
#include "train/shard_map.hpp"

namespace zt::train {
namespace {

const model::GptShape kGpt6 = model::GptShape::make(6, 4, 16, 100, 8);

TEST(StageSplit, BlocksAndTheLogLine) {
  const model::PipelineCut cut = model::PipelineCut::make(kGpt6, 4);  // 2, 2, 1, 1
  const std::vector<model::Stage>& s = cut.virtual_stages;
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].first_block, 0);
  EXPECT_EQ(s[1].first_block, 2);
  EXPECT_EQ(s[3].first_block, 5);
  EXPECT_EQ(s[3].end(6), 6);
  EXPECT_EQ(cut.describe(kGpt6),
            "stage 0: embedding + blocks 0-1; stage 1: blocks 2-3; stage 2: block 4; stage 3: block 5 + head (tied copy) and loss");
  const model::GptShape two = model::GptShape::make(2, 4, 16, 100, 8);
  EXPECT_EQ(model::PipelineCut::make(two, 1).describe(two), "stage 0: embedding + blocks 0-1 + head and loss");
  EXPECT_THROW(model::PipelineCut::make(two, 3), ConfigError);
  EXPECT_THROW(model::PipelineCut::make(kGpt6, 2, 4), ConfigError);
}

TEST(StageSplit, InterleavedChunks) {
  // 2 ranks x 3 chunks over 6 blocks: rank 0 runs virtual stages 0, 2, 4 (blocks 0, 2, 4), rank 1 the rest.
  const model::PipelineCut cut = model::PipelineCut::make(kGpt6, 2, 3);
  EXPECT_EQ(cut.describe(kGpt6),
            "rank 0: embedding + block 0, block 2, block 4; rank 1: block 1, block 3, block 5 + head (tied copy) and loss");
  const model::ParamTable global(kGpt6);
  const model::ParamTable zero = cut.table(global, 0), one = cut.table(global, 1);
  EXPECT_EQ(zero.units()[1].numel, global.units()[1].numel);
  EXPECT_EQ(zero.units()[2].numel, 0u);
  EXPECT_EQ(zero.units()[5].numel, global.units()[5].numel);
  EXPECT_EQ(zero.units()[7].numel, 0u);
  EXPECT_EQ(one.units()[6].numel, global.units()[6].numel);
  EXPECT_EQ(one.units()[7].numel, global.units()[7].numel);
  EXPECT_EQ(one.units()[0].numel, global.find("transformer.wte.weight").numel);
  EXPECT_EQ(zero.numel() + one.numel(), global.numel() + global.find("transformer.wte.weight").numel);
}

TEST(StageSplit, StageTablesKeepUnitNumbers) {
  const model::ParamTable global(model::GptShape::make(4, 2, 16, 100, 8));
  const model::PipelineCut cut = model::PipelineCut::make(global.shape(), 2);
  const model::ParamTable first = cut.table(global, 0), last = cut.table(global, 1);
  ASSERT_EQ(first.n_units(), 6);
  ASSERT_EQ(last.n_units(), 6);
  EXPECT_EQ(first.units()[0].numel, global.units()[0].numel);  // wte and wpe
  EXPECT_EQ(first.units()[3].numel, 0u);
  EXPECT_EQ(first.units()[5].numel, 0u);
  EXPECT_EQ(last.units()[0].numel, global.find("transformer.wte.weight").numel);  // the tied copy only
  EXPECT_EQ(last.params()[0].name, "transformer.wte.weight");
  EXPECT_EQ(last.units()[1].numel, 0u);
  EXPECT_EQ(last.units()[5].numel, global.units()[5].numel);
  EXPECT_TRUE(cut.holds_tied_head_copy(global.shape(), 1));
  EXPECT_FALSE(model::PipelineCut::make(global.shape(), 1).holds_tied_head_copy(global.shape(), 0));
}

// A stage's TP cut keeps the model's unit numbers (empty units stay, so the models index units as for
// the whole model); the last stage's tied copy is the vocabulary shard the first stage holds.
TEST(ShardMap, PartTablesOfStagesCutForTensorParallelism) {
  const model::ParamTable global(model::GptShape::make(4, 2, 16, 100, 8));
  const model::PipelineCut cut = model::PipelineCut::make(global.shape(), 2);
  const model::ParamTable first = part_table(global, cut, 0, 2), last = part_table(global, cut, 1, 2);
  ASSERT_EQ(first.n_units(), 6);
  ASSERT_EQ(last.n_units(), 6);
  EXPECT_EQ(first.units()[3].numel, 0u);
  EXPECT_EQ(first.units()[5].numel, 0u);
  EXPECT_EQ(last.units()[1].numel, 0u);
  const model::ParamInfo& copy = last.params()[last.first_param(0)];
  EXPECT_EQ(copy.name, "transformer.wte.weight");
  EXPECT_EQ(copy.shape, first.find("transformer.wte.weight").shape);  // [Vp/2 + 1, C]: rank r's rows and the zero row
  EXPECT_EQ(copy.shape[0], global.shape().padded_vocab / 2 + 1);
  EXPECT_EQ(last.units()[0].numel, copy.numel);
}

TEST(ShardMap, SavedRunsOfEveryRankTileTheGlobalModelOnce) {
  const model::GptShape shapes[] = {model::GptShape::make(6, 4, 16, 100, 8),
                                    model::GptShape::make_llama(6, 8, 32, 100, 8, 4, 48, false, 1e-5, {}),
                                    model::GptShape::make_llama(6, 8, 32, 100, 8, 4, 48, true, 1e-5, {})};
  struct Degrees {
    int pp, dp, tp, vpp;
  };
  for (const model::GptShape& shape : shapes) {
    const model::ParamTable global(shape);
    std::vector<float> values(global.numel());
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i + 1);
    const ReadGlobal read = [&](std::int64_t o, std::int64_t n, float* out) { std::copy_n(values.data() + o, n, out); };
    for (const Degrees d : {Degrees{1, 1, 1, 1}, {2, 1, 1, 1}, {3, 2, 1, 1}, {4, 3, 1, 1}, {2, 2, 1, 3}, {3, 1, 1, 2},
                            {1, 1, 2, 1}, {1, 3, 2, 1}, {1, 2, 4, 1}, {2, 1, 2, 1}, {2, 2, 2, 1}, {3, 1, 4, 1},
                            {2, 1, 2, 3}}) {
      SCOPED_TRACE(cat("pp=", d.pp, " x dp=", d.dp, " x tp=", d.tp, " vpp=", d.vpp));
      std::vector<int> covered(global.numel(), 0);
      const model::PipelineCut cut = model::PipelineCut::make(shape, d.pp, d.vpp);
      const int world = d.pp * d.dp * d.tp;
      for (int rank = 0; rank < world; ++rank) {
        const dist::Grid grid = dist::Grid::make(world, d.tp, rank, d.pp);
        const model::ParamTable local = part_table(global, cut, grid.pp_rank(), d.tp);
        const ShardMap map{global, local, grid, cut};
        std::vector<float> mine(local.numel());
        map.read_local(0, static_cast<std::int64_t>(mine.size()), mine.data(), read);
        const std::vector<float> want = model::tp_cut_flat(global, local, values.data(), d.tp, grid.tp_rank());
        ASSERT_EQ(mine, want) << "rank " << rank;  // every parameter, the tied copy too, holds its global values
        for (const model::TpRun& run : map.saved_runs())
          for (std::int64_t k = 0; k < run.numel; ++k) {
            ++covered[static_cast<std::size_t>(run.global_offset + k)];
            ASSERT_EQ(mine[static_cast<std::size_t>(run.local_offset + k)], values[static_cast<std::size_t>(run.global_offset + k)]);
          }
      }
      for (std::size_t i = 0; i < covered.size(); ++i) ASSERT_EQ(covered[i], 1) << "global element " << i;
    }
  }
}

}  // namespace
}  // namespace zt::train
