// data.train as a weighted blend: the trainer's view of it and the resume rule for a changed mix.
#include "train/train_blend.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "train/data_check.hpp"

namespace zt::train {

TrainBlend open_train_blend(const config::Config& c, std::uint64_t start) {
  TrainBlend b;
  b.corpora = data::open_corpora(c.data.train, "data.train", expected_shards(c));
  for (const data::Corpus& corpus : b.corpora) b.sources.push_back(corpus.shards);
  b.begin_order_at(c, start);
  return b;
}

void TrainBlend::begin_order_at(const config::Config& c, std::uint64_t start) {
  std::vector<data::WindowOrder> orders;
  std::vector<double> weights;
  for (std::size_t i = 0; i < corpora.size(); ++i) {
    const auto& shards = corpora[i].shards;
    orders.emplace_back(shards->n_tokens(), c.model.seq_len, c.data.shuffle, data::corpus_seed(c.train.seed, i),
                        shards->packed_window() != 0);
    weights.push_back(corpora[i].spec.weight);
  }
  order = std::make_unique<data::BlendedOrder>(std::move(orders), weights, start);
}

std::string TrainBlend::describe() const {
  if (corpora.size() == 1) return cat(sources.front()->describe(), ", ", order->order(0).windows_per_epoch(), " windows per epoch");
  std::string out = cat("a blend of ", corpora.size(), " corpora (data.train)");
  for (std::size_t i = 0; i < corpora.size(); ++i)
    out += cat(i == 0 ? ": " : "; ", "weight ", corpora[i].spec.weight, " ", corpora[i].spec.glob, " = ",
               sources[i]->describe(), ", ", order->order(i).windows_per_epoch(), " windows per epoch");
  return out;
}

std::uint64_t TrainBlend::windows_per_epoch() const {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < corpora.size(); ++i) n += order->order(i).windows_per_epoch();
  return n;
}

namespace {
// Corpus `corpus`'s record at `consumed` windows.
ckpt::CorpusCursor record_of(const data::Corpus& corpus, std::int64_t seq_len, std::uint64_t consumed) {
  const data::ShardSetPrint print = corpus.shards->fingerprint();
  const std::uint64_t windows =
      data::WindowOrder::windows_in(corpus.shards->n_tokens(), seq_len, corpus.shards->packed_window() != 0);
  return {corpus.spec.glob, corpus.spec.weight, windows, consumed, print.shards, print.tokens, print.sha256};
}
}  // namespace

std::vector<ckpt::CorpusCursor> TrainBlend::cursor(std::uint64_t cursor) const {
  const std::vector<std::uint64_t> consumed = order->consumed(cursor);
  std::vector<ckpt::CorpusCursor> out;
  for (std::size_t i = 0; i < corpora.size(); ++i)
    out.push_back(record_of(corpora[i], order->order(i).seq_len(), consumed[i]));
  return out;
}

std::vector<ckpt::CorpusCursor> corpus_records(const config::Config& c) {
  std::vector<ckpt::CorpusCursor> out;
  for (const data::Corpus& corpus : data::open_corpora(c.data.train, "data.train", expected_shards(c)))
    out.push_back(record_of(corpus, c.model.seq_len, 0));
  return out;
}

namespace {
std::string describe_record(const std::vector<ckpt::CorpusCursor>& blend) {
  std::vector<data::CorpusSpec> specs;
  for (const ckpt::CorpusCursor& c : blend) specs.push_back({c.glob, c.weight});
  return data::describe_blend(specs);
}
}  // namespace

namespace {
// "corpus 2 of data.train (GLOB)", or "data.train (GLOB)" for one corpus.
std::string corpus_name(std::size_t i, std::size_t n, const std::string& glob) {
  return cat(n > 1 ? cat("corpus ", i + 1, " of ") : "", "data.train (", glob, ")");
}

// What changed in corpus i's shards since the checkpoint ("" if nothing): by the recorded fingerprint,
// else (checkpoints before it) by windows per epoch at the same model.seq_len; nothing to compare: "".
std::string shards_changed(const ckpt::CorpusCursor& then, const ckpt::CorpusCursor& now, bool same_seq_len) {
  if (!then.shards_sha256.empty()) {
    if (then.shards_sha256 == now.shards_sha256) return "";
    return cat("read ", then.shards, " shard(s) of ", then.tokens, " tokens; this run's glob matches ", now.shards,
               " shard(s) of ", now.tokens, " tokens (", then.shards == now.shards && then.tokens == now.tokens
                                                              ? "the same counts, but a shard renamed or rewritten"
                                                              : "a shard added, removed or rewritten", ")");
  }
  if (!same_seq_len || then.windows_per_epoch == 0 || then.windows_per_epoch == now.windows_per_epoch) return "";
  return cat("had ", then.windows_per_epoch, " windows per epoch; this run's shards give ", now.windows_per_epoch,
             " (a shard added, removed or rewritten)");
}
}  // namespace

std::uint64_t blend_start_on_resume(const ckpt::TrainState& s, const config::Config& c, const std::filesystem::path& dir,
                                    const std::vector<ckpt::CorpusCursor>& now) {
  const std::vector<data::CorpusSpec> mine = data::parse_blend(c.data.train, "data.train");
  // A checkpoint from before blends read one corpus from window 0, whose windows per epoch it recorded.
  const std::vector<ckpt::CorpusCursor> theirs =
      s.blend.empty() ? std::vector<ckpt::CorpusCursor>{{c.data.train, 1, s.windows_per_epoch, 0}} : s.blend;
  std::vector<double> w_mine, w_theirs;
  for (const data::CorpusSpec& m : mine) w_mine.push_back(m.weight);
  for (const ckpt::CorpusCursor& t : theirs) w_theirs.push_back(t.weight);
  const std::uint64_t cursor = s.windows_consumed;
  if (data::quantize_weights(w_mine) != data::quantize_weights(w_theirs)) {
    if (c.data.reset_order) return cursor;
    throw InputError(cat("checkpoint ", dir.string(), " was trained on data.train=", describe_record(theirs),
                         "; this run has data.train=", data::describe_blend(mine), " (other corpora or weights): set "
                         "data.reset_order=true to start the new mix's order at step ", s.step, " (window ", cursor,
                         "), or resume with the checkpoint's data.train (ckpt.resume=none starts afresh)"));
  }
  const bool same_seq_len = s.seq_len == 0 || s.seq_len == static_cast<std::uint64_t>(c.model.seq_len);
  for (std::size_t i = 0; i < mine.size() && i < now.size(); ++i) {
    const std::string changed = shards_changed(theirs[i], now[i], same_seq_len);
    if (changed.empty()) {
      if (theirs[i].shards_sha256.empty() && !s.blend.empty() && mine[i].glob != theirs[i].glob)
        log::warn(cat("checkpoint ", dir.string(), " read corpus ", i + 1, " of data.train from ", theirs[i].glob,
                      "; this run reads ", mine[i].glob, ": the order goes on by window counts, the same only if the data is"));
      continue;
    }
    if (c.data.reset_order) return cursor;
    throw InputError(cat("checkpoint ", dir.string(), " ", changed, " in ", corpus_name(i, mine.size(), mine[i].glob),
                         ": the window order depends on the shards, so this run would not go on where that one stopped. "
                         "Restore the checkpoint's shards, or set data.reset_order=true to start an order over these "
                         "shards at step ", s.step, " (window ", cursor, "); ckpt.resume=none starts afresh"));
  }
  return s.blend_start;
}

}  // namespace zt::train
