// Journal-backed shard splitting: ids go to OUT/.ztok/<split>_NNNNNN.tokens (uint16 or uint32, as
// the shard stores them) and document offsets to ...docs (uint64), both little-endian; a complete
// journal becomes OUT/<split>_NNNNNN.h5 through ShardWriter.
#include "ztok/shard_stream.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <type_traits>

#include "core/error.hpp"

namespace zt::ztok {
namespace {

// Journal entries per read when a shard is written: 64Ki (512 KiB of document offsets) keeps the
// buffers small beside the tokenizer's memory; 1Mi cost 16 MiB, the run's peak RSS.
constexpr std::size_t kBlock = std::size_t{1} << 16;

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path) {
  const int err = errno;
  throw IoError(cat(what, " ", path.string(), ": ", std::strerror(err), data::output_write_fix(err)));
}

void write_bytes(std::FILE* f, const void* data, std::size_t bytes, const std::filesystem::path& path) {
  if (bytes > 0 && std::fwrite(data, 1, bytes, f) != bytes) fail("cannot write journal", path);
}

std::string numbered(const std::string& prefix, std::uint64_t index) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%06llu", static_cast<unsigned long long>(index));
  return prefix + "_" + digits;
}

// Streams `count` elements of type T from a journal into `sink` in blocks (as uint32 / uint64).
template <typename T, typename Out, typename Sink>
void replay(const std::filesystem::path& path, std::uint64_t count, Sink&& sink) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail("cannot reopen journal", path);
  const std::size_t block = static_cast<std::size_t>(std::min<std::uint64_t>(kBlock, count));
  std::vector<T> raw(block);
  std::vector<Out> wide(std::is_same_v<T, Out> ? 0 : block);
  for (std::uint64_t done = 0; done < count;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(block, count - done));
    if (std::fread(raw.data(), sizeof(T), n, f) != n) {
      std::fclose(f);
      throw IoError(cat("journal ", path.string(), " holds fewer than ", count, " entries"));
    }
    if constexpr (std::is_same_v<T, Out>) {
      sink(std::span<const Out>(raw.data(), n));
    } else {
      std::copy(raw.begin(), raw.begin() + static_cast<std::ptrdiff_t>(n), wide.begin());
      sink(std::span<const Out>(wide.data(), n));
    }
    done += n;
  }
  std::fclose(f);
}

}  // namespace

std::string shard_file_name(const std::string& prefix, std::uint64_t index) { return numbered(prefix, index) + ".h5"; }

ShardStream::ShardStream(std::filesystem::path dir, std::string prefix, data::TokenizerInfo tokenizer,
                         std::uint64_t shard_tokens, const State& resume)
    : dir_(std::move(dir)), prefix_(std::move(prefix)), tokenizer_(std::move(tokenizer)), shard_tokens_(shard_tokens),
      wide_(data::shard_ids_are_wide(tokenizer_.vocab_size)), state_(resume) {
  ZT_CHECK_GT(shard_tokens_, 0u);
  std::filesystem::create_directories(dir_ / ".ztok");
  for (std::uint64_t old = 0; old < state_.shard; ++old)  // left behind by a run killed before saved()
    for (const char* kind : {"tokens", "docs"}) std::filesystem::remove(journal_path(old, kind));
  open_journal(true);
}

ShardStream::~ShardStream() { close_journal(); }

std::filesystem::path ShardStream::shard_path(std::uint64_t index) const {
  return dir_ / shard_file_name(prefix_, index);
}

std::filesystem::path ShardStream::journal_path(std::uint64_t index, const char* kind) const {
  return dir_ / ".ztok" / (numbered(prefix_, index) + "." + kind);
}

