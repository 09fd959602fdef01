// Parallel tokenization in input order: a reader thread cuts the corpus into chunks, worker threads
// tokenize them, and next() hands the results back strictly in input order. The ids therefore do not
// depend on the number of threads, and at most `max_in_flight` chunks exist at once (bounded memory).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "ztok/corpus.hpp"
#include "data/shard.hpp"
#include "tok/tokenizer.hpp"

namespace zt::ztok {

struct TokenizedChunk {
  Chunk chunk;                          // its segments and end position (text already released)
  std::vector<std::uint32_t> tokens;    // all segments' ids: the tokenizer's BOS (if any) before each document,
                                        // its end-of-text id after each document's end
  std::vector<std::uint64_t> token_end; // per segment: end of its ids in `tokens`
  std::uint64_t replacements = 0;       // U+FFFD substitutions for ill-formed UTF-8
  std::vector<std::uint64_t> replaced_bytes;  // per segment: bytes of it that were ill-formed UTF-8
  std::exception_ptr error;             // this chunk failed (e.g. a bad JSONL line): raised in order
};

// What the shards written with `tokenizer` record about it.
data::TokenizerInfo shard_tokenizer_info(const tok::Tokenizer& tokenizer);
// `options` for reading text `tokenizer` encodes: long documents are cut only where no piece of its
// pattern and none of its added tokens can span the cut.
CorpusOptions cutting_safely_for(CorpusOptions options, const tok::Tokenizer& tokenizer);

// Tokenizes one chunk (what a worker does); errors are stored in the result, not thrown.
void tokenize_chunk(tok::Encoder& encoder, const tok::Tokenizer& tokenizer, const CorpusOptions& options,
                    const std::vector<std::string>& inputs, Chunk&& chunk, TokenizedChunk& out);

// Gives the pages that a finished TokenizeStream freed back to the system: its threads' malloc arenas
// keep them (glibc; elsewhere a no-op), and the shard writing that follows would stack on them.
void return_freed_memory();

class TokenizeStream {
 public:
  // `reader` must outlive the stream. threads >= 1 tokenizer threads.
  TokenizeStream(const tok::Tokenizer& tokenizer, CorpusReader& reader, const CorpusOptions& options,
                 int threads, std::size_t max_in_flight);
  ~TokenizeStream();  // stops and joins every thread
  TokenizeStream(const TokenizeStream&) = delete;
  TokenizeStream& operator=(const TokenizeStream&) = delete;

  // The next chunk's result in input order; false after the last. Rethrows a reader or chunk error
  // at the place in the order where it happened.
  bool next(TokenizedChunk& out);

 private:
  void read_loop();
  void work_loop();

  const tok::Tokenizer& tokenizer_;
  CorpusReader& reader_;
  CorpusOptions options_;
  std::size_t max_in_flight_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Chunk> todo_;                            // read, waiting for a worker (oldest first)
  std::map<std::uint64_t, TokenizedChunk> done_;      // tokenized, waiting for next()
  // Results next() replaced, whose buffers the workers reuse: a fresh id vector per chunk, grown by
  // doubling on one thread and freed on another, left fragments in malloc's thread arenas that made
  // the peak RSS grow with the input. Buffers above kSpareIds ids (a huge piece's) are freed.
  static constexpr std::size_t kSpareIds = std::size_t{1} << 21;
  std::vector<TokenizedChunk> spare_;
  std::uint64_t produced_ = 0, consumed_ = 0;
  bool reading_done_ = false, stop_ = false;
  std::exception_ptr read_error_;
  std::vector<std::thread> threads_;
};

}  // namespace zt::ztok
