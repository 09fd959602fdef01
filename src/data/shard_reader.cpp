// Shard reader: validates the schema and the expectations before a single token is read, and turns
// every HDF5 failure into an error that names the shard.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <optional>

#include "core/error.hpp"
#include "data/shard.hpp"
#include "data/verified_chunks.hpp"
#include "io/hdf5.hpp"

namespace zt::data {

// The file as HDF5 opened it: closed between uses when a shard set keeps few files open (close_file).
struct OpenShard {
  io::H5File file;
  io::H5Dataset tokens;
  io::H5Dataset docs;
  std::optional<io::H5Dataset> loss_mask;  // instruction shards only
};

// Which file a path named when the shard was validated: a file put in its place since (a rename over
// it, a rewrite) differs in inode, size or modification time even where its header says the same.
struct FileIdentity {
  std::uint64_t device = 0, inode = 0, bytes = 0;
  std::int64_t modified_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};
static FileIdentity identity_of(const struct stat& st) {
  return FileIdentity{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                      static_cast<std::uint64_t>(st.st_size),
                      static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}
static std::optional<FileIdentity> identity_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return identity_of(st);
}
// The identity of the file open at fd: a file rewritten in place (cp over it, h5py's 'w') keeps its inode
// but not its size or time.
static std::optional<FileIdentity> identity_of(int fd) {
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) return std::nullopt;
  return identity_of(st);
}

struct ShardReader::Impl {
  ShardInfo info;
  std::optional<FileIdentity> identity;    // when validated
  std::optional<OpenShard> h5;             // null after close_file(), until the next call that needs HDF5
  std::unique_ptr<VerifiedChunks> chunks;  // reads of chunks HDF5 verified before; null: HDF5 only
};

