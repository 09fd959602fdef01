// Plain, gzip (zlib inflate, all members) and zstd (all frames) input, with truncation detected.
#include "io/input_stream.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <initializer_list>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.hpp"

namespace zt::io {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The file descriptor every stream reads from.
class RawFile {
 public:
  explicit RawFile(const std::string& path) : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) {
      throw IoError(cat("cannot open input ", path, ": ", std::strerror(errno)));
    }
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  }
  ~RawFile() { ::close(fd_); }
  RawFile(const RawFile&) = delete;
  RawFile& operator=(const RawFile&) = delete;
  std::size_t read(char* buffer, std::size_t n) {
    for (;;) {
      const ssize_t got = ::read(fd_, buffer, n);
      if (got >= 0) return static_cast<std::size_t>(got);
      if (errno != EINTR) throw IoError(cat("cannot read input ", path_, ": ", std::strerror(errno)));
    }
  }

 private:
  std::string path_;
  int fd_;
};

class PlainStream : public InputStream {
 public:
  explicit PlainStream(const std::string& path) : InputStream(path), file_(path) {}
  std::size_t read(char* buffer, std::size_t n) override {
    const std::size_t got = file_.read(buffer, n);
    file_bytes_read_ += got;
    return got;
  }

 private:
  RawFile file_;
};

constexpr std::size_t kInBytes = std::size_t{1} << 17;

class GzipStream : public InputStream {
 public:
  bool compressed() const override { return true; }
  explicit GzipStream(const std::string& path) : InputStream(path), file_(path), in_(kInBytes) {
    if (inflateInit2(&z_, 15 + 32) != Z_OK) throw IoError(cat("zlib cannot start on ", path));  // gzip or zlib
  }
  ~GzipStream() override { inflateEnd(&z_); }
  std::size_t read(char* buffer, std::size_t n) override {
    z_.next_out = reinterpret_cast<Bytef*>(buffer);
    z_.avail_out = static_cast<uInt>(n);
    while (z_.avail_out == n) {
      if (z_.avail_in == 0 && !refill()) {
        if (in_member_) throw InputError(cat("input ", path_, " is truncated (gzip stream ends early): compress it again, or drop it"));
        break;
      }
      if (!in_member_) {  // a new member begins (gzip files may be concatenated)
        // Zero bytes after a member (tape blocks, a padded copy) are no member: skipped, as gzip -d does.
        while (z_.avail_in > 0 && *z_.next_in == 0) ++z_.next_in, --z_.avail_in;
        if (z_.avail_in == 0) continue;
        if (inflateReset(&z_) != Z_OK) throw IoError(cat("zlib reset failed on ", path_));
        in_member_ = true;
        member_start_ = file_bytes_read_ - z_.avail_in;
      }
      const int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) in_member_ = false, ++members_;
      else if (rc != Z_OK && rc != Z_BUF_ERROR)
        throw InputError(members_ > 0 && z_.total_in < 10 ? trailing_data_error()
                                                          : cat("input ", path_, " is not valid gzip (", z_.msg ? z_.msg : "corrupt data",
                                                                "): compress it again, or drop it"));
    }
    return n - z_.avail_out;
  }

 private:
  bool refill() {
    const std::size_t got = file_.read(reinterpret_cast<char*>(in_.data()), in_.size());
    file_bytes_read_ += got;
    z_.next_in = in_.data();
    z_.avail_in = static_cast<uInt>(got);
    return got > 0;
  }
  // Bytes after the last complete member that do not start another one: gzip -d decompresses such a
  // file with a warning ("trailing garbage ignored"); ztok refuses it, naming what is wrong.
  std::string trailing_data_error() const {
    std::error_code ec;
    const std::uintmax_t size = std::filesystem::file_size(path_, ec);
    return cat("input ", path_, " has ", ec ? std::string("some") : cat(size - member_start_), " byte(s) after the end of its ",
               "gzip data (from byte ", member_start_, ") that are not gzip: cut them off (gzip -cd FILE | gzip > NEW), "
               "or drop the file");
  }

  RawFile file_;
  std::vector<Bytef> in_;
  z_stream z_{};
  bool in_member_ = false;
  std::uint64_t members_ = 0, member_start_ = 0;  // complete members; the file offset of the current one
};

