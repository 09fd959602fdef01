// Shard assembly from journals: the parts overlapping the shard's range, read in blocks (memory stays
// at one block whatever the shard size).
#include "ztok/shard_assembly.hpp"

#include <algorithm>
#include <cstdio>
#include <memory>

#include "core/error.hpp"

namespace zt::ztok {
namespace {

// Ids or offsets per read: 64Ki (512 KiB of document offsets) keeps the buffers small beside the
// tokenizer's memory when one rank cuts shards while it tokenizes; 1Mi cost 16 MiB, the run's peak RSS.
constexpr std::uint64_t kBlock = std::uint64_t{1} << 16;

// The slice of one rank's journal that falls into the shard (positions local to the journal).
struct Piece {
  const JournalPart* part;
  std::unique_ptr<JournalReader> reader;
  std::uint64_t from, to;          // ids [from, to)
  std::uint64_t doc_lo, doc_hi;    // document starts [doc_lo, doc_hi) lie in [from, to)
};

std::vector<Piece> pieces_of(const std::vector<JournalPart>& parts, std::uint64_t begin, std::uint64_t end, bool wide) {
  std::vector<Piece> pieces;
  for (const JournalPart& part : parts) {
    const std::uint64_t lo = std::max(begin, part.first), hi = std::min(end, part.first + part.counts.tokens);
    if (lo >= hi) continue;
    Piece p{&part, std::make_unique<JournalReader>(part.stem, wide, part.counts), lo - part.first, hi - part.first, 0, 0};
    p.doc_lo = p.reader->docs_before(p.from);
    p.doc_hi = p.reader->docs_before(p.to);
    pieces.push_back(std::move(p));
  }
  return pieces;
}

// The names of the inputs whose ids lie in the pieces, in order, a name repeated only after another.
std::vector<std::string> sources_of(const std::vector<Piece>& pieces, const std::vector<std::string>& inputs) {
  std::vector<std::string> names;
  for (const Piece& p : pieces)
    for (const JournalRun& run : p.reader->runs_overlapping(p.from, p.to)) {
      ZT_CHECK_LT(run.input, inputs.size(), "journal ", p.part->stem.string());
      const std::string& name = inputs[run.input];
      if (names.empty() || names.back() != name) names.push_back(name);
    }
  return names;
}

}  // namespace

std::string shard_file_name(const std::string& prefix, std::uint64_t index) {
  // ztrain reads a split's shards in the byte order of their names: six digits keep that the shards' order.
  if (index > 999999)
    throw InputError(cat("the ", prefix, " split needs more than 1,000,000 shards, past the six digits of their names ",
                         "(ztrain reads them in name order): raise --shard-tokens and start over in an empty --out"));
  char digits[32];
  std::snprintf(digits, sizeof digits, "%06llu", static_cast<unsigned long long>(index));
  return prefix + "_" + digits + ".h5";
}

std::uint64_t shard_count(std::uint64_t split_tokens, std::uint64_t shard_tokens) {
  return (split_tokens + shard_tokens - 1) / shard_tokens;
}

void assemble_shard(const std::filesystem::path& path, const data::TokenizerInfo& tokenizer, std::uint64_t shard_tokens,
                    std::uint64_t index, const std::vector<JournalPart>& parts, const std::vector<std::string>& inputs) {
  ZT_CHECK(!parts.empty());
  const std::uint64_t total = parts.back().first + parts.back().counts.tokens;
  const std::uint64_t begin = index * shard_tokens, end = std::min(begin + shard_tokens, total);
  ZT_CHECK_LT(begin, end, "shard ", path.string(), " lies past the split's ", total, " ids");
  const std::vector<Piece> pieces = pieces_of(parts, begin, end, data::shard_ids_are_wide(tokenizer.vocab_size));
  std::uint64_t n_docs = 0;
  for (const Piece& p : pieces) n_docs += p.doc_hi - p.doc_lo;
  data::ShardWriter writer(path, tokenizer, end - begin, n_docs, sources_of(pieces, inputs));
  std::vector<std::uint32_t> ids;
  for (const Piece& p : pieces)
    for (std::uint64_t at = p.from; at < p.to; at += kBlock) {
      ids.resize(std::min(kBlock, p.to - at));
      p.reader->tokens(at, std::span(ids));
      writer.append_tokens(ids);
    }
  std::vector<std::uint64_t> docs;
  for (const Piece& p : pieces)
    for (std::uint64_t at = p.doc_lo; at < p.doc_hi; at += kBlock) {
      docs.resize(std::min(kBlock, p.doc_hi - at));
      p.reader->docs(at, std::span(docs));
      for (std::uint64_t& d : docs) d = p.part->first + d - begin;  // journal position -> shard offset
      writer.append_doc_offsets(docs);
    }
  writer.commit();
}

}  // namespace zt::ztok