namespace {

constexpr const char* kRewrite = "; write it again with ztok (or remove it from data.train / data.valid)";

[[noreturn]] void invalid(const std::string& path, const std::string& what) {
  throw InputError(cat("shard ", path, ": ", what, kRewrite));
}

// An integer attribute; one that is not a non-negative integer is a schema problem, not a damaged file.
std::uint64_t u64_attr(const io::H5File& f, const char* name) {
  try {
    return f.attr_u64(name);
  } catch (const IoError& e) {  // "<file> attribute eot is -1: negative": the file is named once, by invalid()
    const std::string what = e.what();
    const std::size_t at = what.find(" attribute ");
    invalid(f.path(), at == std::string::npos ? what : what.substr(at + 1));
  }
}
std::uint64_t required_u64(const io::H5File& f, const char* name) {
  if (!f.has_attr(name)) invalid(f.path(), cat("no attribute `", name, "`: not a ztrain token shard"));
  return u64_attr(f, name);
}
std::string required_string(const io::H5File& f, const char* name) {
  if (!f.has_attr(name)) invalid(f.path(), cat("no attribute `", name, "`: not a ztrain token shard"));
  return f.attr_string(name);
}

ShardInfo read_info(const io::H5File& f) {
  const std::string format = required_string(f, "format");
  if (format != kShardFormat) invalid(f.path(), cat("format is \"", format, "\", expected \"", kShardFormat, "\""));
  const std::uint64_t version = required_u64(f, "format_version");
  if (version != kShardFormatVersion)
    invalid(f.path(), cat("format_version ", version, " is not ", kShardFormatVersion, ", the one this build reads"));
  ShardInfo info;
  info.path = f.path();
  info.tokenizer.name = required_string(f, "tokenizer");
  info.tokenizer.vocab_hash = required_string(f, "vocab_hash");
  info.tokenizer.vocab_size = required_u64(f, "vocab_size");
  info.tokenizer.eot = required_u64(f, "eot");
  if (f.has_attr("bos")) info.tokenizer.bos = u64_attr(f, "bos");
  if (f.has_attr("specials")) info.tokenizer.specials = f.attr_string("specials");
  info.n_tokens = required_u64(f, "n_tokens");
  info.n_docs = required_u64(f, "n_docs");
  if (!f.has_attr("sources")) invalid(f.path(), "no attribute `sources`");
  info.sources = f.attr_strings("sources");
  info.has_loss_mask = f.has("loss_mask");
  if (f.has_attr("chat_template")) info.chat_template = f.attr_string("chat_template");
  if (f.has_attr("window")) {
    info.window = u64_attr(f, "window");
    if (info.window < 2 || info.n_tokens % info.window != 0)
      invalid(f.path(), cat("window ", info.window, " is below 2 or does not divide n_tokens ", info.n_tokens));
  }
  return info;
}

void check_expectation(const ShardInfo& info, const ShardExpectation& expect) {
  const std::string path = info.path.string();
  const TokenizerInfo& t = info.tokenizer;
  if (expect.vocab_hash && *expect.vocab_hash != t.vocab_hash)
    throw InputError(cat("shard ", path, " was tokenized with vocabulary ", t.vocab_hash, " (", t.name,
                         " tokenizer), but data.vocab has ", *expect.vocab_hash,
                         ": set data.vocab to the tokenizer it was made with, or re-run ztok with --vocab set to data.vocab"));
  if (expect.vocab_size && *expect.vocab_size < t.vocab_size)
    throw InputError(cat("shard ", path, " has vocab_size ", t.vocab_size, " (", t.name, " tokenizer) but the model has only ",
                         *expect.vocab_size, ": set model.vocab_size to at least ", t.vocab_size,
                         " (a padded vocabulary is fine) or re-run ztok with the model's tokenizer"));
  if (expect.eot && *expect.eot != t.eot)
    throw InputError(cat("shard ", path, " has eot ", t.eot, ", expected ", *expect.eot, kRewrite));
  if (t.eot >= t.vocab_size) invalid(path, cat("eot ", t.eot, " is not below vocab_size ", t.vocab_size));
  if (t.bos && *t.bos >= t.vocab_size) invalid(path, cat("bos ", *t.bos, " is not below vocab_size ", t.vocab_size));
}

// A dataset's element type when it is one the schema allows, else the refusal naming the type found
// (any, even one ztrain never reads) and the one it must be.
io::H5Type type_in(const std::string& path, const io::H5Dataset& d, const char* name,
                   std::initializer_list<io::H5Type> allowed, const char* required) {
  std::optional<io::H5Type> type;
  try {
    type = d.type();
  } catch (const IoError&) {  // a type ztrain never reads: named below by type_name()
  }
  if (!type || std::find(allowed.begin(), allowed.end(), *type) == allowed.end())
    invalid(path, cat("dataset `", name, "` holds ", d.type_name(), "; the schema's is ", required));
  return *type;
}

void check_datasets(const ShardInfo& info, const OpenShard& s) {
  const std::string path = info.path.string();
  const std::uint64_t length = s.tokens.length();
  if (length != info.n_tokens)
    invalid(path, cat("n_tokens says ", info.n_tokens, " but dataset `tokens` holds ", length));
  const io::H5Type type = type_in(path, s.tokens, "tokens", {io::H5Type::kU16, io::H5Type::kU32},
                                  "little-endian uint16 or uint32 (numpy: astype('<u2') or astype('<u4'))");
  if (type == io::H5Type::kU16 && shard_ids_are_wide(info.tokenizer.vocab_size))
    invalid(path, cat("uint16 tokens cannot hold vocab_size ", info.tokenizer.vocab_size));
  if (s.docs.length() != info.n_docs)
    invalid(path, cat("n_docs says ", info.n_docs, " but dataset `doc_offsets` holds ", s.docs.length()));
  type_in(path, s.docs, "doc_offsets", {io::H5Type::kU64}, "little-endian uint64 (numpy: astype('<u8'))");
  if (s.loss_mask) type_in(path, *s.loss_mask, "loss_mask", {io::H5Type::kU8}, "uint8");
  if (s.loss_mask && s.loss_mask->length() != info.n_tokens)
    invalid(path, cat("dataset `loss_mask` is not uint8 with one value per token (", info.n_tokens, ")"));
  // Found here, before training, not as zeros trained on or as a "damaged" chunk hours in.
  const std::pair<const char*, const io::H5Dataset*> datasets[] = {
      {"tokens", &s.tokens}, {"doc_offsets", &s.docs}, {"loss_mask", s.loss_mask ? &*s.loss_mask : nullptr}};
  for (const auto& [name, d] : datasets)
    if (d != nullptr)
      if (const std::string problem = d->storage_problem(); !problem.empty())
        invalid(path, cat("dataset `", name, "`: ", problem));
}

OpenShard open_datasets(io::H5File file, const ShardInfo& info) {
  for (const char* ds : {"tokens", "doc_offsets"})
    if (!file.has(ds)) invalid(info.path.string(), cat("no dataset `", ds, "`"));
  io::H5Dataset tokens = file.open_dataset("tokens");
  io::H5Dataset docs = file.open_dataset("doc_offsets");
  std::optional<io::H5Dataset> loss_mask;
  if (info.has_loss_mask) loss_mask.emplace(file.open_dataset("loss_mask"));
  return OpenShard{std::move(file), std::move(tokens), std::move(docs), std::move(loss_mask)};
}

// The file of a shard whose HDF5 handles were closed (close_file), opened again. The run validated it
// at start-up: a file replaced or rewritten since (other tokens at the same positions, or none) is a
// DataError, never read as the shard the window order was built on.
const OpenShard& reopened(ShardReader::Impl& s) {
  if (s.h5) return *s.h5;
  const std::string path = s.info.path.string();
  const std::optional<FileIdentity> identity = identity_of(path);
  if (!identity)
    throw DataError(cat("shard ", path, " is gone (deleted, moved, or its file system unmounted) since the run started: ",
                        std::strerror(errno), ": put the shards of a run back as they were, or start a new run on the new ones"));
  if (identity != s.identity)
    throw DataError(cat("shard ", path, " changed on disk during the run (another file in its place, or rewritten): put the "
                        "shards of a run back as they were, or start a new run on the new ones"));
  try {
    io::H5File file = io::H5File::open_read(path);
    const ShardInfo now = read_info(file);
    if (now.n_tokens != s.info.n_tokens || now.n_docs != s.info.n_docs ||
        now.tokenizer.vocab_hash != s.info.tokenizer.vocab_hash || now.tokenizer.specials != s.info.tokenizer.specials ||
        now.has_loss_mask != s.info.has_loss_mask ||
        now.window != s.info.window || now.sources != s.info.sources)
      throw DataError(cat("shard ", path, " changed on disk during the run (now ", now.n_tokens, " tokens in ", now.n_docs,
                          " documents, was ", s.info.n_tokens, " in ", s.info.n_docs,
                          "): put the shards of a run back as they were, or start a new run on the new ones"));
    s.h5.emplace(open_datasets(std::move(file), s.info));
    return *s.h5;
  } catch (const DataError&) {
    throw;
  } catch (const Error& e) {
    throw DataError(cat("shard ", path, " was readable at start-up and cannot be opened again: ", e.what()));
  }
}

}  // namespace

