// The blend of corpora: its spec (data.train's weighted form) and the greedy index behind its order.
#include "data/blend.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/error.hpp"

namespace zt::data {
namespace {
constexpr char kBlendExample[] = "0.7:web/train_*.h5,0.3:code/train_*.h5";

// "0.7:web/*.h5" -> weight and glob; false when the entry does not start with a number and a colon.
bool split_weighted(const std::string& entry, double& weight, std::string& glob) {
  const std::size_t colon = entry.find(':');
  if (colon == std::string::npos || colon == 0) return false;
  const std::string number = entry.substr(0, colon);
  char* end = nullptr;
  errno = 0;
  weight = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size()) return false;  // "C:" or "dir:x/*.h5": a path, no weight
  glob = entry.substr(colon + 1);
  return true;
}
}  // namespace

std::vector<CorpusSpec> parse_blend(const std::string& value, const std::string& key) {
  std::vector<std::string> entries;
  std::stringstream list(value);
  for (std::string e; std::getline(list, e, ',');)
    if (!e.empty()) entries.push_back(e);
  std::vector<CorpusSpec> out;
  std::string unweighted;
  for (const std::string& e : entries) {
    CorpusSpec c;
    if (!split_weighted(e, c.weight, c.glob)) {
      unweighted = e;
      continue;
    }
    if (!std::isfinite(c.weight) || c.weight <= 0)
      throw InputError(cat(key, ": the weight in '", e, "' must be a number > 0 (leave a corpus of weight 0 out): e.g. ",
                           key, "=", kBlendExample));
    if (c.glob.empty())
      throw InputError(cat(key, ": '", e, "' has a weight but no glob: write WEIGHT:GLOB, e.g. ", key, "=", kBlendExample));
    out.push_back(c);
  }
  if (out.empty()) return {CorpusSpec{value, 1}};  // one corpus, as before: its globs concatenated
  if (!unweighted.empty())
    throw InputError(cat(key, ": '", unweighted, "' has no weight while other entries have one: a blend gives every "
                         "corpus as WEIGHT:GLOB (one glob each), e.g. ", key, "=", kBlendExample));
  double sum = 0;
  for (const CorpusSpec& c : out) sum += c.weight;
  for (CorpusSpec& c : out) c.weight /= sum;
  return out;
}

std::string describe_blend(const std::vector<CorpusSpec>& corpora) {
  if (corpora.size() == 1) return corpora.front().glob;
  std::string out;
  for (const CorpusSpec& c : corpora) out += cat(out.empty() ? "" : ",", c.weight, ":", c.glob);
  return out;
}

std::vector<std::int64_t> quantize_weights(const std::vector<double>& weights) {
  ZT_CHECK(!weights.empty());
  double sum = 0;
  for (const double w : weights) sum += w;
  std::vector<std::int64_t> out;
  for (const double w : weights) out.push_back(std::max<std::int64_t>(1, std::llround(w / sum * double(1 << 30))));
  return out;
}

BlendIndex::BlendIndex(const std::vector<double>& weights) : weights_(quantize_weights(weights)) {
  for (const std::int64_t w : weights_) total_ += w;
  current_.counts.assign(weights_.size(), 0);
  current_.lag = weights_;
  snapshots_.push_back(current_);
}

std::size_t BlendIndex::pick() const {
  std::size_t best = 0;
  for (std::size_t d = 1; d < weights_.size(); ++d)
    if (current_.lag[d] > current_.lag[best]) best = d;
  return best;
}

void BlendIndex::seek(std::uint64_t i) const {
  // Go on from where we are when that is closer than the last snapshot at or before i.
  const std::size_t snap = static_cast<std::size_t>(std::min<std::uint64_t>(i / kSnapshotEvery, snapshots_.size() - 1));
  if (current_.position > i || snapshots_[snap].position > current_.position) current_ = snapshots_[snap];
  const std::size_t n = weights_.size();
  while (current_.position < i) {
    const std::size_t d = pick();
    ++current_.counts[d];
    for (std::size_t e = 0; e < n; ++e) current_.lag[e] += weights_[e];
    current_.lag[d] -= total_;
    ++current_.position;
    if (current_.position % kSnapshotEvery == 0 && current_.position / kSnapshotEvery == snapshots_.size())
      snapshots_.push_back(current_);
  }
}

BlendIndex::Position BlendIndex::locate(std::uint64_t i) const {
  if (weights_.size() == 1) return {0, i};
  seek(i);
  const std::size_t d = pick();
  return {d, current_.counts[d]};
}

std::vector<std::uint64_t> BlendIndex::counts_before(std::uint64_t i) const {
  if (weights_.size() == 1) return {i};
  seek(i);
  return current_.counts;
}

BlendedOrder::BlendedOrder(WindowOrder single) : orders_{single}, index_({1.0}) {}

BlendedOrder::BlendedOrder(std::vector<WindowOrder> orders, const std::vector<double>& weights, std::uint64_t start)
    : orders_(std::move(orders)), index_(weights), start_(start) {
  ZT_CHECK_EQ(orders_.size(), weights.size());
  for (const WindowOrder& o : orders_) ZT_CHECK_EQ(o.seq_len(), orders_.front().seq_len());
}

BlendedOrder::Window BlendedOrder::window(std::uint64_t g) const {
  ZT_CHECK_GE(g, start_, "a window before the blend began");
  const BlendIndex::Position p = index_.locate(g - start_);
  return {p.corpus, orders_[p.corpus].window_start(p.index)};
}

std::vector<std::uint64_t> BlendedOrder::consumed(std::uint64_t g) const {
  return index_.counts_before(g < start_ ? 0 : g - start_);
}

std::uint64_t corpus_seed(std::uint64_t seed, std::size_t c) {
  return seed + 0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(c);  // c = 0: the seed itself
}

}  // namespace zt::data
