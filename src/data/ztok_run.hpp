// The ztok job: tokenize input files into train/valid shards (INTERFACE.md "ztok"), resumably.
// Memory stays bounded whatever the corpus size: about 45 MiB fixed (vocabulary tables, HDF5), a
// piece cache of at most 32768 pieces (~2 MiB) per thread, at most 2 * threads + 2 chunks of about
// 1 MiB of text plus their ids (4 bytes each) in flight, and shards are assembled from journals on
// disk. Only a stretch of a document longer than a chunk with no safe cut in it (an ASCII space, tab
// or newline after a non-space byte) or a JSONL line longer than a chunk is held whole.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/corpus.hpp"

namespace zt::data {

struct ZtokOptions {
  std::filesystem::path vocab_dir;   // encoder.json + vocab.bpe
  std::filesystem::path out_dir;
  std::vector<std::string> inputs;   // files or globs, command-line order
  CorpusOptions corpus;
  std::uint64_t shard_tokens = 100'000'000;
  double valid_fraction = 0;         // share of documents that go to valid_*.h5
  int threads = 1;                   // tokenizer threads
  bool show_progress = true;         // a progress line on stderr
  double checkpoint_seconds = 10;    // save progress at least this often (and after every shard)
  std::size_t chunk_bytes = CorpusReader::kDefaultChunkBytes;
  // Fault injection for tests only: SIGKILL this process after that many chunks (0 = off).
  std::uint64_t debug_kill_after_chunks = 0;
};

struct ZtokSummary {
  std::uint64_t documents = 0, input_bytes = 0, replacements = 0;
  std::uint64_t train_tokens = 0, valid_tokens = 0, train_shards = 0, valid_shards = 0;
  double seconds = 0;
  bool resumed = false;           // continued an interrupted run
  bool already_complete = false;  // nothing to do: OUT holds this run's complete output
};

// Does the job; bad input (inputs, vocabulary, JSONL, a foreign --out) is a zt::InputError, any other
// failure a zt::Error. The output bytes depend on the inputs and settings only, not on `threads` or
// on how often the run was interrupted and resumed.
ZtokSummary run_ztok(const ZtokOptions& options);

// Whether document `doc` of input `source` goes to the validation split: the first 8 bytes of
// SHA-256(source + "\n" + decimal doc), read big-endian, as a fraction of 2^64, are below `fraction`.
bool is_validation_document(const std::string& source, std::uint64_t doc, double fraction);

}  // namespace zt::data
