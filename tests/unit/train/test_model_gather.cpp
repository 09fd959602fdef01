// UnitGather: model.h5's values in flat order from a source of units, one held at a time.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "core/error.hpp"
#include "train/model_gather.hpp"

namespace zt::train {
namespace {

// Units of the given sizes over a flat buffer whose element i holds i; counts the fetches.
class CountingSource : public UnitSource {
 public:
  explicit CountingSource(std::vector<std::int64_t> sizes) {
    std::int64_t at = 0;
    for (std::int64_t n : sizes) units_.push_back({at, n}), at += n;
  }
  int n_units() const override { return static_cast<int>(units_.size()); }
  FlatRange unit(int u) const override { return units_.at(static_cast<std::size_t>(u)); }
  void fetch(int u, float* out) override {
    fetched.push_back(u);
    if (out) std::iota(out, out + units_[u].numel, static_cast<float>(units_[u].offset));
    else ++joined_only;
  }
  std::vector<int> fetched;
  int joined_only = 0;

 private:
  std::vector<FlatRange> units_;
};

TEST(UnitGather, ServesRangesInOrderAndAssemblesOneThatSpansUnits) {
  CountingSource source({4, 3, 5});
  UnitGather gather(source, true);
  const float* a = gather.view(1, 2);
  EXPECT_EQ(a[0], 1.f);
  EXPECT_EQ(a[1], 2.f);
  const float* b = gather.view(3, 6);  // units 0, 1 and 2
  for (int i = 0; i < 6; ++i) EXPECT_EQ(b[i], static_cast<float>(3 + i));
  gather.finish();
  EXPECT_EQ(source.fetched, (std::vector<int>{0, 1, 2}));  // each unit once
}

TEST(UnitGather, AJoiningRankFetchesTheSameUnitsAndFinishJoinsTheRest) {
  CountingSource writer({4, 3, 5}), joiner({4, 3, 5});
  UnitGather w(writer, true), j(joiner, false);
  w.view(0, 2), j.view(0, 2);
  EXPECT_EQ(j.view(5, 1), nullptr);
  w.view(5, 1);
  EXPECT_EQ(writer.fetched, joiner.fetched);
  w.finish(), j.finish();
  EXPECT_EQ(writer.fetched, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(joiner.fetched, writer.fetched);
  EXPECT_EQ(joiner.joined_only, 3);
}

TEST(UnitGather, RefusesARangeBeforeTheUnitItHolds) {
  CountingSource source({4, 3});
  UnitGather gather(source, true);
  gather.view(5, 1);
  EXPECT_THROW(gather.view(1, 1), Error);  // unit 0's values are gone
}

}  // namespace
}  // namespace zt::train
