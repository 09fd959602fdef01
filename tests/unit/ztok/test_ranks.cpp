// The ztok job's parts without MPI: how inputs are split across ranks; shards cut from several ranks'
// journals, or from one growing journal as each fills, are byte-identical to the shards written
// straight from the whole stream in memory.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <numeric>
#include <random>

#include "core/error.hpp"
#include "ztok/shard_assembly.hpp"
#include "ztok/job.hpp"
#include "../data/shard_test_util.hpp"

namespace zt::ztok {
using namespace zt::data;  // the shard types (data/shard.hpp)
namespace {

using namespace data::testing;

TEST(ShardAssembly, InputsSplitIntoContiguousBlocksBalancedByBytes) {
  EXPECT_EQ(split_inputs({10, 10, 10, 10}, 2), (std::vector<std::size_t>{0, 2, 4}));
  EXPECT_EQ(split_inputs({10, 10, 10, 10}, 1), (std::vector<std::size_t>{0, 4}));
  EXPECT_EQ(split_inputs({100, 1, 1, 1, 1}, 2), (std::vector<std::size_t>{0, 1, 5}));  // the big file alone
  EXPECT_EQ(split_inputs({5, 5}, 4), (std::vector<std::size_t>{0, 0, 1, 1, 2}));      // ranks without inputs
  EXPECT_EQ(split_inputs({0, 0, 0}, 3), (std::vector<std::size_t>{0, 3, 3, 3}));       // no bytes: rank 0
  EXPECT_EQ(split_inputs({}, 2), (std::vector<std::size_t>{0, 0, 0}));
  std::mt19937_64 rng(7);
  for (int ranks : {1, 2, 3, 8, 50}) {
    std::vector<std::uint64_t> sizes(37);
    for (auto& s : sizes) s = rng() % 1000;
    const std::vector<std::size_t> first = split_inputs(sizes, ranks);
    ASSERT_EQ(first.size(), static_cast<std::size_t>(ranks) + 1);
    EXPECT_EQ(first.front(), 0u);
    EXPECT_EQ(first.back(), sizes.size());
    EXPECT_TRUE(std::is_sorted(first.begin(), first.end())) << ranks;
    const std::uint64_t total = std::accumulate(sizes.begin(), sizes.end(), std::uint64_t{0});
    for (int r = 0; r < ranks; ++r) {  // a rank's share overshoots by less than one input
      const std::uint64_t mine = std::accumulate(sizes.begin() + first[r], sizes.begin() + first[r + 1], std::uint64_t{0});
      EXPECT_LE(mine, total / ranks + 1000) << "rank " << r << " of " << ranks;
    }
  }
}

// A split's stream: documents of random length from a few inputs, as ztok routes them.
struct RankDoc {
  std::uint64_t input;
  std::vector<std::uint32_t> ids;
};

std::vector<RankDoc> random_docs(std::mt19937_64& rng, std::size_t n) {
  std::vector<RankDoc> docs(n);
  std::uint64_t input = 0;
  for (RankDoc& d : docs) {
    input += rng() % 3 == 0;  // several documents per input
    d.input = input;
    d.ids.resize(1 + rng() % 900);
    for (auto& id : d.ids) id = static_cast<std::uint32_t>(rng() % 50257);
  }
  return docs;
}

// The split's shards as the format defines them, written straight from memory (the oracle): shard k
// holds ids [k * shard_tokens, (k + 1) * shard_tokens), the document starts among them (as offsets in
// the shard) and the names of the inputs its ids came from, in order, a name repeated only after another.
void write_reference_shards(const fs::path& dir, const TokenizerInfo& info, std::uint64_t shard_tokens,
                            const std::vector<RankDoc>& docs, const std::vector<std::string>& names) {
  std::vector<std::uint32_t> ids;
  std::vector<std::uint64_t> input_of, starts;
  for (const RankDoc& d : docs) {
    starts.push_back(ids.size());
    ids.insert(ids.end(), d.ids.begin(), d.ids.end());
    input_of.insert(input_of.end(), d.ids.size(), d.input);
  }
  fs::create_directories(dir);
  for (std::uint64_t begin = 0, k = 0; begin < ids.size(); begin += shard_tokens, ++k) {
    const std::uint64_t end = std::min<std::uint64_t>(begin + shard_tokens, ids.size());
    std::vector<std::uint64_t> offsets;
    for (const std::uint64_t s : starts)
      if (s >= begin && s < end) offsets.push_back(s - begin);
    std::vector<std::string> sources;
    for (std::uint64_t i = begin; i < end; ++i)
      if (sources.empty() || sources.back() != names[input_of[i]]) sources.push_back(names[input_of[i]]);
    ShardWriter w(dir / shard_file_name("train", k), info, end - begin, offsets.size(), sources);
    w.append_tokens(std::span(ids).subspan(begin, end - begin));
    w.append_doc_offsets(offsets);
    w.commit();
  }
}

TEST(ShardAssembly, ShardsFromRanksJournalsEqualOneProcessShards) {
  TempDir dir("ztok_ranks");
  std::mt19937_64 rng(11);
  const std::vector<RankDoc> docs = random_docs(rng, 300);
  std::vector<std::string> names;
  for (std::uint64_t i = 0; i <= docs.back().input; ++i) names.push_back(cat("in/part_", i, ".txt"));
  const TokenizerInfo info = gpt2_info();
  const std::uint64_t shard_tokens = 7001;
  write_reference_shards(dir.path / "reference", info, shard_tokens, docs, names);
  // Three ranks: documents [0, 90), [90, 91), [91, 300); rank 1 resumes once from a saved state.
  const std::size_t cuts[4] = {0, 90, 91, docs.size()};
  std::vector<JournalPart> parts;
  std::uint64_t first = 0;
  fs::create_directories(dir.path / "ranks");
  for (int r = 0; r < 3; ++r) {
    const fs::path stem = dir.path / "ranks" / cat("rank_", r, ".train");
    JournalCounts counts;
    {
      auto journal = std::make_unique<JournalWriter>(stem, false, JournalCounts{});
      for (std::size_t i = cuts[r]; i < cuts[r + 1]; ++i) {
        if (i == cuts[r] + 1) journal = std::make_unique<JournalWriter>(stem, false, journal->sync());  // resume
        journal->begin_document();
        journal->append(docs[i].ids, docs[i].input);
      }
      counts = journal->sync();
    }
    parts.push_back({stem, counts, first});
    first += counts.tokens;
  }
  const std::uint64_t n = shard_count(first, shard_tokens);
  ASSERT_GE(n, 10u);
  for (std::uint64_t k = 0; k < n; ++k) {
    const fs::path path = dir.path / "ranks" / shard_file_name("train", k);
    assemble_shard(path, info, shard_tokens, k, parts, names);
    EXPECT_EQ(slurp(path), slurp(dir.path / "reference" / shard_file_name("train", k))) << "shard " << k;
  }
  EXPECT_FALSE(fs::exists(dir.path / "reference" / shard_file_name("train", n)));
}

// Bytes of disk the file holds (holes excluded).
std::uint64_t allocated_bytes(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_blocks) * 512 : 0;
}

// Whether the file system of `dir` frees the blocks of a punched hole (ext4, XFS, tmpfs do).
bool punches_holes(const fs::path& dir) {
  const fs::path probe = dir / "hole_probe";
  std::ofstream(probe, std::ios::binary) << std::string(65536, 'x');
  const int fd = ::open(probe.c_str(), O_RDWR);
  const bool punched = fd >= 0 && ::fsync(fd) == 0 &&
                       ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 65536) == 0;
  if (fd >= 0) ::close(fd);
  const bool freed = punched && allocated_bytes(probe) < 65536;
  fs::remove(probe);
  return freed;
}

