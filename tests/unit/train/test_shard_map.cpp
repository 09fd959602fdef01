// Pipeline stages' cut of the model (model/stage_split.hpp) and the checkpoint contract of a rank's part
// of the model (train/shard_map.hpp): the block split and its log line; a stage's table keeps the
// model's unit numbers with its own parameters only (the last stage of a tied model a copy of the token
// embedding), and so does its TP cut; over every grid of pp x dp x tp ranks the saved runs tile the
// global flat buffer exactly once, and read_local gives each rank (the tied copy too: the same
// vocabulary shard as the first stage's) the global values of its parameters; the same for a LoRA
// run's adapter table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <tuple>
#include <vector>

#include "model/lora.hpp"
#include "model/param_table.hpp"
#include "model/stage_split.hpp"
#include "train/shard_map.hpp"

namespace zt::train {
namespace {

const model::GptShape kGpt6 = model::GptShape::make(6, 4, 16, 100, 8);

TEST(StageSplit, BlocksAndTheLogLine) {
  // The head costs 0.6 blocks here, the embedding little: two stages take 2 blocks, and the first is
  // not one of them (its embedding would make it the largest).
  const model::PipelineCut cut = model::PipelineCut::make(kGpt6, 4);  // 1, 2, 2, 1
  const std::vector<model::Stage>& s = cut.virtual_stages;
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].first_block, 0);
  EXPECT_EQ(s[1].first_block, 1);
  EXPECT_EQ(s[3].first_block, 5);
  EXPECT_EQ(s[3].end(6), 6);
  EXPECT_EQ(cut.describe(kGpt6),
            "stage 0: embedding + block 0; stage 1: blocks 1-2; stage 2: blocks 3-4; stage 3: block 5 + head (tied copy) and loss");
  const model::GptShape two = model::GptShape::make(2, 4, 16, 100, 8);
  EXPECT_EQ(model::PipelineCut::make(two, 1).describe(two), "stage 0: embedding + blocks 0-1 + head and loss");
  EXPECT_THROW(model::PipelineCut::make(two, 3), ConfigError);
  EXPECT_THROW(model::PipelineCut::make(kGpt6, 2, 4), ConfigError);
}

// Blocks per stage of a cut.
std::vector<int> block_counts(const std::vector<model::Stage>& stages, int n_layer) {
  std::vector<int> out;
  for (const model::Stage& s : stages) out.push_back(s.end(n_layer) - s.first_block);
  return out;
}

const model::GptShape kGpt2Small = model::GptShape::make(12, 12, 768, 50257, 1024);
const model::GptShape kLlama8B = model::GptShape::make_llama(32, 32, 4096, 128256, 8192, 8, 14336, false, 1e-5, {});

// The cut split_blocks promises, by the dynamic program over every cut it replaced (O(stages x L^2)):
// the least largest stage cost, then the least sum of squares under it, then the fewest blocks on the
// last stage, the one before it, and so on.
std::vector<int> cut_by_dynamic_program(const model::GptShape& shape, int stages) {
  const int n_layer = shape.n_layer;
  const model::TokenFlops f = model::token_flops(shape);
  auto cost = [&](int s, int blocks) {
    return blocks * f.block + (s == 0 ? f.embedding : 0) + (s == stages - 1 ? f.head : 0);
  };
  auto below = [](double a, double b) { return std::isinf(b) ? a < b : a < b - 1e-12 * std::abs(b); };
  const double inf = std::numeric_limits<double>::infinity();
  using Table = std::vector<std::vector<double>>;
  Table most(static_cast<std::size_t>(stages + 1), std::vector<double>(static_cast<std::size_t>(n_layer + 1), inf));
  most[0][0] = 0;
  for (int s = 1; s <= stages; ++s)
    for (int j = s; j <= n_layer; ++j)
      for (int k = 1; k <= j - (s - 1); ++k) most[s][j] = std::min(most[s][j], std::max(most[s - 1][j - k], cost(s - 1, k)));
  const double bound = most[stages][n_layer];
  Table squares(most.size(), std::vector<double>(most[0].size(), inf));
  std::vector<std::vector<int>> take(most.size(), std::vector<int>(most[0].size(), 0));
  squares[0][0] = 0;
  for (int s = 1; s <= stages; ++s)
    for (int j = s; j <= n_layer; ++j)
      for (int k = 1; k <= j - (s - 1) && !below(bound, cost(s - 1, k)); ++k) {
        const double q = squares[s - 1][j - k] + cost(s - 1, k) * cost(s - 1, k);
        if (squares[s - 1][j - k] < inf && below(q, squares[s][j])) squares[s][j] = q, take[s][j] = k;
      }
  std::vector<int> blocks(static_cast<std::size_t>(stages));
  for (int s = stages, j = n_layer; s >= 1; j -= blocks[static_cast<std::size_t>(s - 1)], --s)
    blocks[static_cast<std::size_t>(s - 1)] = take[s][j];
  return blocks;
}

