// Shard writer over io/hdf5: fixed attribute and dataset order and whole-chunk writes, so equal
// content gives byte-identical files; written under PATH.tmp and renamed when complete.
#include "data/shard.hpp"

#include <algorithm>
#include <cerrno>
#include <optional>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "io/hdf5.hpp"

namespace zt::data {
namespace {

// Below this much free space a failed write is taken for a full file system.
constexpr std::uintmax_t kNearlyFullBytes = std::uintmax_t{4} << 20;

// A shard that could not be written: its name, the cause and the fix. HDF5's own text buries errno
// in a long line, so a full file system is also told from the free space where the shard goes.
[[noreturn]] void write_failed(const std::filesystem::path& path, const IoError& e) {
  const std::string what = e.what();
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::error_code ec;
  const std::filesystem::space_info space = std::filesystem::space(dir, ec);
  const bool full = what.find("No space left on device") != std::string::npos ||
                    what.find("Disk quota exceeded") != std::string::npos || (!ec && space.available < kNearlyFullBytes);
  if (what.find("File too large") != std::string::npos)
    throw IoError(cat("cannot write shard ", path.string(), ": a file size limit was reached (ulimit -f; ", what,
                      "); raise it or give a smaller --shard-tokens and ", kZtokResumeAdvice));
  if (!full) throw IoError(cat("cannot write shard ", path.string(), ": ", what));
  throw IoError(cat("cannot write shard ", path.string(), ": the file system is full (",
                    ec ? std::string("free space unknown") : cat(space.available, " bytes free in ", dir.string()),
                    "); nothing of this shard was kept. Free space there (or give another --out) and ", kZtokResumeAdvice));
}

}  // namespace

std::string output_write_fix(int err) {
  std::string fix;
  if (err == ENOSPC || err == EDQUOT) fix = "; free space there (or give another --out)";
  if (err == EFBIG) fix = "; a file size limit was reached (ulimit -f): raise it or give a smaller --shard-tokens";
  if (!fix.empty()) fix += cat(" and ", kZtokResumeAdvice);
  return fix;
}

// ------------------------------------------------------------------------------------------- writer

struct ShardWriter::Impl {
  io::AtomicFile atomic;
  std::optional<io::H5File> file;
  std::optional<io::H5Dataset> tokens, docs, loss_mask;
  TokenizerInfo tokenizer;
  std::uint64_t n_tokens, n_docs, tokens_done = 0, docs_done = 0, mask_done = 0;
  std::vector<std::uint8_t> mask_buffer;  // one chunk of loss_mask, written whole
  bool wide;
  std::vector<std::uint16_t> narrow_buffer;  // one chunk of tokens, written whole
  std::vector<std::uint32_t> wide_buffer;

  Impl(const std::filesystem::path& path, TokenizerInfo tok, std::uint64_t nt, std::uint64_t nd)
      : atomic(path), tokenizer(std::move(tok)), n_tokens(nt), n_docs(nd), wide(shard_ids_are_wide(tokenizer.vocab_size)) {}