ShardReader::ShardReader() = default;
ShardReader::ShardReader(ShardReader&&) noexcept = default;
ShardReader& ShardReader::operator=(ShardReader&&) noexcept = default;
ShardReader::~ShardReader() = default;
const ShardInfo& ShardReader::info() const { return impl_->info; }
void ShardReader::close_file() const {
  impl_->h5.reset();
  if (impl_->chunks) impl_->chunks->release_scratch();
}

ShardReader ShardReader::open(const std::filesystem::path& path, const ShardExpectation& expect) {
  const std::string name = path.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw InputError(cat("shard ", name, " does not exist (or is not a file): check data.train / data.valid, or run ztok"));
  try {
    io::H5File file = io::H5File::open_read(name);
    ShardInfo info = read_info(file);
    check_expectation(info, expect);
    OpenShard h5 = open_datasets(std::move(file), info);
    check_datasets(info, h5);
    info.wide_tokens = h5.tokens.type() == io::H5Type::kU32;
    info.checksummed = h5.tokens.checksummed();
    ShardReader reader;
    reader.impl_ = std::make_unique<Impl>();
    Impl& s = *reader.impl_;
    s.identity = identity_of(name);
    s.chunks = VerifiedChunks::open(path, h5.tokens, info.n_tokens, info.wide_tokens);
    s.info = std::move(info);
    s.h5.emplace(std::move(h5));
    return reader;
  } catch (const InputError&) {
    throw;
  } catch (const Error& e) {
    throw InputError(cat("shard ", name, " cannot be read (truncated or corrupt?): ", e.what(), kRewrite));
  }
}