TEST(StageSplit, EqualsTheDynamicProgramOverEveryCut) {
  int cases = 0;
  for (const int vocab : {97, 5000, 50257})
    for (const int width : {32, 256})
      for (const bool llama : {false, true})
        for (int n_layer = 1; n_layer <= 24; ++n_layer) {
          const model::GptShape shape = llama ? model::GptShape::make_llama(n_layer, 4, width, vocab, 64, 2, 3 * width,
                                                                            false, 1e-5, {})
                                              : model::GptShape::make(n_layer, 4, width, vocab, 64);
          for (int stages = 1; stages <= n_layer; ++stages, ++cases)
            ASSERT_EQ(block_counts(model::split_blocks(shape, stages), n_layer), cut_by_dynamic_program(shape, stages))
                << "L " << n_layer << " stages " << stages << " vocab " << vocab << " width " << width << " llama " << llama;
        }
  EXPECT_EQ(cases, 3 * 2 * 2 * 300);
}

TEST(StageSplit, BalancedByCost) {
  // GPT-2 124M: the head's 6 C Vp is ~4.5 blocks, so the last stage takes fewer blocks.
  const model::TokenFlops gpt2 = model::token_flops(kGpt2Small);
  EXPECT_NEAR(gpt2.head / gpt2.block, 4.47, 0.01);
  EXPECT_EQ(block_counts(model::split_blocks(kGpt2Small, 2), 12), (std::vector<int>{8, 4}));
  // pp=4: the last stage (1 block + head, 5.5 blocks' cost) paces the rest; of the cuts within it the
  // most even, the embedding on a 3-block stage.
  EXPECT_EQ(block_counts(model::split_blocks(kGpt2Small, 4), 12), (std::vector<int>{3, 4, 4, 1}));
  // Llama 3 8B at T 8192 (GQA, SwiGLU, untied): the head is ~1.8 blocks.
  const model::TokenFlops llama = model::token_flops(kLlama8B);
  EXPECT_NEAR(llama.head / llama.block, 1.84, 0.01);
  EXPECT_EQ(block_counts(model::split_blocks(kLlama8B, 2), 32), (std::vector<int>{17, 15}));
  EXPECT_EQ(block_counts(model::split_blocks(kLlama8B, 4), 32), (std::vector<int>{8, 9, 8, 7}));
  // A tiny vocabulary (head 0.3 blocks) keeps an even cut; where one stage must take a block more, the
  // embedding keeps it off the first stage when it can.
  const model::GptShape tiny = model::GptShape::make(7, 2, 32, 97, 16);
  EXPECT_EQ(block_counts(model::split_blocks(tiny, 2), 7), (std::vector<int>{4, 3}));
  EXPECT_EQ(block_counts(model::split_blocks(tiny, 3), 7), (std::vector<int>{2, 3, 2}));
  const model::GptShape tiny8 = model::GptShape::make(8, 2, 32, 97, 16);
  EXPECT_EQ(block_counts(model::split_blocks(tiny8, 2), 8), (std::vector<int>{4, 4}));
  EXPECT_EQ(block_counts(model::split_blocks(tiny8, 4), 8), (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(block_counts(model::split_blocks(tiny, 7), 7), std::vector<int>(7, 1));
  // Interleaved pp 2 x vpp 2 starts from pp 4's cut (3,4,4,1: rank 1 would hold 5 blocks and the head,
  // rank 0 7 blocks) and moves a block to rank 0's first chunk: 4,3,4,1 (8 blocks; 4 and the head).
  const model::PipelineCut cut = model::PipelineCut::make(kGpt2Small, 2, 2);
  EXPECT_EQ(cut.describe(kGpt2Small), "rank 0: embedding + blocks 0-3, blocks 7-10; rank 1: blocks 4-6, block 11 + head "
                                      "(tied copy) and loss");
  EXPECT_EQ(cut.busiest_rank(kGpt2Small), 1);
  EXPECT_DOUBLE_EQ(cut.rank_flops(kGpt2Small, 1), 4 * gpt2.block + gpt2.head);
  EXPECT_DOUBLE_EQ(cut.rank_flops(kGpt2Small, 0), 8 * gpt2.block + gpt2.embedding);
}

TEST(StageSplit, GivenBlockCountsOverrideTheCost) {  // parallel.pp_layers
  const model::PipelineCut cut = model::PipelineCut::make(kGpt2Small, 2, 1, {6, 6});
  EXPECT_EQ(block_counts(cut.virtual_stages, 12), (std::vector<int>{6, 6}));
  const model::PipelineCut interleaved = model::PipelineCut::make(kGpt2Small, 2, 2, {2, 4, 4, 2});
  EXPECT_EQ(interleaved.describe(kGpt2Small), "rank 0: embedding + blocks 0-1, blocks 6-9; rank 1: blocks 2-5, blocks "
                                              "10-11 + head (tied copy) and loss");
}

TEST(StageSplit, NoCutHasASmallerLargestStage) {
  // Every composition of 9 blocks into 2-4 stages, against the split's largest stage cost.
  const model::GptShape shape = model::GptShape::make(9, 2, 32, 2000, 16);  // head ~5 blocks
  for (int stages = 2; stages <= 4; ++stages) {
    const std::vector<model::Stage> cut = model::split_blocks(shape, stages);
    auto largest = [&](const std::vector<int>& blocks) {
      double most = 0;
      for (int s = 0, first = 0; s < stages; first += blocks[static_cast<std::size_t>(s)], ++s)
        most = std::max(most, model::stage_flops(shape, {first, first + blocks[static_cast<std::size_t>(s)]}));
      return most;
    };
    const double mine = largest(block_counts(cut, 9));
    std::vector<int> blocks(static_cast<std::size_t>(stages), 1);
    std::function<void(int, int)> each = [&](int s, int left) {  // blocks[s..] share `left` blocks
      if (s == stages - 1) {
        blocks[static_cast<std::size_t>(s)] = left;
        EXPECT_LE(mine, largest(blocks) * (1 + 1e-12)) << stages << " stages";
        return;
      }
      for (int k = 1; k <= left - (stages - 1 - s); ++k) blocks[static_cast<std::size_t>(s)] = k, each(s + 1, left - k);
    };
    each(0, 9);
    EXPECT_EQ(cut.back().end(9), 9);
  }
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
  const model::ParamTable first = model::part_table(global, cut, 0, 2), last = model::part_table(global, cut, 1, 2);
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
                                    model::GptShape::make_llama(6, 8, 32, 100, 8, 4, 48, true, 1e-5, {}),
                                    model::GptShape::make(6, 6, 24, 100, 8),
                                    model::GptShape::make_llama(6, 6, 24, 100, 8, 3, 48, false, 1e-5, {})};
  struct Degrees {
    int pp, dp, tp, vpp;
  };
  for (const model::GptShape& shape : shapes) {
    const model::ParamTable global(shape);
    std::vector<float> values(global.numel());
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i + 1);
    const ReadGlobal read = [&](std::int64_t o, std::int64_t n, float* out) { std::copy_n(values.data() + o, n, out); };
    const bool six_heads = shape.n_head % 3 == 0;  // tp = 3: the vocabulary's last shard padded
    for (const Degrees d : {Degrees{1, 1, 1, 1}, {2, 1, 1, 1}, {3, 2, 1, 1}, {4, 3, 1, 1}, {2, 2, 1, 3}, {3, 1, 1, 2},
                            {1, 1, 2, 1}, {1, 3, 2, 1}, {1, 2, 4, 1}, {2, 1, 2, 1}, {2, 2, 2, 1}, {3, 1, 4, 1},
                            {2, 1, 2, 3}, {1, 1, 3, 1}, {2, 2, 3, 1}, {2, 1, 3, 2}}) {
      if ((d.tp == 3) != six_heads && d.tp != 1) continue;
      SCOPED_TRACE(cat("pp=", d.pp, " x dp=", d.dp, " x tp=", d.tp, " vpp=", d.vpp));
      std::vector<int> covered(global.numel(), 0);
      const model::PipelineCut cut = model::PipelineCut::make(shape, d.pp, d.vpp);
      const int world = d.pp * d.dp * d.tp;
      for (int rank = 0; rank < world; ++rank) {
        const dist::Grid grid = dist::Grid::make(world, d.tp, rank, d.pp);
        const model::ParamTable local = model::part_table(global, cut, grid.pp_rank(), d.tp);
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

// A LoRA run's adapters under a pipeline (adapters = true): each rank holds the adapters of its blocks,
// unit l = block l kept (the tied head's copy is the model's, not theirs), and the ranks' saved runs tile
// the whole adapter table once.
TEST(ShardMap, AdapterPartsOfEveryPipelineRankTileTheAdaptersOnce) {
  const model::GptShape shape = model::GptShape::make(6, 4, 16, 100, 8);
  const model::ParamTable adapters = model::lora_table(shape, {4, 8, false, {"c_attn", "c_proj"}});
  std::vector<float> values(adapters.numel());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i + 1);
  const ReadGlobal read = [&](std::int64_t o, std::int64_t n, float* out) { std::copy_n(values.data() + o, n, out); };
  for (const auto& [pp, dp, vpp] : {std::tuple{2, 1, 1}, {3, 2, 1}, {2, 2, 3}, {3, 1, 2}}) {
    SCOPED_TRACE(cat("pp=", pp, " x dp=", dp, " vpp=", vpp));
    const model::PipelineCut cut = model::PipelineCut::make(shape, pp, vpp);
    std::vector<int> covered(adapters.numel(), 0);
    for (int rank = 0; rank < pp * dp; ++rank) {
      const dist::Grid grid = dist::Grid::make(pp * dp, 1, rank, pp);
      const model::ParamTable local = model::adapter_part_table(adapters, cut, grid.pp_rank(), 1);
      ASSERT_EQ(local.n_units(), shape.n_layer);
      for (const model::Stage& chunk : cut.chunks(grid.pp_rank()))
        for (int b = chunk.first_block; b < chunk.end(shape.n_layer); ++b)
          EXPECT_EQ(local.units()[static_cast<std::size_t>(b)].numel, adapters.units()[static_cast<std::size_t>(b)].numel);
      const ShardMap map{adapters, local, grid, cut, /*adapters=*/true};
      EXPECT_TRUE(map.tied_copy_ranges().empty());
      std::vector<float> mine(local.numel());
      map.read_local(0, static_cast<std::int64_t>(mine.size()), mine.data(), read);
      for (const model::ParamInfo& p : local.params())  // each adapter holds its global values
        ASSERT_EQ(mine[p.offset], values[adapters.find(p.name).offset]) << p.name;
      for (const model::TpRun& run : map.saved_runs())
        for (std::int64_t k = 0; k < run.numel; ++k) ++covered[static_cast<std::size_t>(run.global_offset + k)];
    }
    for (std::size_t i = 0; i < covered.size(); ++i) ASSERT_EQ(covered[i], 1) << "adapter element " << i;
  }
}

}  // namespace
}  // namespace zt::train