class ZstdStream : public InputStream {
 public:
  bool compressed() const override { return true; }
  explicit ZstdStream(const std::string& path) : InputStream(path), file_(path), in_(kInBytes), ctx_(ZSTD_createDStream()) {
    if (!ctx_) throw IoError(cat("zstd cannot start on ", path));
  }
  ~ZstdStream() override { ZSTD_freeDStream(ctx_); }
  std::size_t read(char* buffer, std::size_t n) override {
    ZSTD_outBuffer out{buffer, n, 0};
    while (out.pos == 0) {
      if (in_buf_.pos == in_buf_.size) {
        const std::size_t got = file_.read(in_.data(), in_.size());
        file_bytes_read_ += got;
        if (got == 0) {
          if (frame_open_) throw InputError(cat("input ", path_, " is truncated (zstd frame ends early): compress it again, or drop it"));
          break;
        }
        in_buf_ = ZSTD_inBuffer{in_.data(), got, 0};
      }
      const std::size_t rc = ZSTD_decompressStream(ctx_, &out, &in_buf_);
      if (ZSTD_isError(rc)) throw InputError(cat("input ", path_, " is not valid zstd (", ZSTD_getErrorName(rc), "): compress it again, or drop it"));
      frame_open_ = rc != 0;
    }
    return out.pos;
  }

 private:
  RawFile file_;
  std::vector<char> in_;
  ZSTD_DStream* ctx_;
  ZSTD_inBuffer in_buf_{nullptr, 0, 0};
  bool frame_open_ = false;
};

}  // namespace

// A file is read by what its first bytes are, whatever its name (.GZ, a .txt that was gzipped): gzip and
// zstd decompressed; xz and bzip2, which ztrain does not read, refused with the fix.
std::unique_ptr<InputStream> InputStream::open(const std::string& path) {
  unsigned char head[6] = {};
  std::size_t got = 0;
  {
    RawFile probe(path);
    got = probe.read(reinterpret_cast<char*>(head), sizeof head);
  }
  const auto starts = [&](std::initializer_list<unsigned char> magic) {
    return got >= magic.size() && std::equal(magic.begin(), magic.end(), head);
  };
  if (starts({0x1F, 0x8B})) return std::make_unique<GzipStream>(path);
  if (starts({0x28, 0xB5, 0x2F, 0xFD})) return std::make_unique<ZstdStream>(path);
  if (starts({0xFD, '7', 'z', 'X', 'Z', 0x00}) || starts({'B', 'Z', 'h'}))
    throw InputError(cat("input ", path, " is ", head[0] == 'B' ? "bzip2" : "xz", "-compressed, which is not read here: ",
                         "decompress it (", head[0] == 'B' ? "bunzip2" : "xz -d", "), or recompress it with gzip or zstd"));
  // Even an empty gzip or zstd stream has a header: a zero-byte one is a download or copy that failed
  // (outside sweep 33 N7: read as empty text).
  if (ends_with(path, ".gz") || ends_with(path, ".zst"))
    throw InputError(cat("input ", path, got == 0 ? " is empty, without even the header a compressed file starts with"
                                                  : cat(" is named as compressed but does not start as ",
                                                        ends_with(path, ".gz") ? "gzip" : "zstd", " does"),
                         ": check that it was written whole (gzip -t / zstd -t), write it again, or drop it"));
  return std::make_unique<PlainStream>(path);
}

void read_to_end(InputStream& in) {
  if (!in.compressed()) return;  // nothing to check: a plain file's bytes were what they are
  std::vector<char> buffer(1 << 20);
  while (in.read(buffer.data(), buffer.size()) > 0) {
  }
}

}  // namespace zt::io
