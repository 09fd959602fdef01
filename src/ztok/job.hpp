// The ztok job (docs/INTERFACE.md "ztok"), on one process or on several ranks under mpirun; one
// process is a group of one rank. Each rank tokenizes a contiguous block of the input list (balanced
// by bytes) into its own journals under OUT/.ztok/ (token_journal.hpp), resumable from its progress
// file; the ranks exchange their counts, and each shard is cut from the journals by one rank, round
// robin (shard_assembly.hpp): the same bytes for any number of ranks and threads. A rank alone knows
// where its journal starts in the split, so it cuts each shard as soon as it is full and frees the
// journal behind it: its journals hold about one shard's ids. Several ranks need room on OUT, a file
// system every rank sees, for the journals (2 bytes per token, 4 above 65536 ids) until the shards are
// written. Memory stays bounded whatever the corpus size: run.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "ztok/run.hpp"

namespace zt::tok {
class Tokenizer;
}

namespace zt::ztok {

class Heartbeat;

// What ztok needs from the job's ranks. apps/ztok.cpp adapts dist::World (MPI stays in dist/); only
// the main thread calls these.
class RankGroup {
 public:
  virtual ~RankGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank's `mine` (the same length on every rank), concatenated in rank order.
  virtual std::vector<std::uint64_t> all_gather(const std::vector<std::uint64_t>& mine) const = 0;
  // Returns once every rank has called it; calls `idle` about every `poll_seconds` meanwhile,
  // sleeping in between (ranks that finish early leave their cores to the others). No deadline of
  // its own: `idle` enforces the progress deadline (heartbeat.hpp) by throwing.
  virtual void wait_for_all(double poll_seconds, const std::function<void()>& idle) const = 0;
};

// One process without MPI: a group of one rank.
class OneRank final : public RankGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<std::uint64_t> all_gather(const std::vector<std::uint64_t>& mine) const override { return mine; }
  void wait_for_all(double, const std::function<void()>&) const override {}
};

// First input of each rank's block, then the end (ranks + 1 values): contiguous blocks in input
// order, each input to the rank whose equal share of all bytes holds the input's middle byte.
std::vector<std::size_t> split_inputs(const std::vector<std::uint64_t>& sizes, int ranks);

class ZtokJob {
 public:
  // Start-up, on every rank: vocabulary, inputs, settings; rank 0 also starts or resumes the run in
  // OUT (start_or_resume). Throws zt::InputError for bad input: the ranks agree on it.
  ZtokJob(const ZtokOptions& options, const RankGroup& group);
  ~ZtokJob();
  // Start-up, every rank, after the constructor succeeded everywhere: the other ranks check that they
  // see the run rank 0 started (a shared OUT, the same inputs and vocabulary). Collective.
  void check_shared_view();
  // Tokenizes this rank's block, exchanges counts, writes this rank's shards; rank 0 records the run
  // complete. Totals in the summary are over every rank (rank 0's; the others' are zero). Collective.
  ZtokSummary run();

 private:
  struct Totals;
  class Journals;
  RankProgress block_start(bool& resumed) const;
  // Tokenizes this rank's block into its journals, resuming from its progress file; `line` gets its
  // input bytes and tokens after each chunk. `resumed`: a saved state was found.
  RankProgress tokenize_block(const std::function<void(std::uint64_t, std::uint64_t)>& line, bool& resumed) const;
  Totals exchange(const RankProgress& mine, bool resumed) const;
  void write_shards(const Totals& totals, Heartbeat& heartbeat) const;
  void finish(const Totals& totals);

  const ZtokOptions& options_;
  const RankGroup& group_;
  std::unique_ptr<tok::Tokenizer> tokenizer_;
  std::vector<std::string> inputs_;
  ZtokSettings settings_;
  std::uint64_t input_bytes_ = 0;
  std::vector<std::size_t> blocks_;  // split_inputs
  ZtokProgress progress_;            // the run in OUT/ztok-progress.json
  std::unique_ptr<io::DirFlock> out_lock_;  // this rank's, for the job's life (lock_out_dir)
};

// The job as one process (OneRank); its output bytes depend on the inputs and settings only, not on
// `threads`, nor on how often the run was interrupted and resumed. Bad input (inputs, vocabulary,
// JSONL, a foreign --out) is a zt::InputError, any other failure a zt::Error.
ZtokSummary run_ztok(const ZtokOptions& options);

}  // namespace zt::ztok
