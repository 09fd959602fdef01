// Readers by range (model/range_reader.hpp): a reader that finishes some tensors whole gives, for any cut of
// the flat buffer into ranges, what finishing the whole buffer gives, reading and finishing each such
// tensor once; a TP shard's reader gives tp_cut_flat's shard; merging adapters a weight at a time equals
// merge_lora over the whole model.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <set>

#include "model/lora.hpp"
#include "model/param_table.hpp"
#include "model/range_reader.hpp"
#include "model/tp_split.hpp"

namespace zt::model {
namespace {

GptShape small_gpt2() { return GptShape::make(2, 4, 16, 100, 8); }
GptShape small_llama() { return GptShape::make_llama(2, 8, 32, 100, 8, 4, 48, false, 1e-5, {}); }

std::vector<float> counting(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 1000) * 0.5f - 7.f;
  return v;
}

// A finish that depends on the whole tensor (its first value and its length), so a tensor finished from a
// part of it would show.
void subtract_first(std::span<float> v) {
  const float first = v[0];
  for (float& x : v) x = x - first + static_cast<float>(v.size());
}

TEST(RangeReader, WholeTensorsFinishedOnceWhateverTheRanges) {
  for (const ParamTable& table : {ParamTable(small_gpt2()), ParamTable(small_llama())}) {
    const std::vector<float> source = counting(table.numel());
    const auto whole = [&](std::size_t p) { return table.params()[p].shape.size() == 2 && p % 2 == 1; };
    std::vector<float> want = source;
    for (std::size_t p = 0; p < table.params().size(); ++p)
      if (whole(p)) subtract_first({want.data() + table.params()[p].offset, table.params()[p].numel});
    std::mt19937 rng(7);
    for (const std::int64_t most : {std::int64_t{1}, std::int64_t{5}, std::int64_t{64}, std::int64_t{1000}, static_cast<std::int64_t>(table.numel())}) {
      std::multiset<std::size_t> finished;
      const ReadRange read = whole_tensor_reader(
          table, [&](std::int64_t o, std::int64_t n, float* out) { std::copy_n(source.begin() + o, n, out); }, whole,
          [&](std::size_t p, std::span<float> v) {
            finished.insert(p);
            subtract_first(v);
          });
      std::vector<float> got(table.numel(), -1e9f);
      for (std::int64_t at = 0; at < static_cast<std::int64_t>(table.numel());) {
        const std::int64_t n = std::min<std::int64_t>(1 + static_cast<std::int64_t>(rng() % most), table.numel() - at);
        read(at, n, got.data() + at);
        at += n;
      }
      EXPECT_EQ(got, want) << "ranges of at most " << most;
      for (std::size_t p = 0; p < table.params().size(); ++p)
        EXPECT_EQ(finished.count(p), whole(p) ? 1u : 0u) << table.params()[p].name << ", ranges of at most " << most;
    }
    std::size_t largest = 0;
    for (std::size_t p = 0; p < table.params().size(); ++p)
      if (whole(p)) largest = std::max(largest, table.params()[p].numel * sizeof(float));
    EXPECT_EQ(whole_tensor_bytes(table, whole), largest);
  }
}

TEST(RangeReader, TpShardIsTheCutOfTheWholeModel) {
  for (const ParamTable& global : {ParamTable(small_gpt2()), ParamTable(small_llama())}) {
    const std::vector<float> values = counting(global.numel());
    const ReadRange read_global = [&](std::int64_t o, std::int64_t n, float* out) { std::copy_n(values.begin() + o, n, out); };
    for (int tp : {2, 4}) {
      const ParamTable local = tp_local_table(global, tp);
      for (int r = 0; r < tp; ++r) {
        const ReadRange shard = tp_shard_reader(global, local, tp, r, read_global);
        std::vector<float> got(local.numel(), -1e9f);
        for (std::int64_t at = 0; at < static_cast<std::int64_t>(local.numel()); at += 53)
          shard(at, std::min<std::int64_t>(53, local.numel() - at), got.data() + at);
        EXPECT_EQ(got, tp_cut_flat(global, local, values.data(), tp, r)) << "tp=" << tp << " r=" << r;
      }
    }
  }
}

TEST(RangeReader, AdaptersMergedAWeightAtATimeEqualTheWholeMerge) {
  for (const GptShape& shape : {small_gpt2(), small_llama()}) {
    const ParamTable base(shape);
    LoraSpec spec;
    spec.rank = 2;
    for (const LoraModule& m : lora_modules(shape)) spec.targets.push_back(m.name);
    const ParamTable adapters = lora_table(shape, spec);
    std::vector<float> adapter_values(adapters.numel());
    std::mt19937 rng(3);
    std::normal_distribution<float> normal;
    for (float& x : adapter_values) x = normal(rng);
    std::vector<float> want = counting(base.numel());
    merge_lora(base, want.data(), adapters, adapter_values.data(), 0.75);
    const std::vector<std::size_t> pair = lora_pair_of(base, adapters);
    std::vector<float> got = counting(base.numel());
    std::size_t merged = 0;
    for (std::size_t p = 0; p < base.params().size(); ++p)
      if (pair[p] != SIZE_MAX) {
        merge_lora_pair(base, adapters, pair[p], adapter_values.data(), 0.75, {got.data() + base.params()[p].offset, base.params()[p].numel});
        ++merged;
      }
    EXPECT_EQ(merged, adapters.params().size() / 2);
    EXPECT_EQ(got, want);
  }
}

}  // namespace
}  // namespace zt::model
