// What every ztok run (job.hpp; instruct_run.hpp) shares: its options, its summary, the checks before
// work, the settings that decide the output, and the routing of documents to train or valid.
// Memory stays bounded whatever the corpus size: about 45 MiB fixed (vocabulary tables, HDF5), a
// piece cache of at most 32768 pieces (~2 MiB) per thread, at most 2 * threads + 2 chunks of about
// 1 MiB of text plus their ids (4 bytes each) in flight, and shards are assembled from journals on
// disk. Only a single pre-token longer than a chunk (no safe cut in it: corpus.hpp) is held whole,
// at most 7 bytes per byte of it (bpe.hpp: the lean merge), and a JSONL line longer than a chunk.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ztok/corpus.hpp"
#include "ztok/progress.hpp"
#include "tok/encoding.hpp"

namespace zt::io {
class DirFlock;
}

namespace zt::ztok {

struct ZtokOptions {
  std::filesystem::path vocab_dir;   // GPT-2's directory, a tiktoken rank file or a tokenizer.json (tok/encoding.hpp)
  tok::VocabularyOptions vocabulary; // --encoding, --pattern, --special
  std::filesystem::path out_dir;
  std::vector<std::string> inputs;   // files or globs, command-line order
  CorpusOptions corpus;
  std::uint64_t shard_tokens = 100'000'000;
  double valid_fraction = 0;         // share of documents that go to valid_*.h5
  int threads = 1;                   // tokenizer threads
  bool show_progress = true;         // a progress line on stderr
  double checkpoint_seconds = 10;    // save progress at least this often (and after every shard)
  std::size_t chunk_bytes = CorpusReader::kDefaultChunkBytes;
  double timeout_s = 600;            // ranks: a peer with no heartbeat this long ends the job (heartbeat.hpp)
  // Fault injection for tests only: signal debug_kill_signal (SIGKILL; SIGTERM as a scheduler sends it)
  // to the process of rank debug_kill_rank (0 without mpirun) after that many chunks (0 = off).
  std::uint64_t debug_kill_after_chunks = 0;
  int debug_kill_rank = 0;
  int debug_kill_signal = 9;
};

struct ZtokSummary {
  std::uint64_t documents = 0, input_bytes = 0, replacements = 0;
  std::uint64_t train_tokens = 0, valid_tokens = 0, train_shards = 0, valid_shards = 0;
  double seconds = 0;
  bool resumed = false;           // continued an interrupted run
  bool already_complete = false;  // nothing to do: OUT holds this run's complete output
};

// Checks the options ztok does not leave to the parser (zt::InputError), --out included.
void check_options(const ZtokOptions& o);
// --out is a directory ztok can write (created when missing: a probe file is written and removed), or an
// InputError (exit 2) naming it, the cause and the fix, before any input is read.
void check_out_dir(const std::filesystem::path& out);
// `inputs` without ztok's own files in `out` (its shards, ztok-progress.json and their .tmp): a glob over
// --out's own directory (`ztok --out d 'd/*'`) matches them once a run has written there, and a rerun or
// resume must see the inputs the first run saw. An InputError when nothing else is left.
std::vector<std::string> inputs_outside_out(const std::vector<std::string>& inputs, const std::filesystem::path& out);
// Whether any of `inputs` lies in `out` (then the advice is to remove ztok's files, never `out`).
bool inputs_in_out(const std::vector<std::string>& inputs, const std::filesystem::path& out);

inline constexpr const char* kOutLockFile = ".ztok.lock";

// This rank's exclusive lock on --out for the whole run (io::DirFlock): OUT/.ztok.lock on rank 0 (one
// process is rank 0), OUT/.ztok.lock.N on rank N, each taken before the rank writes anything there. A
// second ztok on the same --out (a double submit, a requeue while the first still runs) is refused,
// exit 2, naming the holder, instead of mixing its journals and shards with the first's. Null (after a
// warning) where the file system has no flock.
std::unique_ptr<io::DirFlock> lock_out_dir(const std::filesystem::path& out, std::uint64_t rank);

// Everything about a run that decides its output bytes (inputs expanded, vocabulary hashed).
ZtokSettings ztok_settings(const ZtokOptions& o, const std::vector<std::string>& inputs, const std::string& vocab_hash);
ZtokSummary summary_of(const ZtokProgress& progress, std::uint64_t input_bytes);

struct TokenizedChunk;
// One segment of a tokenized chunk, routed: its split (by is_validation_document), its ids
// (<|endoftext|> included at a document's end) and its input (an index into the chunk's inputs).
struct RoutedSegment {
  bool valid, doc_start, doc_end;
  std::uint64_t file;
  std::span<const std::uint32_t> ids;
};
// Calls `sink` for each segment of `r` in order; `inputs` are the reader's (names hash the split).
void route_chunk(const TokenizedChunk& r, const std::vector<std::string>& inputs, double valid_fraction,
                 const std::function<void(const RoutedSegment&)>& sink);

// An input's name for the split: its file name without directories and without .gz/.zst, so that
// however the path is spelled (./x, an absolute path, another working directory, compressed or not) one
// corpus gives one held-out set.
std::string split_name(const std::string& source);
// Whether document `doc` of input `source` goes to the validation split: the first 8 bytes of
// SHA-256(split_name(source) + "\n" + decimal doc), read big-endian, as a fraction of 2^64, are below `fraction`.
bool is_validation_document(const std::string& source, std::uint64_t doc, double fraction);

}  // namespace zt::ztok
