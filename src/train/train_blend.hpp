// The trainer's training data as a blend of corpora (data/blend.hpp): opening data.train's corpora with
// their window orders, the start-up line, what a checkpoint records of the blend, and whether a
// checkpoint's blend may go on under this run's data.train (data.reset_order).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/state.hpp"
#include "config/config.hpp"
#include "data/blend.hpp"
#include "data/shard_set.hpp"

namespace zt::train {

struct TrainBlend {
  std::vector<data::Corpus> corpora;
  std::vector<std::shared_ptr<const data::TokenSource>> sources;  // corpora's shards, in order
  std::unique_ptr<data::BlendedOrder> order;  // the trainer's own copy (the loader has another)

  // One corpus: "data: <shards>, N windows per epoch" as before blends; a blend names each corpus.
  std::string describe() const;
  // Windows of one pass over every corpus (one corpus: its windows per epoch).
  std::uint64_t windows_per_epoch() const;
  // The corpora, their shards and their windows consumed at global window `cursor` (the checkpoint's record).
  std::vector<ckpt::CorpusCursor> cursor(std::uint64_t cursor) const;
  // The blend's order from global window `start` on (the corpora stay open).
  void begin_order_at(const config::Config& c, std::uint64_t start);
};

// Opens data.train with the run's shard expectation; the blend's order begins at global window `start`.
TrainBlend open_train_blend(const config::Config& c, std::uint64_t start);

// data.train's corpora as a resume compares them with a checkpoint's (TrainBlend::cursor without the
// cursor), opened without building their orders: a corpus shorter than one window (0 windows) is
// check_data's to report (exit 2), not a DataError here.
std::vector<ckpt::CorpusCursor> corpus_records(const config::Config& c);

// The window at which this run's blend order begins when resuming from checkpoint `dir` with state s, given
// this run's corpora `now` (TrainBlend::cursor): the checkpoint's own when the blend's weights and every
// corpus's shards agree (a changed glob matching the same shards is fine); its cursor when either differs
// and data.reset_order=true; else an InputError naming the checkpoint, what changed and the fix. The
// shards are compared by their fingerprint where the checkpoint records one, else by windows per epoch.
std::uint64_t blend_start_on_resume(const ckpt::TrainState& s, const config::Config& c, const std::filesystem::path& dir,
                                    const std::vector<ckpt::CorpusCursor>& now);

}  // namespace zt::train
