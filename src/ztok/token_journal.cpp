// Token journals: buffered appends (stdio) with truncation back to the last durable state on resume,
// holes punched where shards were cut, and pread-based random access for cutting shards.
#include "ztok/token_journal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "data/shard.hpp"

namespace zt::ztok {
namespace {

constexpr const char* kKinds[3] = {"tokens", "docs", "runs"};

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path) {
  const int err = errno;
  throw IoError(cat(what, " ", path.string(), ": ", std::strerror(err), data::output_write_fix(err)));
}

// Bytes per entry of each file.
std::uint64_t entry_bytes(int file, bool wide) { return file == 0 ? (wide ? 4 : 2) : file == 1 ? 8 : 16; }

std::uint64_t entries(const JournalCounts& c, int file) { return file == 0 ? c.tokens : file == 1 ? c.docs : c.runs; }

}  // namespace

std::filesystem::path journal_file(const std::filesystem::path& stem, int file) {
  return stem.string() + "." + kKinds[file];
}

// ------------------------------------------------------------------------------------------ writer

JournalWriter::JournalWriter(std::filesystem::path stem, bool wide, const JournalCounts& resume)
    : stem_(std::move(stem)), wide_(wide), counts_(resume) {
  for (int i = 0; i < 3; ++i) {
    const std::filesystem::path path = journal_file(stem_, i);
    const std::uint64_t bytes = entries(resume, i) * entry_bytes(i, wide_);
    const bool keep = resume != JournalCounts{};
    if (keep) {
      std::error_code ec;
      const auto size = std::filesystem::file_size(path, ec);
      if (ec || size < bytes)
        throw InputError(cat("journal ", path.string(), " is shorter than its rank's progress file says (", bytes,
                             " bytes): the output directory was damaged; delete it and start over"));
      std::filesystem::resize_file(path, bytes);
    }
    files_[i] = std::fopen(path.c_str(), keep ? "ab" : "wb");
    if (files_[i] == nullptr) fail("cannot open journal", path);
  }
  if (counts_.runs > 0) {  // a resumed run continues the last input's run
    last_input_ = JournalReader(stem_, wide_, counts_).run(counts_.runs - 1).input;
  }
}

JournalWriter::~JournalWriter() {
  for (std::FILE*& f : files_) {
    if (f) std::fclose(f);
    f = nullptr;
  }
}

void JournalWriter::write(int file, const void* data, std::size_t bytes) {
  if (bytes > 0 && std::fwrite(data, 1, bytes, files_[file]) != bytes)
    fail("cannot write journal", journal_file(stem_, file));
}

void JournalWriter::begin_document() { pending_doc_ = true; }

void JournalWriter::append(std::span<const std::uint32_t> ids, std::uint64_t input) {
  if (ids.empty()) return;  // a document or source is recorded with its first id
  if (pending_doc_) {
    write(1, &counts_.tokens, 8);
    ++counts_.docs;
    pending_doc_ = false;
  }
  if (input != last_input_) {
    const std::uint64_t run[2] = {input, counts_.tokens};
    write(2, run, sizeof run);
    ++counts_.runs;
    last_input_ = input;
  }
  if (wide_) {
    write(0, ids.data(), ids.size() * 4);
  } else {
    narrow_.assign(ids.begin(), ids.end());
    write(0, narrow_.data(), narrow_.size() * 2);
  }
  counts_.tokens += ids.size();
}

void JournalWriter::flush() {
  for (int i = 0; i < 3; ++i)
    if (std::fflush(files_[i]) != 0) fail("cannot write journal", journal_file(stem_, i));  // the write failed
}

JournalCounts JournalWriter::sync() {
  ZT_CHECK(!pending_doc_, "a document was begun but received no ids");
  flush();
  for (int i = 0; i < 3; ++i)
    if (::fsync(::fileno(files_[i])) != 0) fail("cannot sync journal", journal_file(stem_, i));
  return counts_;
}