namespace {
bool reads_cleanly(const ShardReader::Impl& s, std::uint64_t start, std::uint64_t n) {
  try {
    if (s.info.wide_tokens) {
      std::vector<std::uint32_t> ids(n);
      s.h5->tokens.read(start, std::span(ids));
    } else {
      std::vector<std::uint16_t> ids(n);
      s.h5->tokens.read(start, std::span(ids));
    }
    return true;
  } catch (const Error&) {
    return false;
  }
}

// HDF5 refused tokens [start, start + n) (a chunk's checksum, or the file): names the chunk that fails
// on its own (a window may span two), the inputs whose tokens it holds, and the fix.
[[noreturn]] void throw_unreadable(const ShardReader::Impl& s, std::uint64_t start, std::uint64_t n, const Error& e) {
  std::uint64_t lo = start, hi = start + n;
  if (const std::optional<std::uint64_t> chunk = s.h5->tokens.checksummed_chunk_elements(); chunk && *chunk > 0)
    for (std::uint64_t first = start / *chunk * *chunk; first < start + n; first += *chunk) {
      const std::uint64_t end = std::min(first + *chunk, s.info.n_tokens);
      if (!reads_cleanly(s, first, end - first)) {
        lo = first, hi = end;
        break;
      }
    }
  std::string inputs;
  for (std::size_t i = 0; i < s.info.sources.size() && i < 3; ++i) inputs += cat(i ? ", " : "", s.info.sources[i]);
  if (s.info.sources.size() > 3) inputs += cat(" and ", s.info.sources.size() - 3, " more");
  throw DataError(cat("shard ", s.info.path.string(), ": tokens [", lo, ", ", hi, ") are unreadable (", e.what(),
                      "): the file is damaged; re-run ztok for its input (", inputs,
                      ") with the same options to write it again, or restore it from a copy"));
}

// Tokens [start, start + ids.size()): by pread from chunks verified and located before (no HDF5 call),
// else, when `hdf5` allows it, verifying or locating them (verified_chunks.hpp) or through HDF5's own
// read; false when `hdf5` is not allowed and that would be needed.
bool read_ids(ShardReader::Impl& s, std::uint64_t start, std::span<std::uint32_t> ids, bool hdf5) {
  const std::string path = s.info.path.string();
  if (start > s.info.n_tokens || ids.size() > s.info.n_tokens - start)
    throw DataError(cat("shard ", path, ": tokens [", start, ", ", start + ids.size(), ") are outside its ",
                        s.info.n_tokens));
  // Verified chunks are read by pread on a descriptor kept open: a file rewritten in place since start-up
  // would give other bytes with no HDF5 call to notice (outside sweep 29 F2); one fstat a read.
  if (s.chunks && s.chunks->fd() >= 0 && identity_of(s.chunks->fd()) != s.identity)
    throw DataError(cat("shard ", path, " changed on disk during the run (rewritten in place: cp over it, or a converter ",
                        "run again): put the shards of a run back as they were, or start a new run on the new ones"));
  if (!(s.chunks && s.chunks->read(start, ids))) {
    if (!hdf5) return false;
    const io::H5Dataset& tokens = reopened(s).tokens;
    try {
      if (!(s.chunks && s.chunks->read_touching(tokens, start, ids))) {
        // HDF5's own read decides (checksum, layout); in the stored type: no HDF5 conversion, whose
        // 1 MiB buffer it zeroes on every read.
        if (s.info.wide_tokens) {
          tokens.read(start, ids);
        } else {
          std::vector<std::uint16_t> narrow(ids.size());
          tokens.read(start, std::span(narrow));
          std::copy(narrow.begin(), narrow.end(), ids.begin());
        }
        if (s.chunks) s.chunks->mark_verified(start, ids.size());
      }
    } catch (const DataError&) {
      throw;
    } catch (const Error& e) {
      throw_unreadable(s, start, ids.size(), e);
    }
  }
  const auto limit = s.info.tokenizer.vocab_size;
  for (const std::uint32_t t : ids)
    if (t >= limit)
      throw DataError(cat("shard ", path, ": token id ", t, " in [", start, ", ", start + ids.size(),
                          ") is not below vocab_size ", limit, " (corrupt shard)"));
  return true;
}

// int32 and uint32 ids share a representation for ids below 2^31 (any vocab_size ztrain trains).
std::span<std::uint32_t> as_u32(std::span<std::int32_t> out) {
  return {reinterpret_cast<std::uint32_t*>(out.data()), out.size()};
}
}  // namespace