  void flush_tokens() {
    const std::uint64_t n = wide ? wide_buffer.size() : narrow_buffer.size();
    if (n == 0) return;
    const std::uint64_t offset = tokens_done - n;
    if (wide) tokens->write(offset, std::span<const std::uint32_t>(wide_buffer));
    else tokens->write(offset, std::span<const std::uint16_t>(narrow_buffer));
    wide_buffer.clear();
    narrow_buffer.clear();
  }
  void flush_mask() {
    if (mask_buffer.empty()) return;
    loss_mask->write(mask_done - mask_buffer.size(), std::span<const std::uint8_t>(mask_buffer));
    mask_buffer.clear();
  }
};

ShardWriter::ShardWriter(const std::filesystem::path& path, const TokenizerInfo& tokenizer,
                         std::uint64_t n_tokens, std::uint64_t n_docs, const std::vector<std::string>& sources,
                         const InstructLayout& instruct)
    : impl_(std::make_unique<Impl>(path, tokenizer, n_tokens, n_docs)) {
  try {
    create(tokenizer, sources, instruct);
  } catch (const IoError& e) {
    write_failed(path, e);
  }
}

void ShardWriter::create(const TokenizerInfo& tokenizer, const std::vector<std::string>& sources,
                         const InstructLayout& instruct) {
  Impl& s = *impl_;
  s.file.emplace(io::H5File::create(s.atomic.tmp_path().string()));
  io::H5File& f = *s.file;
  f.set_attr("format", std::string(kShardFormat));
  f.set_attr("format_version", kShardFormatVersion);
  f.set_attr("tokenizer", tokenizer.name);
  f.set_attr("vocab_hash", tokenizer.vocab_hash);
  f.set_attr("vocab_size", tokenizer.vocab_size);
  f.set_attr("eot", tokenizer.eot);
  if (tokenizer.bos) f.set_attr("bos", *tokenizer.bos);
  if (!tokenizer.specials.empty()) f.set_attr("specials", tokenizer.specials);
  f.set_attr("n_tokens", s.n_tokens);
  f.set_attr("n_docs", s.n_docs);
  f.set_attr("sources", sources);
  if (instruct.loss_mask) f.set_attr("chat_template", instruct.chat_template);
  if (instruct.window > 0) f.set_attr("window", instruct.window);
  s.tokens.emplace(f.create_dataset("tokens", s.wide ? io::H5Type::kU32 : io::H5Type::kU16, s.n_tokens,
                                    {.chunk = kShardChunkTokens, .checksum = true}));
  s.docs.emplace(f.create_dataset("doc_offsets", io::H5Type::kU64, s.n_docs, {.chunk = 1 << 16, .checksum = true}));
  if (instruct.loss_mask)
    s.loss_mask.emplace(f.create_dataset("loss_mask", io::H5Type::kU8, s.n_tokens,
                                         {.chunk = kShardChunkTokens, .checksum = true}));
}

ShardWriter::~ShardWriter() = default;

void ShardWriter::append_tokens(std::span<const std::uint32_t> tokens) {
  try {
    append_tokens_unchecked(tokens);
  } catch (const IoError& e) {
    write_failed(impl_->atomic.path(), e);
  }
}

void ShardWriter::append_tokens_unchecked(std::span<const std::uint32_t> tokens) {
  Impl& s = *impl_;
  ZT_CHECK_LE(tokens.size(), s.n_tokens - s.tokens_done, "more tokens than declared for ", s.atomic.path().string());
  while (!tokens.empty()) {
    const std::size_t room = kShardChunkTokens - (s.tokens_done % kShardChunkTokens);
    const std::size_t take = std::min(room, tokens.size());
    for (std::uint32_t t : tokens.first(take)) {
      if (t >= s.tokenizer.vocab_size)
        throw DataError(cat("token id ", t, " >= vocab_size ", s.tokenizer.vocab_size, " for ", s.atomic.path().string()));
      if (s.wide) s.wide_buffer.push_back(t);
      else s.narrow_buffer.push_back(static_cast<std::uint16_t>(t));
    }
    s.tokens_done += take;
    tokens = tokens.subspan(take);
    if (take == room) s.flush_tokens();
  }
}

void ShardWriter::append_doc_offsets(std::span<const std::uint64_t> offsets) {
  Impl& s = *impl_;
  ZT_CHECK_LE(offsets.size(), s.n_docs - s.docs_done, "more documents than declared for ", s.atomic.path().string());
  try {
    s.docs->write(s.docs_done, offsets);
  } catch (const IoError& e) {
    write_failed(s.atomic.path(), e);
  }
  s.docs_done += offsets.size();
}

void ShardWriter::append_loss_mask(std::span<const std::uint8_t> mask) {
  Impl& s = *impl_;
  ZT_CHECK(s.loss_mask.has_value(), "append_loss_mask: ", s.atomic.path().string(), " was not made an instruction shard");
  ZT_CHECK_LE(mask.size(), s.n_tokens - s.mask_done, "more loss_mask values than tokens for ", s.atomic.path().string());
  try {
    for (const std::uint8_t m : mask) {
      ZT_CHECK_LE(m, 1, "loss_mask values are 0 or 1");
      s.mask_buffer.push_back(m);
      if (++s.mask_done % kShardChunkTokens == 0) s.flush_mask();
    }
  } catch (const IoError& e) {
    write_failed(s.atomic.path(), e);
  }
}

void ShardWriter::commit() {
  Impl& s = *impl_;
  if (s.loss_mask) ZT_CHECK_EQ(s.mask_done, s.n_tokens, "loss_mask values appended to ", s.atomic.path().string());
  ZT_CHECK_EQ(s.tokens_done, s.n_tokens, "tokens appended to ", s.atomic.path().string());
  ZT_CHECK_EQ(s.docs_done, s.n_docs, "document offsets appended to ", s.atomic.path().string());
  try {
    s.flush_tokens();
    if (s.loss_mask) s.flush_mask();
    s.loss_mask.reset();
    s.tokens.reset();
    s.docs.reset();
    s.file->close();  // where HDF5 writes its metadata: the usual place to meet a full disk
    s.file.reset();
    s.atomic.commit();
  } catch (const IoError& e) {
    write_failed(s.atomic.path(), e);
  }
}

}  // namespace zt::data
