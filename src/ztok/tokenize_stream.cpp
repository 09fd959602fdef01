// The ordered tokenization pipeline. One mutex guards the queues; every wait is on changed_, and
// every state change notifies all (few threads, coarse chunks: contention is negligible).
#include "ztok/tokenize_stream.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cstdio>
#include <optional>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "io/input_stream.hpp"
#include "tok/utf8.hpp"

namespace zt::ztok {
namespace {

// JSONL: the document text of one line (the line's ill-formed UTF-8 is replaced first).
std::string jsonl_text(std::string_view line, const std::string& field, const std::string& where, bool strict_utf8,
                       std::uint64_t& replacements) {
  if (strict_utf8) refuse_ill_formed_jsonl_line(line, where);
  std::string repaired;
  replacements += repaired_jsonl_line(line, repaired);
  nlohmann::json record;
  try {
    record = nlohmann::json::parse(repaired);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(cat(where, ": not valid JSON (", e.what(), ")"));
  }
  if (!record.is_object())
    throw InputError(cat(where, ": a JSON ", record.type_name(), ", not an object: each line must be an object holding the "
                         "text in field \"", field, "\""));
  const auto it = record.find(field);
  if (it == record.end())
    throw InputError(cat(where, ": no field \"", field, "\" (choose the text field with --field NAME)"));
  if (!it->is_string()) throw InputError(cat(where, ": field \"", field, "\" is not a string"));
  return it->get<std::string>();
}

// --strict-utf8: the first ill-formed byte stops the run (exit 2) with its file and offset.
void refuse_invalid_utf8(std::string_view text, const std::string& file, std::uint64_t offset) {
  const std::size_t bad = tok::first_invalid_utf8(text);
  if (bad == text.size()) return;
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[bad]));
  throw InputError(cat(file, ": not valid UTF-8 at byte offset ", offset + bad, " (byte ", byte,
                       "); --strict-utf8 refuses it: convert the file to UTF-8 (e.g. iconv -f LATIN1 -t UTF-8), "
                       "remove it if it is binary, or leave out --strict-utf8 to replace ill-formed bytes by U+FFFD"));
}

// A compressed input's damage shows only when its checksum is read at the end of the member, after the
// garbage before it was taken for a bad JSON line or bad UTF-8: on such an error in a .gz/.zst input, the
// file is read to its end (io::read_to_end), and a damaged one is reported as that (outside sweep 27 F5).
std::optional<std::exception_ptr> damaged_input_error(const std::vector<std::string>& inputs, const Chunk& chunk) {
  std::set<std::uint64_t> checked;
  for (const Segment& s : chunk.segments) {
    const std::string& file = inputs[s.file];
    if (!checked.insert(s.file).second) continue;
    try {
      io::read_to_end(*io::InputStream::open(file));
    } catch (const Error&) {  // IoError (unreadable), InputError (not valid gzip / zstd)
      return std::current_exception();
    }
  }
  return std::nullopt;
}

}  // namespace

data::TokenizerInfo shard_tokenizer_info(const tok::Tokenizer& tokenizer) {
  data::TokenizerInfo info{tokenizer.name(), tokenizer.vocab().hash(), tokenizer.vocab().size(), tokenizer.eot(), {}};
  if (tokenizer.bos() != tok::Vocab::kNone) info.bos = tokenizer.bos();
  return info;
}

CorpusOptions cutting_safely_for(CorpusOptions options, const tok::Tokenizer& tokenizer) {
  options.pattern = tokenizer.pattern().kind;
  options.unsplittable.clear();
  const tok::TextRules& rules = tokenizer.rules();
  for (const auto* list : {&rules.raw_added, &rules.normalized_added})
    for (const tok::AddedTokenMatcher::Token& t : *list) options.unsplittable.push_back(t.text);
  return options;
}

