// The prefetching loader delivers exactly the contract's windows, in step order, and turns a reader
// failure in its thread into an exception in the caller.
#include <gtest/gtest.h>

#include <numeric>

#include "core/error.hpp"
#include "data/batch_loader.hpp"

namespace zt::data {
namespace {

std::shared_ptr<const TokenSource> counting_tokens(std::size_t n) {
  std::vector<std::int32_t> t(n);
  std::iota(t.begin(), t.end(), 0);
  return std::make_shared<MemoryTokens>(std::move(t));
}

TEST(BatchLoader, DeliversTheContractWindowsInOrder) {
  auto source = counting_tokens(1000);
  WindowOrder order(1000, 8, /*shuffle=*/false, 0);
  BatchSlice slice{/*global=*/8, /*micro=*/2, /*dp=*/2, /*rank=*/1};
  BatchLoader loader(source, order, slice, /*grad_accum=*/2, /*first_step=*/3);
  for (std::uint64_t step = 3; step < 6; ++step) {
    StepBatch b = loader.next();
    ASSERT_EQ(b.step, step);
    for (std::int64_t m = 0; m < 2; ++m)
      for (std::int64_t j = 0; j < 2; ++j) {
        const std::uint64_t g = step * 8 + 4 + m * 2 + j;  // rank 1 takes windows 4..7 of the step
        const std::int32_t* w = b.window(m, j);
        EXPECT_EQ(static_cast<std::uint64_t>(w[0]), order.window_start(g));
        EXPECT_EQ(w[8], w[0] + 8);
      }
    std::vector<std::int32_t> in, tgt;
    b.split(1, in, tgt);
    EXPECT_EQ(in.size(), 16u);
    EXPECT_EQ(tgt[0], in[0] + 1);
    EXPECT_EQ(tgt[15], in[15] + 1);
  }
}

class FailingSource : public TokenSource {
 public:
  std::uint64_t n_tokens() const override { return 100; }
  void read(std::uint64_t, std::uint64_t, std::int32_t*) const override {
    throw DataError("shard /data/train_000001.h5: truncated");
  }
  std::string describe() const override { return "failing"; }
};

// data.document_mask: each input's segment start is where its document began inside the window (0 when
// before it); a document starting at the window's last token (a target only) changes no input.
TEST(BatchLoader, SegmentStartsFollowTheDocumentsInsideEachWindow) {
  MemoryTokens source(std::vector<std::int32_t>(40), std::vector<std::uint8_t>(40, 1));
  source.set_document_starts({0, 3, 12, 15, 18, 30});
  std::vector<std::int32_t> got(8);
  window_segment_starts(source, 10, 8, got.data());
  EXPECT_EQ(got, (std::vector<std::int32_t>{0, 0, 2, 2, 2, 5, 5, 5}));
  window_segment_starts(source, 0, 8, got.data());
  EXPECT_EQ(got, (std::vector<std::int32_t>{0, 0, 0, 3, 3, 3, 3, 3}));
}

TEST(BatchLoader, ReaderFailureReachesTheCaller) {
  BatchLoader loader(std::make_shared<FailingSource>(), WindowOrder(100, 4, false, 0), BatchSlice{2, 2, 1, 0}, 1, 0);
  try {
    loader.next();
    FAIL() << "no exception";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("train_000001.h5"), std::string::npos);
  }
}

// data.reset_positions: the loader gives each input's position in its document beside the segment
// starts (a document begun before the window counts from the window's first token); off, neither.
TEST(BatchLoader, DocumentPositionsRestartAtEachDocumentInsideItsWindow) {
  auto source = std::make_shared<MemoryTokens>(std::vector<std::int32_t>(80), std::vector<std::uint8_t>(80, 1));
  source->set_document_starts({0, 3, 12, 15, 18, 30, 41});
  WindowOrder order(80, 8, /*shuffle=*/false, 0);
  BatchSlice slice{/*global=*/2, /*micro=*/2, /*dp=*/1, /*rank=*/0};
  BatchLoader loader(source, order, slice, /*grad_accum=*/1, /*first_step=*/0, 1, DocumentViews{true, true});
  const StepBatch b = loader.next();
  ASSERT_NE(b.positions(0), nullptr);
  const std::vector<std::int32_t> got(b.positions(0), b.positions(0) + 16);
  std::vector<std::int32_t> want;
  for (std::int64_t j = 0; j < 2; ++j)
    for (std::int64_t t = 0; t < 8; ++t) want.push_back(static_cast<std::int32_t>(t) - b.segments(0)[j * 8 + t]);
  EXPECT_EQ(got, want);
  EXPECT_EQ(std::vector<std::int32_t>(got.begin(), got.begin() + 8), (std::vector<std::int32_t>{0, 1, 2, 0, 1, 2, 3, 4}));
  BatchLoader plain(source, order, slice, 1, 0, 1, DocumentViews{true, false});
  const StepBatch p = plain.next();
  EXPECT_EQ(p.positions(0), nullptr);
  EXPECT_NE(p.segments(0), nullptr);
}

}  // namespace
}  // namespace zt::data
