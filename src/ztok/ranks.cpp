// Multi-rank ztok: start-up checks, each rank's block into its journals (resumable from its progress
// file), the exchange of counts, shards cut round robin, and the progress line over every rank.
#include "ztok/ranks.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <optional>
#include <thread>

#include "core/error.hpp"
#include "ztok/shard_assembly.hpp"
#include "ztok/tokenize_stream.hpp"
#include "ztok/heartbeat.hpp"
#include "ztok/utf8_report.hpp"
#include "tok/tokenizer.hpp"

namespace zt::ztok {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// OUT/.ztok/rank_00002.train (.tokens, .docs, .runs): a rank's journal of a split.
fs::path journal_stem(const fs::path& out, std::uint64_t rank, const char* split) {
  return rank_progress_path(out, rank).replace_extension(split);
}

std::uint64_t split_tokens(const std::vector<JournalPart>& parts) {
  return parts.empty() ? 0 : parts.back().first + parts.back().counts.tokens;
}

// The progress line on rank 0, over every rank: its own progress as it goes, the others' from their
// progress files (saved every checkpoint_seconds; read again at most every 5 s). Off elsewhere.
class SharedLine {
 public:
  SharedLine(bool enabled, fs::path out, int ranks, std::uint64_t total_bytes)
      : meter_(enabled, total_bytes), out_(std::move(out)), ranks_(ranks) {
    if (!enabled) return;
    read_peers(0);
    meter_.start_at(peer_bytes_);  // what earlier invocations read: MB/s and ETA are this one's
    read_peers(1);
  }

  void update(std::uint64_t own_bytes, std::uint64_t own_tokens) {
    if (!meter_.due()) return;
    if (seconds_since(read_at_) >= 5) read_peers(1);
    meter_.update(own_bytes + peer_bytes_, own_tokens + peer_tokens_);
  }
  void finish(std::uint64_t bytes, std::uint64_t tokens) { meter_.update(bytes, tokens, true); }

 private:
  void read_peers(int first_rank) {
    peer_bytes_ = peer_tokens_ = 0;
    for (int r = first_rank; r < ranks_; ++r)
      if (const std::optional<RankProgress> p = load_rank_progress(out_, static_cast<std::uint64_t>(r))) {
        peer_bytes_ += p->input_bytes;
        peer_tokens_ += p->train.tokens + p->valid.tokens;
      }
    read_at_ = Clock::now();
  }

  ProgressMeter meter_;
  fs::path out_;
  int ranks_;
  Clock::time_point read_at_;
  std::uint64_t peer_bytes_ = 0, peer_tokens_ = 0;
};

}  // namespace

std::vector<std::size_t> split_inputs(const std::vector<std::uint64_t>& sizes, int ranks) {
  ZT_CHECK_GE(ranks, 1);
  long double total = 0, before = 0;
  for (const std::uint64_t s : sizes) total += static_cast<long double>(s);
  std::vector<int> owner(sizes.size());  // non-decreasing: the blocks are contiguous
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const long double middle = before + static_cast<long double>(sizes[i]) / 2;
    owner[i] = total > 0 ? std::min(ranks - 1, static_cast<int>(ranks * middle / total)) : 0;
    before += static_cast<long double>(sizes[i]);
  }
  std::vector<std::size_t> first(static_cast<std::size_t>(ranks) + 1);
  for (int r = 0; r <= ranks; ++r)
    first[static_cast<std::size_t>(r)] =
        static_cast<std::size_t>(std::lower_bound(owner.begin(), owner.end(), r) - owner.begin());
  return first;
}

struct RankedZtok::Totals {
  std::vector<JournalPart> train, valid;  // every rank's journal, in rank order
  std::uint64_t train_docs = 0, valid_docs = 0, documents = 0, replacements = 0;
  bool resumed = false;                   // some rank continued from a saved state
};

RankedZtok::RankedZtok(const ZtokOptions& o, const RankGroup& group) : options_(o), group_(group) {
  check_options(o);
  tokenizer_ = std::make_unique<tok::Tokenizer>(tok::Tokenizer::load(o.vocab_dir, o.vocabulary));
  inputs_ = expand_inputs(o.inputs);
  settings_ = ztok_settings(o, inputs_, tokenizer_->vocab().hash());
  std::vector<std::uint64_t> sizes;
  for (const auto& in : settings_.inputs) sizes.push_back(in.second);
  for (const std::uint64_t s : sizes) input_bytes_ += s;
  blocks_ = split_inputs(sizes, group.size());
  if (group.rank() == 0) progress_ = start_or_resume(o.out_dir, settings_, static_cast<std::uint64_t>(group.size()));
}

