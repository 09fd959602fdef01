// Start-up data checks: headers on every rank; data.verify=full spreads the chunk reads over ranks.
#include "train/data_check.hpp"

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "data/shard_set.hpp"

namespace zt::train {
namespace {
// Reads tokens [b K, (b + 1) K) for every block b = rank mod world_size: each chunk's Fletcher-32 and
// each id's range are checked on the way (shard.hpp), as the first training read would.
std::uint64_t verify_blocks(const data::TokenSource& tokens, int rank, int world_size) {
  constexpr std::uint64_t kBlock = data::kShardChunkTokens;
  std::vector<std::int32_t> buffer(kBlock);
  std::vector<std::uint8_t> mask(tokens.has_loss_mask() ? kBlock : 0);
  std::uint64_t checked = 0;
  const std::uint64_t n = tokens.n_tokens();
  for (std::uint64_t start = kBlock * static_cast<std::uint64_t>(rank); start < n;
       start += kBlock * static_cast<std::uint64_t>(world_size)) {
    const std::uint64_t count = std::min(kBlock, n - start);
    tokens.read(start, count, buffer.data());
    if (!mask.empty()) tokens.read_loss_mask(start, count, mask.data());
    checked += count;
  }
  return checked;
}

// Logged by rank 0 for its own share: the other ranks' shares are agreed on after (a bad chunk there
// still ends the start-up with exit 2).
void verify_all(const std::string& key, const data::ShardSet& tokens, int rank, int world_size) {
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t checked = 0;
  try {
    checked = verify_blocks(tokens, rank, world_size);
  } catch (const DataError& e) {
    throw InputError(cat("data.verify=full: ", key, ": ", e.what()));
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::size_t unchecked = tokens.unchecksummed().size();
  log::info(cat("data.verify=full: ", key, ": rank 0 read its ", world_size > 1 ? "share" : "whole", " of ",
                tokens.describe(), " (", checked, " tokens in ", s, " s)",
                unchecked ? cat("; the chunks of ", unchecked, " shards carry no checksum: their ids were range-checked only")
                          : ": every chunk's checksum held"));
}

// Shards another tool wrote without Fletcher-32: their reads cannot find a damaged chunk.
void warn_unchecksummed(const std::string& key, const data::ShardSet& tokens) {
  const std::vector<std::string> bare = tokens.unchecksummed();
  if (!bare.empty())
    log::warn(cat(key, ": ", bare.size(), " shard(s) (", bare.front(), bare.size() > 1 ? ", ..." : "",
                  ") hold tokens without Fletcher-32 checksums (not written by ztok): a damaged chunk there would be "
                  "trained on as it reads, and data.verify=full can check only their ids' range; write them with "
                  "ztok, or with h5py's fletcher32=True"));
}

// data.document_mask / data.reset_positions read every shard's doc_offsets: checked here, exit 2 at
// start-up, not in the loader's thread at the first step.
void check_documents(const std::string& key, const data::ShardSet& tokens) {
  try {
    tokens.document_starts(0, 1);
  } catch (const DataError& e) {
    throw InputError(cat(key, ": ", e.what()));
  }
}
// Packed shards hold windows of exactly model.seq_len + 1 tokens: any other length would cut samples.
void check_packing(const std::string& key, const data::TokenSource& tokens, std::int64_t seq_len) {
  const std::uint64_t window = tokens.packed_window();
  if (window != 0 && window != static_cast<std::uint64_t>(seq_len) + 1)
    throw InputError(cat(key, ": ", tokens.describe(), " were packed for windows of ", window,
                         " tokens (ztok --pack --seq-len ", window - 1, "), but model.seq_len=", seq_len,
                         " trains on windows of ", seq_len + 1, ": set model.seq_len=", window - 1,
                         " or run ztok again with --seq-len ", seq_len));
}
}  // namespace

namespace {
// A shard both trained on and evaluated on (data.train=tok/*.h5 takes valid_*.h5 too) makes the
// validation loss a training loss: legal, but rarely meant.
void warn_valid_in_train(const std::vector<data::Corpus>& train, const data::ShardSet& valid) {
  std::set<std::filesystem::path> trained;
  std::error_code ec;
  for (const data::Corpus& corpus : train)
    for (const std::filesystem::path& p : corpus.shards->paths()) trained.insert(std::filesystem::weakly_canonical(p, ec));
  std::vector<std::string> both;
  for (const std::filesystem::path& p : valid.paths())
    if (trained.count(std::filesystem::weakly_canonical(p, ec))) both.push_back(p.string());
  if (!both.empty())
    log::warn(cat("data.valid shard ", both.front(), both.size() > 1 ? cat(" (and ", both.size() - 1, " more)") : "",
                  " is also in data.train: the validation loss is then measured on trained data; narrow data.train's "
                  "glob (e.g. train_*.h5) if that is not meant"));
}
}  // namespace

const tok::Tokenizer& load_tokenizer(const std::string& vocab) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<const tok::Tokenizer>> loaded;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& slot = loaded[vocab];
  if (!slot) {
    try {
      slot = std::make_unique<const tok::Tokenizer>(tok::Tokenizer::load(vocab));
    } catch (const InputError& e) {
      loaded.erase(vocab);
      throw InputError(cat("data.vocab=", vocab, ": ", e.what()));
    }
  }
  return *slot;
}

data::ShardExpectation expected_shards(const config::Config& c) {
  data::ShardExpectation expect;
  expect.vocab_size = static_cast<std::uint64_t>(c.model.vocab_size);
  if (!c.data.vocab.empty()) {  // the shards must have been tokenized with this vocabulary
    const tok::Tokenizer& tokenizer = load_tokenizer(c.data.vocab);
    expect.vocab_hash = tokenizer.vocab().hash();
    expect.eot = tokenizer.eot();
  }
  return expect;
}

void check_data(const config::Config& c, int rank, int world_size) {
  if (c.data.train.empty())
    throw ConfigError("data.train is empty: give the training shards written by ztok (e.g. data.train=data/tok/train_*.h5)");
  const data::ShardExpectation expect = expected_shards(c);
  const std::vector<data::Corpus> train = data::open_corpora(c.data.train, "data.train", expect);
  if (data::parse_blend(c.data.valid, "data.valid").front().glob != c.data.valid)
    throw ConfigError(cat("data.valid=", c.data.valid, " is weighted: evaluation reads one set of shards; give its "
                          "glob(s) without weights (e.g. data.valid=web/valid_*.h5,code/valid_*.h5)"));
  const auto valid = c.data.valid.empty() ? nullptr : data::open_shard_set(c.data.valid, "data.valid", expect);
  // Evaluated by the model data.train trains: its ids must mean the same tokens, with or without data.vocab.
  if (valid) {
    data::check_same_vocabulary(train.front().shards->first_info(), valid->first_info(), "data.train", "data.valid");
    data::SpecialsUnion specials;  // every shard's special ids past the vocabulary: no id with two names
    for (const data::Corpus& corpus : train) specials.add(corpus.shards->specials());
    specials.add(valid->specials());
  }
  if (valid && rank == 0) warn_valid_in_train(train, *valid);
  for (const data::Corpus& corpus : train) {
    check_packing("data.train", *corpus.shards, c.model.seq_len);
    if (corpus.shards->n_tokens() < static_cast<std::uint64_t>(c.model.seq_len) + 1)
      throw InputError(cat("data.train: ", corpus.spec.glob, " holds ", corpus.shards->n_tokens(), " tokens, fewer than one "
                           "window of model.seq_len+1 = ", c.model.seq_len + 1, ": give more data or a shorter model.seq_len"));
  }
  if (valid) {  // found here, not at the first evaluation log.eval_every steps into the run
    check_packing("data.valid", *valid, c.model.seq_len);
    if (valid->n_tokens() < static_cast<std::uint64_t>(c.model.seq_len) + 1)
      throw InputError(cat("data.valid: ", c.data.valid, " holds ", valid->n_tokens(), " tokens, fewer than one window "
                           "of model.seq_len+1 = ", c.model.seq_len + 1, ": give a larger validation set (ztok "
                           "--valid-fraction), a shorter model.seq_len, or data.valid= (no evaluation)"));
  }
  for (const data::Corpus& corpus : train) warn_unchecksummed("data.train", *corpus.shards);
  if (valid) warn_unchecksummed("data.valid", *valid);
  if (c.data.document_mask || c.data.reset_positions) {
    for (const data::Corpus& corpus : train) check_documents("data.train", *corpus.shards);
    if (valid) check_documents("data.valid", *valid);
  }
  if (c.data.verify != config::DataVerify::kFull) return;
  for (const data::Corpus& corpus : train) verify_all("data.train", *corpus.shards, rank, world_size);
  if (valid) verify_all("data.valid", *valid, rank, world_size);
}

}  // namespace zt::train
