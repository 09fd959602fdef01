// Corpus reading: glob expansion, per-file streaming with resume offsets, document boundaries
// (file, paragraph, JSONL line) and safe cuts inside long documents.
#include "ztok/corpus.hpp"

#include <glob.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "io/input_stream.hpp"
#include "io/json_text.hpp"
#include "tok/unicode.hpp"
#include "tok/utf8.hpp"

namespace zt::ztok {
namespace {

constexpr std::size_t kNone = std::string::npos;
constexpr std::size_t kReadBytes = std::size_t{1} << 20;

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

// The classes of an ASCII byte that is not white space: letter, digit, anything else.
constexpr int kAsciiOther = 0, kAsciiLetter = 1, kAsciiDigit = 2;
int ascii_class(unsigned char c) {
  if (static_cast<unsigned char>((c | 0x20) - 'a') < 26) return kAsciiLetter;
  return c >= '0' && c <= '9' ? kAsciiDigit : kAsciiOther;
}

// Whether a well-formed character that is not White_Space ends at byte c (c >= 1). Its lead byte is
// the nearest byte before c that is no continuation byte; no ill-formed subpart can include a lead
// byte it does not start, so the character decodes the same whether or not the text is cut at c.
bool nonspace_char_ends_at(const char* text, std::size_t c) {
  const auto* p = reinterpret_cast<const unsigned char*>(text);
  std::size_t k = 1;
  while (k < 4 && k < c && (p[c - k] & 0xC0) == 0x80) ++k;
  if (tok::first_invalid_utf8(std::string_view(text + c - k, k)) != k) return false;
  std::size_t length = 0;
  const char32_t cp = tok::decode_valid_utf8(p + c - k, length);
  return length == k && !tok::is_white_space(cp);
}

std::vector<std::string> glob_files(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g);
  std::vector<std::string> files;
  // Directories are skipped (a glob such as data/* may match some); anything else that is no regular file
  // (a link to storage not mounted, a FIFO, a device) is refused naming it, as the same path given
  // directly is: a corpus must not shrink silently.
  std::string refused;
  if (rc == 0) {
    for (std::size_t i = 0; i < g.gl_pathc && refused.empty(); ++i) {
      std::error_code ec;
      const std::filesystem::file_status status = std::filesystem::status(g.gl_pathv[i], ec);
      if (std::filesystem::is_regular_file(status)) files.emplace_back(g.gl_pathv[i]);
      else if (!std::filesystem::is_directory(status)) refused = g.gl_pathv[i];
    }
  }
  globfree(&g);
  if (!refused.empty())
    throw InputError(cat("input pattern ", pattern, " matches ", refused, ", which ",
                         std::filesystem::is_symlink(refused) ? "is a link to nothing (storage not mounted?)" : "is not a regular file",
                         ": fix or remove it, or narrow the pattern"));
  if (rc != 0 && rc != GLOB_NOMATCH) throw InputError(cat("cannot expand input pattern ", pattern));
  std::sort(files.begin(), files.end());  // std::string compares as unsigned bytes
  return files;
}

}  // namespace

std::size_t repaired_jsonl_line(std::string_view line, std::string& out) {
  out.clear();
  const std::size_t replaced = tok::append_replacing_invalid(line, out);
  return replaced + io::replace_lone_surrogate_escapes(out);
}

void refuse_ill_formed_jsonl_line(std::string_view line, const std::string& where) {
  const char* const fix = "; --strict-utf8 refuses it: fix the record, or leave out --strict-utf8 to read it as U+FFFD";
  if (const std::size_t bad = tok::first_invalid_utf8(line); bad < line.size()) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(line[bad]));
    throw InputError(cat(where, ": not valid UTF-8 at byte ", bad, " of the line (byte ", byte, ")", fix));
  }
  std::string copy(line);
  if (io::replace_lone_surrogate_escapes(copy) > 0)
    throw InputError(cat(where, ": a \\uD800-\\uDFFF escape that is not half of a surrogate pair (it decodes to no text)", fix));
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& patterns) {
  std::vector<std::string> inputs;
  for (const std::string& p : patterns) {
    if (p.find_first_of("*?[") == std::string::npos) {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(p, ec))
        throw InputError(cat("input ", p, " does not exist or is not a regular file"));
      inputs.push_back(p);
      continue;
    }
    std::vector<std::string> matches = glob_files(p);
    std::error_code ec;
    if (matches.empty() && std::filesystem::is_regular_file(p, ec)) matches = {p};  // a name with [ ] in it, as bash takes it
    if (matches.empty())
      throw InputError(cat("input pattern ", p, " matches no file (a name with *, ? or [ in it: escape them as \\*, \\? and \\[)"));
    inputs.insert(inputs.end(), matches.begin(), matches.end());
  }
  return inputs;
}