void tokenize_chunk(tok::Encoder& encoder, const tok::Tokenizer& tokenizer, const CorpusOptions& options,
                    const std::vector<std::string>& inputs, Chunk&& chunk, TokenizedChunk& out) {
  out.tokens.clear();
  out.token_end.clear();
  out.replaced_bytes.clear();
  out.replacements = 0;
  out.error = nullptr;
  try {
    for (const Segment& s : chunk.segments) {
      const std::string_view text = std::string_view(chunk.text).substr(s.begin, s.end - s.begin);
      if (options.strict_utf8) refuse_invalid_utf8(text, inputs[s.file], s.offset);
      const std::uint64_t before = out.replacements;
      if (s.doc_start && tokenizer.bos() != tok::Vocab::kNone) out.tokens.push_back(tokenizer.bos());
      if (options.format == InputFormat::kJsonl) {
        const std::string where = cat(inputs[s.file], ":", s.line);
        out.replacements += encoder.encode(jsonl_text(text, options.field, where, options.strict_utf8, out.replacements), out.tokens);
      } else {
        out.replacements += encoder.encode(text, out.tokens);
      }
      out.replaced_bytes.push_back(out.replacements == before ? 0 : tok::invalid_utf8_bytes(text));
      if (s.doc_end) out.tokens.push_back(tokenizer.eot());
      out.token_end.push_back(out.tokens.size());
    }
  } catch (const InputError&) {
    out.error = damaged_input_error(inputs, chunk).value_or(std::current_exception());
  } catch (...) {
    out.error = std::current_exception();
  }
  chunk.text.clear();
  chunk.text.shrink_to_fit();
  out.chunk = std::move(chunk);
}

void return_freed_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

TokenizeStream::TokenizeStream(const tok::Tokenizer& tokenizer, CorpusReader& reader, const CorpusOptions& options,
                               int threads, std::size_t max_in_flight)
    : tokenizer_(tokenizer), reader_(reader), options_(options), max_in_flight_(std::max<std::size_t>(max_in_flight, 1)) {
  ZT_CHECK_GE(threads, 1);
  threads_.emplace_back(&TokenizeStream::read_loop, this);
  for (int i = 0; i < threads; ++i) threads_.emplace_back(&TokenizeStream::work_loop, this);
}

TokenizeStream::~TokenizeStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void TokenizeStream::read_loop() {
  try {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || produced_ - consumed_ < max_in_flight_; });
        if (stop_) return;
      }
      Chunk chunk;  // read outside the lock
      if (!reader_.next(chunk)) break;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        todo_.push_back(std::move(chunk));
        ++produced_;
      }
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    read_error_ = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reading_done_ = true;
  }
  changed_.notify_all();
}

void TokenizeStream::work_loop() {
  tok::Encoder encoder(tokenizer_);
  for (;;) {
    Chunk chunk;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || !todo_.empty() || reading_done_; });
      if (stop_ || (todo_.empty() && reading_done_)) return;
      chunk = std::move(todo_.front());
      todo_.pop_front();
    }
    TokenizedChunk result;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!spare_.empty()) {
        result = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    const std::uint64_t seq = chunk.seq;
    tokenize_chunk(encoder, tokenizer_, options_, reader_.inputs(), std::move(chunk), result);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.emplace(seq, std::move(result));
    }
    changed_.notify_all();
  }
}

bool TokenizeStream::next(TokenizedChunk& out) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return done_.count(consumed_) > 0 || (reading_done_ && consumed_ == produced_); });
  const auto it = done_.find(consumed_);
  if (it == done_.end()) {  // everything produced was consumed and the reader stopped
    if (read_error_) std::rethrow_exception(read_error_);
    return false;
  }
  if (out.tokens.capacity() > 0 && out.tokens.capacity() <= kSpareIds) spare_.push_back(std::move(out));
  out = std::move(it->second);
  done_.erase(it);
  ++consumed_;
  lock.unlock();
  changed_.notify_all();
  if (out.error) std::rethrow_exception(out.error);
  return true;
}

}  // namespace zt::ztok