void ShardReader::read(std::uint64_t start, std::span<std::uint32_t> out) const { read_ids(*impl_, start, out, true); }
void ShardReader::read(std::uint64_t start, std::span<std::int32_t> out) const {
  read_ids(*impl_, start, as_u32(out), true);
}
bool ShardReader::read_verified(std::uint64_t start, std::span<std::int32_t> out) const {
  return read_ids(*impl_, start, as_u32(out), false);
}

std::vector<std::uint64_t> ShardReader::doc_offsets() const {
  const ShardInfo& info = impl_->info;
  std::vector<std::uint64_t> offsets(info.n_docs);
  const io::H5Dataset& docs = reopened(*impl_).docs;
  try {
    docs.read(0, std::span(offsets));
  } catch (const Error& e) {
    throw DataError(cat("shard ", info.path.string(), ": cannot read doc_offsets: ", e.what()));
  }
  for (std::size_t i = 0; i < offsets.size(); ++i)
    if (offsets[i] >= info.n_tokens || (i > 0 && offsets[i] <= offsets[i - 1]))
      throw DataError(cat("shard ", info.path.string(), ": doc_offsets[", i, "] = ", offsets[i],
                          " is not increasing and below n_tokens ", info.n_tokens, kRewrite));
  return offsets;
}

void ShardReader::read_loss_mask(std::uint64_t start, std::span<std::uint8_t> out) const {
  Impl& s = *impl_;
  const std::string path = s.info.path.string();
  ZT_CHECK(s.info.has_loss_mask, "shard ", path, " has no loss_mask");
  if (start > s.info.n_tokens || out.size() > s.info.n_tokens - start)
    throw DataError(cat("shard ", path, ": loss_mask [", start, ", ", start + out.size(), ") is outside its ",
                        s.info.n_tokens));
  const io::H5Dataset& loss_mask = *reopened(s).loss_mask;
  try {
    loss_mask.read(start, out);
  } catch (const Error& e) {
    throw DataError(cat("shard ", path, ": loss_mask [", start, ", ", start + out.size(), ") is unreadable (", e.what(),
                        "): the file is damaged; run ztok again for its input (", s.info.sources.empty() ? "" : s.info.sources[0],
                        ") or restore it from a copy"));
  }
  for (std::size_t i = 0; i < out.size(); ++i)
    if (out[i] > 1)
      throw DataError(cat("shard ", path, ": loss_mask[", start + i, "] is ", int{out[i]}, ", not 0 or 1 (corrupt shard)"));
}

}  // namespace zt::data