CorpusReader::CorpusReader(std::vector<std::string> inputs, CorpusOptions options, InputPosition start,
                           std::size_t chunk_bytes)
    : inputs_(std::move(inputs)), options_(std::move(options)), chunk_bytes_(chunk_bytes), pos_(start) {
  std::vector<tok::AddedTokenMatcher::Token> tokens;
  for (const std::string& text : options_.unsplittable)
    if (!text.empty()) tokens.push_back({text, 0});
  unsplittable_ = tok::AddedTokenMatcher(std::move(tokens));
}

CorpusReader::~CorpusReader() = default;

CorpusReader::FileState CorpusReader::file_state(const std::string& name) {
  std::error_code ec;
  FileState state;
  state.bytes = std::filesystem::file_size(name, ec);
  if (ec) state.bytes = 0;
  state.modified = std::filesystem::last_write_time(name, ec);
  return state;
}

bool CorpusReader::open_file() {
  if (pos_.file >= inputs_.size()) return false;
  const std::string& name = inputs_[pos_.file];
  stream_ = io::InputStream::open(name);
  opened_ = file_state(name);
  if (pos_.file < expected_bytes_.size() && opened_.bytes != expected_bytes_[pos_.file])
    throw InputError(cat("input ", name, " changed since the run started (", expected_bytes_[pos_.file], " bytes then, ",
                         opened_.bytes, " now): wait until it is complete, then run ztok again into a new --out directory"));
  buf_.clear();
  head_ = 0;
  eof_ = false;
  file_done_ = false;
  for (std::uint64_t skipped = 0; skipped < pos_.offset;) {  // resume: skip what was read before
    buf_.resize(std::min<std::uint64_t>(kReadBytes, pos_.offset - skipped));
    const std::size_t n = stream_->read(buf_.data(), buf_.size());
    if (n == 0)
      throw InputError(cat("input ", name, " is shorter than when the interrupted run read it (", pos_.offset,
                           " bytes): it changed; start over with a new --out directory"));
    skipped += n;
  }
  buf_.clear();
  // One document per file: a position past its start, not inside it, is past it (saved at the file's
  // end by ztok before the position moved on to the next file's start).
  file_done_ = options_.format == InputFormat::kText && options_.split == SplitMode::kFile && pos_.offset > 0 &&
               !pos_.mid_doc;
  return true;
}

void CorpusReader::close_file() {
  // A file written or truncated while it was read (a producer still writing, an rsync in progress) gave
  // other bytes than the size and time recorded for it: refused, not recorded as tokenized.
  const std::string& name = inputs_[pos_.file];
  const FileState now = file_state(name);
  if (now.bytes != opened_.bytes || now.modified != opened_.modified || stream_->file_bytes_read() != opened_.bytes)
    throw InputError(cat("input ", name, " changed while ztok read it (", opened_.bytes, " bytes when opened, ",
                         stream_->file_bytes_read(), " read, ", now.bytes, " now", now.modified != opened_.modified ? ", modified since" : "",
                         "): wait until it is complete, then run ztok again into a new --out directory"));
  closed_file_bytes_ += stream_->file_bytes_read();
  stream_.reset();
  buf_.clear();
  // The next file reuses the buffer (a fresh one per file churned 1 MiB through malloc, whose thread
  // arenas kept the fragments: peak RSS grew with the input); one a huge piece grew is given back.
  if (buf_.capacity() > 16 * kReadBytes) buf_.shrink_to_fit();
  head_ = 0;
  pos_ = InputPosition{pos_.file + 1, 0, 0, 1, false};
}