void JournalWriter::release_before(std::uint64_t position) {
  ZT_CHECK_LE(position, counts_.tokens, "journal ", stem_.string());
  if (position <= released_) return;
  const std::uint64_t bytes = entry_bytes(0, wide_);
  // Errors (EOPNOTSUPP on a file system without holes) only keep the blocks.
  (void)::fallocate(::fileno(files_[0]), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    static_cast<off_t>(released_ * bytes), static_cast<off_t>((position - released_) * bytes));
  released_ = position;
}

// ------------------------------------------------------------------------------------------ reader

JournalReader::JournalReader(std::filesystem::path stem, bool wide, const JournalCounts& counts)
    : stem_(std::move(stem)), wide_(wide), counts_(counts) {
  for (int i = 0; i < 3; ++i) {
    const std::filesystem::path path = journal_file(stem_, i);
    fds_[i] = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fds_[i] < 0) fail("cannot open journal", path);
    std::error_code ec;
    const std::uint64_t want = entries(counts_, i) * entry_bytes(i, wide_);
    if (std::filesystem::file_size(path, ec) < want || ec)
      throw IoError(cat("journal ", path.string(), " holds fewer than the ", want,
                        " bytes its rank recorded: is --out on a file system every rank sees?"));
  }
}

JournalReader::~JournalReader() {
  for (int& fd : fds_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

void JournalReader::read(int file, std::uint64_t offset, void* out, std::size_t bytes) const {
  auto* p = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t n = ::pread(fds_[file], p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      fail(cat("cannot read ", bytes, " bytes at ", offset, " of journal"), journal_file(stem_, file));
    }
    p += n;
    offset += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::size_t>(n);
  }
}

void JournalReader::tokens(std::uint64_t first, std::span<std::uint32_t> out) const {
  ZT_CHECK_LE(first + out.size(), counts_.tokens, "journal ", stem_.string());
  if (wide_) {
    read(0, first * 4, out.data(), out.size() * 4);
    return;
  }
  std::vector<std::uint16_t> narrow(out.size());
  read(0, first * 2, narrow.data(), narrow.size() * 2);
  std::copy(narrow.begin(), narrow.end(), out.begin());
}

std::uint64_t JournalReader::docs_before(std::uint64_t position) const {
  std::uint64_t lo = 0, hi = counts_.docs;  // binary search over the sorted document starts
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    std::uint64_t start = 0;
    read(1, mid * 8, &start, 8);
    if (start < position) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

void JournalReader::docs(std::uint64_t first, std::span<std::uint64_t> out) const {
  ZT_CHECK_LE(first + out.size(), counts_.docs, "journal ", stem_.string());
  read(1, first * 8, out.data(), out.size() * 8);
}

JournalRun JournalReader::run(std::uint64_t index) const {
  ZT_CHECK_LT(index, counts_.runs, "journal ", stem_.string());
  std::uint64_t raw[2];
  read(2, index * 16, raw, sizeof raw);
  return {raw[0], raw[1]};
}

std::vector<JournalRun> JournalReader::runs_overlapping(std::uint64_t from, std::uint64_t to) const {
  std::uint64_t lo = 0, hi = counts_.runs;  // runs [0, lo) begin at or before `from`
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (run(mid).first <= from) lo = mid + 1;
    else hi = mid;
  }
  std::vector<JournalRun> out;
  constexpr std::uint64_t kRunsPerRead = 1024;
  std::vector<std::uint64_t> raw;
  for (std::uint64_t at = lo == 0 ? 0 : lo - 1; at < counts_.runs; at += kRunsPerRead) {
    raw.resize(2 * std::min(kRunsPerRead, counts_.runs - at));
    read(2, at * 16, raw.data(), raw.size() * 8);
    for (std::size_t i = 0; i < raw.size(); i += 2) {
      if (raw[i + 1] >= to) return out;
      out.push_back({raw[i], raw[i + 1]});
    }
  }
  return out;
}

}  // namespace zt::ztok