// A rank alone cuts each shard from its one growing journal as soon as the shard is full (the ztok
// job on one process), frees the ids of the shards a save recorded, and resumes from a save: the
// shards equal the oracle's, and the journal's freed ids hold no disk.
TEST(ShardAssembly, ShardsCutAsTheJournalFillsEqualTheWholeStreamsAndFreeIt) {
  TempDir dir("ztok_ranks");
  std::mt19937_64 rng(12);
  const std::vector<RankDoc> docs = random_docs(rng, 300);
  std::vector<std::string> names;
  for (std::uint64_t i = 0; i <= docs.back().input; ++i) names.push_back(cat("in/part_", i, ".txt"));
  const TokenizerInfo info = gpt2_info();
  const std::uint64_t shard_tokens = 7001;
  write_reference_shards(dir.path / "reference", info, shard_tokens, docs, names);
  const fs::path stem = dir.path / "rank_0.train";
  auto journal = std::make_unique<JournalWriter>(stem, false, JournalCounts{});
  std::uint64_t cut = 0, saved_cut = 0;
  auto cut_full = [&] {
    journal->flush();
    for (; cut < journal->counts().tokens / shard_tokens; ++cut)
      assemble_shard(dir.path / shard_file_name("train", cut), info, shard_tokens, cut,
                     {{stem, journal->counts(), 0}}, names);
  };
  for (std::size_t i = 0; i < docs.size(); ++i) {
    journal->begin_document();
    for (std::size_t at = 0; at < docs[i].ids.size(); at += 250) {  // in pieces, as chunks cut documents
      journal->append(std::span(docs[i].ids).subspan(at, std::min<std::size_t>(250, docs[i].ids.size() - at)),
                      docs[i].input);
      cut_full();
    }
    if (i % 40 == 39) {  // a save: the shards cut so far are recorded, their ids freed
      const JournalCounts saved = journal->sync();
      saved_cut = cut;
      journal->release_before(saved_cut * shard_tokens);
      if (i == 159) journal = std::make_unique<JournalWriter>(stem, false, saved);  // killed and resumed here
    }
  }
  const JournalCounts counts = journal->sync();
  journal->release_before(cut * shard_tokens);
  const std::uint64_t n = shard_count(counts.tokens, shard_tokens);
  ASSERT_GE(n, 10u);
  ASSERT_EQ(cut, n - 1);  // all but the last, short one
  assemble_shard(dir.path / shard_file_name("train", cut), info, shard_tokens, cut, {{stem, counts, 0}}, names);
  for (std::uint64_t k = 0; k < n; ++k)
    EXPECT_EQ(slurp(dir.path / shard_file_name("train", k)), slurp(dir.path / "reference" / shard_file_name("train", k)))
        << "shard " << k;
  const fs::path ids = journal_file(stem, 0);
  const std::uint64_t kept = (counts.tokens - cut * shard_tokens) * 2;  // the last shard's ids
  journal.reset();
  if (!punches_holes(dir.path))
    GTEST_SKIP() << "the file system of " << ids.string() << " punches no holes: shards checked, freeing not";
  // The last shard's ids, partial blocks at the edge and the extent tree's blocks (ext4: 28 KiB here).
  EXPECT_LE(allocated_bytes(ids), kept + 32768) << "of " << fs::file_size(ids) << " bytes";
}

