// The checkpoint contract under parallel.tp (train/tp_shards.hpp): over a whole grid, the ranks' saved
// runs tile the global flat buffer exactly once (what a tp=1 run's ranges do, so zckpt verify and any
// later grid accept it), and each run's local elements hold the global values it names.
#include <gtest/gtest.h>

#include <vector>

#include "model/param_table.hpp"
#include "model/tp_split.hpp"
#include "train/tp_shards.hpp"

namespace zt::train {
namespace {

TEST(TpShards, SavedRunsOfEveryRankTileTheGlobalModelOnce) {
  const model::GptShape shapes[] = {model::GptShape::make(2, 4, 16, 100, 8),
                                    model::GptShape::make_llama(2, 8, 32, 100, 8, 4, 48, false, 1e-5, {})};
  for (const model::GptShape& shape : shapes) {
    const model::ParamTable global(shape);
    std::vector<float> values(global.numel());
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i + 1);
    for (const auto& [tp, dp] : {std::pair{1, 1}, {2, 1}, {2, 3}, {4, 2}}) {
      const model::ParamTable local = model::tp_local_table(global, tp);
      std::vector<int> covered(global.numel(), 0);
      for (int rank = 0; rank < tp * dp; ++rank) {
        const TpShards shards{global, local, dist::Grid::make(tp * dp, tp, rank)};
        const std::vector<float> shard = model::tp_cut_flat(global, local, values.data(), tp, shards.grid.tp_rank());
        for (const model::TpRun& run : shards.saved_runs())
          for (std::int64_t k = 0; k < run.numel; ++k) {
            ++covered[run.global_offset + k];
            ASSERT_EQ(shard[run.local_offset + k], values[run.global_offset + k]) << "tp=" << tp << " rank " << rank;
          }
      }
      for (std::size_t i = 0; i < covered.size(); ++i)
        ASSERT_EQ(covered[i], 1) << "global element " << i << " at tp=" << tp << " x dp=" << dp;
    }
  }
}

}  // namespace
}  // namespace zt::train