RankedZtok::~RankedZtok() = default;

void RankedZtok::check_shared_view() {
  const std::uint64_t run_id = group_.all_gather({progress_.run_id})[0];  // the run rank 0 started or resumed
  if (group_.rank() == 0) return;
  std::optional<ZtokProgress> seen;
  for (int attempt = 0; attempt < 20; ++attempt) {  // a network file system may show a new file late
    seen = load_progress(options_.out_dir);
    if (seen && seen->run_id == run_id) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  const std::string where = cat("rank ", group_.rank(), " reads ", (options_.out_dir / kProgressFile).string());
  if (!seen || seen->run_id != run_id)
    throw InputError(cat(where, seen ? ", but not the one rank 0 wrote" : ", but finds none",
                         ": --out must be a directory that every rank sees (a shared file system)"));
  const std::string diff = settings_difference(seen->settings, settings_);
  if (!diff.empty())
    throw InputError(cat(where, ": rank 0 started the run on other inputs or another vocabulary than this rank sees (",
                         diff, "); every rank must see the same files"));
  progress_ = *seen;
}

// Where this rank's block stands: its saved progress (resumed), or its start.
RankProgress RankedZtok::block_start(bool& resumed) const {
  const fs::path& out = options_.out_dir;
  const auto r = static_cast<std::uint64_t>(group_.rank());
  const std::optional<RankProgress> saved = load_rank_progress(out, r);
  resumed = saved.has_value();
  RankProgress p = saved.value_or(RankProgress{.rank = r, .first_input = blocks_[r], .end_input = blocks_[r + 1]});
  if (p.first_input != blocks_[r] || p.end_input != blocks_[r + 1])
    throw InputError(cat(rank_progress_path(out, r).string(), " holds inputs [", p.first_input, ", ", p.end_input,
                         ") but this run gives rank ", r, " [", blocks_[r], ", ", blocks_[r + 1], "): delete ",
                         out.string(), " and start over"));
  return p;
}

RankProgress RankedZtok::tokenize_block(const std::function<void(std::uint64_t, std::uint64_t)>& line,
                                        bool& resumed) const {
  const fs::path& out = options_.out_dir;
  const auto r = static_cast<std::uint64_t>(group_.rank());
  RankProgress p = block_start(resumed);
  if (p.done) return p;
  fs::create_directories(out / ".ztok");
  const bool wide = data::shard_ids_are_wide(tokenizer_->vocab().size());
  JournalWriter train(journal_stem(out, r, "train"), wide, p.train), valid(journal_stem(out, r, "valid"), wide, p.valid);
  const std::vector<std::string> block(inputs_.begin() + static_cast<std::ptrdiff_t>(p.first_input),
                                       inputs_.begin() + static_cast<std::ptrdiff_t>(p.end_input));
  std::uint64_t base = 0;  // bytes of the block's inputs before the one reading resumes in
  for (std::uint64_t i = 0; i < p.position.file && i < block.size(); ++i)
    base += settings_.inputs[p.first_input + i].second;
  const CorpusOptions corpus = cutting_safely_for(options_.corpus, *tokenizer_);
  CorpusReader reader(block, corpus, p.position, options_.chunk_bytes);
  TokenizeStream stream(*tokenizer_, reader, corpus, options_.threads,
                        2 * static_cast<std::size_t>(options_.threads) + 2);
  Clock::time_point saved_at = Clock::now();
  auto save = [&] {
    p.train = train.sync();
    p.valid = valid.sync();
    save_rank_progress(out, p);
    saved_at = Clock::now();
  };
  std::uint64_t chunks = 0;
  InvalidUtf8Report utf8(block, true);
  for (TokenizedChunk c; stream.next(c);) {
    utf8.add(c);
    route_chunk(c, block, options_.valid_fraction, [&](const RoutedSegment& s) {
      JournalWriter& journal = s.valid ? valid : train;
      if (s.doc_start) journal.begin_document();
      journal.append(s.ids, p.first_input + s.file);
      p.documents += s.doc_end;
    });
    p.replacements += c.replacements;
    p.position = c.chunk.end;
    p.input_bytes = base + c.chunk.file_bytes;
    if (options_.debug_kill_after_chunks > 0 && options_.debug_kill_rank == group_.rank() &&
        ++chunks == options_.debug_kill_after_chunks)
      std::raise(SIGKILL);
    if (seconds_since(saved_at) >= options_.checkpoint_seconds) save();
    line(p.input_bytes, train.counts().tokens + valid.counts().tokens);
  }
  utf8.finish();
  p.done = true;
  save();
  return p;
}

RankedZtok::Totals RankedZtok::exchange(const RankProgress& mine, bool resumed) const {
  const std::vector<std::uint64_t> all = group_.all_gather(
      {mine.train.tokens, mine.train.docs, mine.train.runs, mine.valid.tokens, mine.valid.docs, mine.valid.runs,
       mine.documents, mine.replacements, resumed ? 1u : 0u});
  constexpr std::size_t kFields = 9;
  Totals t;
  std::uint64_t train_first = 0, valid_first = 0;
  for (std::size_t r = 0; r < static_cast<std::size_t>(group_.size()); ++r) {
    const std::uint64_t* f = all.data() + r * kFields;
    t.train.push_back({journal_stem(options_.out_dir, r, "train"), {f[0], f[1], f[2]}, train_first});
    t.valid.push_back({journal_stem(options_.out_dir, r, "valid"), {f[3], f[4], f[5]}, valid_first});
    train_first += f[0];
    valid_first += f[3];
    t.train_docs += f[1];
    t.valid_docs += f[4];
    t.documents += f[6];
    t.replacements += f[7];
    t.resumed = t.resumed || f[8] != 0;
  }
  return t;
}

void RankedZtok::write_shards(const Totals& t, Heartbeat& heartbeat) const {
  const data::TokenizerInfo info = shard_tokenizer_info(*tokenizer_);
  const std::uint64_t n_train = shard_count(split_tokens(t.train), options_.shard_tokens);
  const std::uint64_t n_valid = shard_count(split_tokens(t.valid), options_.shard_tokens);
  for (auto j = static_cast<std::uint64_t>(group_.rank()); j < n_train + n_valid;
       j += static_cast<std::uint64_t>(group_.size())) {
    const bool valid = j >= n_train;
    const std::uint64_t index = valid ? j - n_train : j;
    const std::string name = shard_file_name(valid ? "valid" : "train", index);
    heartbeat.beat("writing shard " + name);
    assemble_shard(options_.out_dir / name, info, options_.shard_tokens,
                   index, valid ? t.valid : t.train, inputs_);
  }
}

// Rank 0, once every shard is written: the run is complete (its totals recorded), the journals go.
void RankedZtok::finish(const Totals& t) {
  for (auto [state, parts, docs] : {std::tuple(&progress_.train, &t.train, t.train_docs),
                                    std::tuple(&progress_.valid, &t.valid, t.valid_docs)}) {
    *state = ShardStream::State{};
    state->total_tokens = split_tokens(*parts);
    state->total_docs = docs;
    state->shard = shard_count(state->total_tokens, options_.shard_tokens);
  }
  progress_.documents = t.documents;
  progress_.replacements = t.replacements;
  progress_.complete = true;
  save_progress(options_.out_dir, progress_);
  fs::remove_all(options_.out_dir / ".ztok");
}

ZtokSummary RankedZtok::run() {
  const Clock::time_point start = Clock::now();
  if (progress_.complete) {
    if (group_.rank() == 0) fs::remove_all(options_.out_dir / ".ztok");  // left by a run killed as it completed
    ZtokSummary s = summary_of(progress_, input_bytes_);
    s.already_complete = s.resumed = true;
    return s;
  }
  SharedLine line(group_.rank() == 0 && options_.show_progress, options_.out_dir, group_.size(), input_bytes_);
  fs::create_directories(options_.out_dir / ".ztok");
  Heartbeat heartbeat(options_.out_dir, group_.rank(), group_.size(), options_.timeout_s);
  bool resumed = false;
  const RankProgress mine = tokenize_block(
      [&](std::uint64_t bytes, std::uint64_t tokens) {
        line.update(bytes, tokens);
        heartbeat.beat("tokenizing");
      },
      resumed);
  return_freed_memory();  // before the shards are cut
  const std::uint64_t my_tokens = mine.train.tokens + mine.valid.tokens;
  group_.wait_for_all(0.1, [&] {  // sleeps while others tokenize
    line.update(mine.input_bytes, my_tokens);
    heartbeat.check("done tokenizing, waiting for the others");
  });
  const Totals totals = exchange(mine, resumed);  // small: under the world's fixed deadline (--timeout-s)
  line.finish(input_bytes_, split_tokens(totals.train) + split_tokens(totals.valid));
  write_shards(totals, heartbeat);
  group_.wait_for_all(0.1, [&] { heartbeat.check("done writing shards, waiting for the others"); });
  if (group_.rank() == 0) finish(totals);
  ZtokSummary s = summary_of(progress_, input_bytes_);
  if (group_.rank() != 0) s = {};  // rank 0 reports
  s.resumed = totals.resumed;
  s.seconds = seconds_since(start);
  return s;
}

}  // namespace zt::ztok
