// Reading a corpus for ztok: input files in order, cut into documents (a whole file, blank-line
// separated paragraphs, or JSONL records) and into chunks of about chunk_bytes for tokenizer threads.
// A long document is cut only where its pre-tokenizer (CorpusOptions::pattern) is certain to break
// (e.g. a non-space character followed by an ASCII space, or two ASCII characters of different
// classes: corpus.cpp safe_cut), so the pieces tokenize exactly as the whole would; only one
// pre-token longer than a chunk is read whole.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tok/added_tokens.hpp"
#include "tok/pattern.hpp"
#include "tok/text_rules.hpp"

namespace zt::io {
class InputStream;
}

namespace zt::ztok {

enum class InputFormat { kText, kJsonl };
enum class SplitMode { kFile, kParagraph };

struct CorpusOptions {
  InputFormat format = InputFormat::kText;
  std::string field = "text";         // jsonl: the string field holding a document
  SplitMode split = SplitMode::kFile; // text: one document per file, or per paragraph
  bool strict_utf8 = false;           // ill-formed UTF-8 is an InputError (file, byte offset), not U+FFFD
  tok::PatternKind pattern = tok::PatternKind::kGpt2;  // the pre-tokenizer, whose pieces no cut may split
  std::vector<std::string> unsplittable;  // texts no cut may fall inside: the tokenizer's added tokens
};

// A JSON Lines line as ztok reads it: its ill-formed UTF-8, and each JSON escape of a lone surrogate (a
// truncated emoji), read as U+FFFD (tiktoken's and Python's errors="replace"), into `out`. Returns how many
// were replaced (the run's summary counts them).
std::size_t repaired_jsonl_line(std::string_view line, std::string& out);
// --strict-utf8 on a JSON Lines line: an InputError naming `where` (FILE:LINE) when the line holds
// ill-formed UTF-8 or an escape of a lone surrogate (\uD800 with no \uDC00 after it: it decodes to no
// text), either of which repaired_jsonl_line would read as U+FFFD.
void refuse_ill_formed_jsonl_line(std::string_view line, const std::string& where);

// Files and globs in command-line order; each glob's matches sorted by byte value. A name without
// glob characters must exist; a glob must match at least one file. Otherwise a zt::InputError.
std::vector<std::string> expand_inputs(const std::vector<std::string>& patterns);

// Where reading stands: enough to resume exactly there.
struct InputPosition {
  std::uint64_t file = 0;    // index into the input list
  std::uint64_t offset = 0;  // byte offset in the file's (decompressed) content
  std::uint64_t doc = 0;     // index of the document at `offset` within its file
  std::uint64_t line = 1;    // jsonl: 1-based line number at `offset`
  bool mid_doc = false;      // `offset` is inside document `doc` (after a cut), not at its start
  bool operator==(const InputPosition&) const = default;
};

// Part of one document (text) or one JSONL line, bytes [begin, end) of Chunk::text.
struct Segment {
  std::uint64_t begin = 0, end = 0;
  std::uint64_t file = 0;   // input index
  std::uint64_t doc = 0;    // document index within the file
  std::uint64_t line = 0;   // jsonl: line number of the record
  std::uint64_t offset = 0; // byte offset of `begin` in the file's (decompressed) content
  bool doc_start = false;   // the document's first piece: a document offset is recorded here
  bool doc_end = false;     // its last piece: <|endoftext|> follows
};

struct Chunk {
  std::uint64_t seq = 0;         // 0, 1, 2, ... in input order
  std::string text;
  std::vector<Segment> segments;
  InputPosition end;             // position after this chunk: where a resumed run starts
  std::uint64_t file_bytes = 0;  // bytes read from the input files (compressed) so far: progress
};

class CorpusReader {
 public:
  static constexpr std::size_t kDefaultChunkBytes = std::size_t{1} << 20;

  CorpusReader(std::vector<std::string> inputs, CorpusOptions options, InputPosition start = {},
               std::size_t chunk_bytes = kDefaultChunkBytes);
  ~CorpusReader();
  const std::vector<std::string>& inputs() const { return inputs_; }

  // Each input's size when the run started (inputs()' order; empty: not checked): a file of another size
  // when it is opened (it grew or shrank since) is an InputError, as one that changes while read is.
  void expect_sizes(std::vector<std::uint64_t> bytes) { expected_bytes_ = std::move(bytes); }

  // The next chunk in input order (at least one segment); false when every input is read.
  bool next(Chunk& chunk);

 private:
  struct FileState {
    std::uint64_t bytes = 0;
    std::filesystem::file_time_type modified;
  };
  static FileState file_state(const std::string& name);
  bool open_file();  // the file at pos_.file, skipped to pos_.offset; false when none is left
  void close_file();
  void fill(std::size_t bytes);  // until `bytes` are buffered past head_, or the file ends
  std::size_t buffered() const { return buf_.size() - head_; }
  void emit(Chunk& chunk, std::size_t length, bool doc_end, std::size_t skip);
  bool next_text_piece(Chunk& chunk, std::size_t room);
  bool next_jsonl_line(Chunk& chunk);
  // Length of the document's rest if it ends within `limit` buffered bytes (and the separator's
  // length in sep), or npos.
  std::size_t document_end(std::size_t limit, std::size_t& sep);
  std::size_t safe_cut(std::size_t limit) const;
  bool splits_added_token(std::size_t cut) const;

  std::vector<std::string> inputs_;
  CorpusOptions options_;
  tok::AddedTokenMatcher unsplittable_;
  std::size_t chunk_bytes_;
  InputPosition pos_;
  std::unique_ptr<io::InputStream> stream_;
  std::string buf_;
  std::size_t head_ = 0;   // buf_[head_] is the byte at pos_.offset
  bool eof_ = false;       // the current file has no more bytes past buf_
  bool file_done_ = false; // its last document was emitted
  std::uint64_t closed_file_bytes_ = 0;
  FileState opened_;       // the current file's size and time when opened
  std::vector<std::uint64_t> expected_bytes_;
  std::uint64_t seq_ = 0;
};

}  // namespace zt::ztok