void ShardStream::open_journal(bool truncate_to_state) {
  const std::uint64_t bytes[2] = {state_.tokens * (wide_ ? 4 : 2), state_.docs * 8};
  std::FILE** files[2] = {&tokens_, &docs_};
  const char* kinds[2] = {"tokens", "docs"};
  for (int i = 0; i < 2; ++i) {
    const std::filesystem::path path = journal_path(state_.shard, kinds[i]);
    const bool keep = truncate_to_state && (state_.tokens > 0 || state_.docs > 0);
    if (keep) {
      std::error_code ec;
      const auto size = std::filesystem::file_size(path, ec);
      if (ec || size < bytes[i])
        throw InputError(cat("journal ", path.string(), " is shorter than ztok-progress.json says (", bytes[i],
                             " bytes): the output directory was damaged; start over in an empty --out"));
      std::filesystem::resize_file(path, bytes[i]);
    }
    *files[i] = std::fopen(path.c_str(), keep ? "ab" : "wb");
    if (*files[i] == nullptr) fail("cannot open journal", path);
  }
}

void ShardStream::close_journal() {
  for (std::FILE** f : {&tokens_, &docs_}) {
    if (*f) std::fclose(*f);
    *f = nullptr;
  }
}

void ShardStream::begin_document() { pending_doc_ = true; }

void ShardStream::append(std::span<const std::uint32_t> ids, const std::string& source) {
  while (!ids.empty()) {
    if (pending_doc_) {
      const std::uint64_t offset = state_.tokens;
      write_bytes(docs_, &offset, sizeof offset, journal_path(state_.shard, "docs"));
      ++state_.docs;
      ++state_.total_docs;
      pending_doc_ = false;
    }
    if (state_.sources.empty() || state_.sources.back() != source) state_.sources.push_back(source);
    const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(ids.size(), shard_tokens_ - state_.tokens));
    if (wide_) {
      write_bytes(tokens_, ids.data(), take * 4, journal_path(state_.shard, "tokens"));
    } else {
      narrow_.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(take));
      write_bytes(tokens_, narrow_.data(), take * 2, journal_path(state_.shard, "tokens"));
    }
    state_.tokens += take;
    state_.total_tokens += take;
    ids = ids.subspan(take);
    if (state_.tokens == shard_tokens_) complete_shard();
  }
}

void ShardStream::complete_shard() {
  if (std::fflush(tokens_) != 0 || std::fflush(docs_) != 0) fail("cannot write journal of", shard_path(state_.shard));
  data::ShardWriter writer(shard_path(state_.shard), tokenizer_, state_.tokens, state_.docs, state_.sources);
  auto tokens = [&](std::span<const std::uint32_t> block) { writer.append_tokens(block); };
  if (wide_) replay<std::uint32_t, std::uint32_t>(journal_path(state_.shard, "tokens"), state_.tokens, tokens);
  else replay<std::uint16_t, std::uint32_t>(journal_path(state_.shard, "tokens"), state_.tokens, tokens);
  replay<std::uint64_t, std::uint64_t>(journal_path(state_.shard, "docs"), state_.docs,
                                       [&](std::span<const std::uint64_t> block) { writer.append_doc_offsets(block); });
  writer.commit();
  close_journal();
  obsolete_.push_back(state_.shard);
  ++state_.shard;
  state_.tokens = state_.docs = 0;
  state_.sources.clear();
  open_journal(false);
}

void ShardStream::finish() {
  ZT_CHECK(!pending_doc_, "a document was begun but received no ids");
  if (state_.tokens > 0) complete_shard();
  close_journal();
  obsolete_.push_back(state_.shard);  // the empty journal of the shard that never came
}

ShardStream::State ShardStream::sync() {
  ZT_CHECK(!pending_doc_, "a document was begun but received no ids");
  for (std::FILE* f : {tokens_, docs_}) {
    if (f && (std::fflush(f) != 0 || ::fsync(::fileno(f)) != 0)) fail("cannot sync journal of", shard_path(state_.shard));
  }
  return state_;
}

void ShardStream::saved() {
  for (std::uint64_t index : obsolete_)
    for (const char* kind : {"tokens", "docs"}) std::filesystem::remove(journal_path(index, kind));
  obsolete_.clear();
}

}  // namespace zt::ztok