void CorpusReader::fill(std::size_t bytes) {
  while (buffered() < bytes && !eof_) {
    if (head_ >= kReadBytes && head_ * 2 >= buf_.size()) {  // drop consumed bytes (offsets are relative to head_)
      buf_.erase(0, head_);
      head_ = 0;
      // A huge piece grew the buffer: give it back rather than keep it for the rest of the file.
      if (buf_.capacity() > 16 * kReadBytes && buf_.size() * 4 < buf_.capacity()) buf_.shrink_to_fit();
    }
    // Read in steps: resize() writes every byte it adds, so a step past the file's end would cost memory.
    const std::size_t want = std::clamp(bytes - buffered(), kReadBytes, 16 * kReadBytes);
    const std::size_t old = buf_.size();
    buf_.resize(old + want);
    const std::size_t n = stream_->read(buf_.data() + old, want);
    buf_.resize(old + n);
    eof_ = n == 0;
  }
}

bool CorpusReader::next(Chunk& chunk) {
  chunk.text.clear();
  chunk.text.reserve(chunk_bytes_);  // one allocation of the usual size, not a doubling series per chunk
  chunk.segments.clear();
  while (chunk.text.size() < chunk_bytes_) {
    if (!stream_ && !open_file()) break;
    const bool more = options_.format == InputFormat::kJsonl
                          ? next_jsonl_line(chunk)
                          : next_text_piece(chunk, chunk_bytes_ - chunk.text.size());
    if (!more) close_file();
  }
  // A file whose last document is out ends here: the position is the next file's start. Left at the
  // file's end, a resume would read one more (empty) document there.
  if (stream_ && file_done_) close_file();
  if (chunk.segments.empty()) return false;
  chunk.seq = seq_++;
  chunk.end = pos_;
  chunk.file_bytes = closed_file_bytes_ + (stream_ ? stream_->file_bytes_read() : 0);
  return true;
}

void CorpusReader::emit(Chunk& chunk, std::size_t length, bool doc_end, std::size_t skip) {
  Segment s;
  s.begin = chunk.text.size();
  s.end = s.begin + length;
  s.file = pos_.file;
  s.doc = pos_.doc;
  s.line = pos_.line;
  s.offset = pos_.offset;
  s.doc_start = !pos_.mid_doc;
  s.doc_end = doc_end;
  chunk.text.append(buf_, head_, length);
  chunk.segments.push_back(s);
  head_ += length + skip;
  pos_.offset += length + skip;
  pos_.mid_doc = !doc_end;
  if (doc_end) ++pos_.doc;
}

// Text: the rest of the current document if it ends within `room` bytes, else a piece of it that
// ends at a safe cut (the window grows when there is none: a pre-token is never split).
bool CorpusReader::next_text_piece(Chunk& chunk, std::size_t room) {
  if (file_done_) return false;
  // A piece shorter than a quarter chunk would make many small segments: take at least that much.
  for (std::size_t limit = std::max<std::size_t>(room, std::max<std::size_t>(chunk_bytes_ / 4, 16));; limit *= 2) {
    fill(limit + 1);
    std::size_t sep = 0;
    const std::size_t length = document_end(limit, sep);
    if (length != kNone) {
      emit(chunk, length, true, sep);
      file_done_ = sep == 0;  // ended by the end of the file, not by a separator
      return true;
    }
    const std::size_t cut = safe_cut(limit);
    if (cut != kNone) {
      emit(chunk, cut, false, 0);
      return true;
    }
  }
}

std::size_t CorpusReader::document_end(std::size_t limit, std::size_t& sep) {
  if (options_.split == SplitMode::kParagraph) {
    // The separator of tiktoken-encode.mjs: /\n[ \t]*\n/ (a CR breaks it: "\r\n\r\n" is no cut).
    for (std::size_t k = 0; k < std::min(limit, buffered()); ++k) {
      const char* nl = static_cast<const char*>(std::memchr(buf_.data() + head_ + k, '\n', std::min(limit, buffered()) - k));
      if (nl == nullptr) break;
      k = static_cast<std::size_t>(nl - (buf_.data() + head_));
      std::size_t j = k + 1;
      for (;;) {
        while (j < buffered() && (buf_[head_ + j] == ' ' || buf_[head_ + j] == '\t')) ++j;
        if (j < buffered() || eof_) break;
        fill(j + kReadBytes);  // a run of blanks reaches past the buffer: read on to decide
      }
      if (j < buffered() && buf_[head_ + j] == '\n') {
        sep = j + 1 - k;
        return k;
      }
    }
  }
  if (eof_ && buffered() <= limit) {
    sep = 0;
    return buffered();
  }
  return kNone;
}