// The runs a shard's range overlaps, by binary search: a run beginning at the range's start is in, one
// beginning at its end is out, a run holding the start is in; more runs than one read holds.
TEST(ShardAssembly, RunsOverlappingARangeAreFoundAtItsEdges) {
  TempDir dir("ztok_ranks");
  const fs::path stem = dir.path / "r.train";
  JournalWriter w(stem, false, {});
  const std::vector<std::uint32_t> ten(10, 7);
  for (std::uint64_t input = 0; input < 3000; ++input) w.append(ten, input);  // run i: ids [10 i, 10 i + 10)
  const JournalReader r(stem, false, w.sync());
  auto inputs = [&](std::uint64_t from, std::uint64_t to) {
    std::vector<std::uint64_t> out;
    for (const JournalRun& run : r.runs_overlapping(from, to)) out.push_back(run.input);
    return out;
  };
  EXPECT_EQ(inputs(0, 10), (std::vector<std::uint64_t>{0}));
  EXPECT_EQ(inputs(10, 30), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(inputs(15, 31), (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(inputs(29990, 30000), (std::vector<std::uint64_t>{2999}));
  const std::vector<std::uint64_t> wide = inputs(5, 20005);  // 2001 runs: over two reads of 1024
  ASSERT_EQ(wide.size(), 2001u);
  EXPECT_EQ(wide.front(), 0u);
  EXPECT_EQ(wide.back(), 2000u);
  EXPECT_EQ(r.run(2999).first, 29990u);
}

TEST(ShardAssembly, ShortJournalIsNamed) {
  TempDir dir("ztok_ranks");
  const fs::path stem = dir.path / "r.train";
  {
    JournalWriter w(stem, false, {});
    w.begin_document();
    w.append(std::vector<std::uint32_t>{1, 2, 3}, 0);
    w.sync();
  }
  try {
    JournalReader r(stem, false, {10, 1, 1});
    FAIL() << "a journal shorter than its counts was accepted";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("r.train.tokens"), std::string::npos) << e.what();
  }
  EXPECT_THROW(JournalWriter(stem, false, {10, 1, 1}), InputError);
}

}  // namespace
}  // namespace zt::ztok