// GPT-2: (a) byte c is an ASCII space and a non-space character ends at c (a piece never holds a
// non-space followed by white space), or (b) bytes c-1 and c are ASCII non-space of different classes
// (letter, digit, other) and c-1 is no apostrophe, which may begin a contraction ('s): runs of one
// class end there.
static bool gpt2_cuts(const char* p, std::size_t c) {
  const auto at = static_cast<unsigned char>(p[c]), before = static_cast<unsigned char>(p[c - 1]);
  if (is_ascii_space(p[c])) return nonspace_char_ends_at(p, c);
  return at < 0x80 && before < 0x80 && before != '\'' && !is_ascii_space(p[c - 1]) &&
         ascii_class(at) != ascii_class(before);
}

// cl100k and o200k, where punctuation takes the line breaks after it ([\r\n]*, o200k [\r\n/]*), an
// "other" character or white space but a line break may lead a word, and o200k's words take their
// contraction: (a) byte c is an ASCII space but no line break, after a non-space character; (b) byte c
// is a line break after an ASCII letter or digit; (c) byte c-1 is a line break and c is ASCII
// non-space but '/' (white space with a line break ends after its last one); (d) bytes c-1 and c are
// ASCII non-space of different classes, neither an apostrophe, and not "other" before a letter.
static bool cl100k_o200k_cuts(const char* p, std::size_t c) {
  const auto at = static_cast<unsigned char>(p[c]), before = static_cast<unsigned char>(p[c - 1]);
  const bool at_break = at == '\r' || at == '\n';
  if (at_break) return before < 0x80 && ascii_class(before) != kAsciiOther && !is_ascii_space(p[c - 1]);
  if (is_ascii_space(p[c])) return nonspace_char_ends_at(p, c);
  if (at >= 0x80 || at == '/') return false;
  if (before == '\r' || before == '\n') return true;
  if (before >= 0x80 || is_ascii_space(p[c - 1]) || before == '\'' || at == '\'') return false;
  const int b = ascii_class(before), a = ascii_class(at);
  return b != a && !(b == kAsciiOther && a == kAsciiLetter);
}

// Largest c <= limit where no piece of the pattern can span the cut, judged from the bytes around it
// alone, and no added token (options_.unsplittable) spans it, or npos. Both sides of such a cut decode and pre-tokenize exactly as the whole does.
std::size_t CorpusReader::safe_cut(std::size_t limit) const {
  const char* p = buf_.data() + head_;
  const bool gpt2 = options_.pattern == tok::PatternKind::kGpt2;
  for (std::size_t c = std::min(limit, buffered() - 1); c >= 1 && c != kNone; --c)
    if ((gpt2 ? gpt2_cuts(p, c) : cl100k_o200k_cuts(p, c)) && !splits_added_token(c)) return c;
  return kNone;
}

// Added tokens are matched before pre-tokenisation: a cut inside one would lose the match.
bool CorpusReader::splits_added_token(std::size_t cut) const {
  return !unsplittable_.empty() && unsplittable_.spans(std::string_view(buf_).substr(head_), cut);
}

// JSONL: the next non-blank line, whole (its JSON is parsed by the tokenizer threads).
bool CorpusReader::next_jsonl_line(Chunk& chunk) {
  for (;;) {
    std::size_t scanned = 0, length = kNone, sep = 1;
    while (length == kNone) {
      const char* nl = static_cast<const char*>(std::memchr(buf_.data() + head_ + scanned, '\n', buffered() - scanned));
      if (nl != nullptr) {
        length = static_cast<std::size_t>(nl - (buf_.data() + head_));
      } else if (eof_) {
        if (buffered() == 0) return false;
        length = buffered();
        sep = 0;
      } else {
        scanned = buffered();
        fill(buffered() + kReadBytes);
      }
    }
    const bool blank = std::all_of(buf_.begin() + static_cast<std::ptrdiff_t>(head_),
                                   buf_.begin() + static_cast<std::ptrdiff_t>(head_ + length), is_ascii_space);
    if (blank) {
      head_ += length + sep;
      pos_.offset += length + sep;
    } else {
      emit(chunk, length, true, sep);
    }
    ++pos_.line;
    if (!blank) return true;
  }
}

}  // namespace zt::ztok
