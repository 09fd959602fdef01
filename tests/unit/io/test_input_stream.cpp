// Transparent .gz / .zst input: concatenated members and frames, truncation and corruption named.
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.hpp"
#include "io/input_stream.hpp"
#include "tests/unit/temp_dir.hpp"

namespace zt::io {
namespace {

namespace fs = std::filesystem;

struct TempDir : test::TempDir {
  TempDir() : test::TempDir("io_test") {}
};

void put(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

std::string gzip(const std::string& text) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, text.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string zstd(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3));
  return out;
}

std::string read_all(const fs::path& p, std::size_t step = 4096) {
  auto in = InputStream::open(p.string());
  std::string out, buf(step, '\0');
  while (std::size_t n = in->read(buf.data(), buf.size())) out.append(buf.data(), n);
  return out;
}

std::string sample(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; s.size() < n; ++i) s += "line " + std::to_string(i * 7919 % 1000) + " of text\n";
  s.resize(n);
  return s;
}

TEST(InputStream, ReadsPlainGzipAndZstdAlike) {
  TempDir dir;
  const std::string a = sample(300000), b = sample(1234);
  put(dir.path / "x.txt", a + b);
  put(dir.path / "x.txt.gz", gzip(a) + gzip(b));  // two members, as `cat a.gz b.gz`
  put(dir.path / "x.txt.zst", zstd(a) + zstd(b)); // two frames
  put(dir.path / "empty.gz", "");
  put(dir.path / "empty.txt", "");
  for (const char* name : {"x.txt", "x.txt.gz", "x.txt.zst"}) {
    EXPECT_EQ(read_all(dir.path / name), a + b) << name;
    EXPECT_EQ(read_all(dir.path / name, 1), a + b) << name;
  }
  EXPECT_EQ(read_all(dir.path / "empty.txt"), "");
  // A zero-byte .gz is no gzip stream (even an empty one has a header): a failed download (sweep 33 N7).
  try {
    read_all(dir.path / "empty.gz");
    FAIL() << "read a zero-byte .gz as empty text";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("empty.gz is empty, without even the header"), std::string::npos) << e.what();
  }
}

TEST(InputStream, TruncatedOrCorruptInputIsAnErrorNamingTheFile) {
  TempDir dir;
  const std::string text = sample(100000);
  const std::string gz = gzip(text), zs = zstd(text);
  put(dir.path / "cut.gz", gz.substr(0, gz.size() / 2));
  put(dir.path / "cut.zst", zs.substr(0, zs.size() / 2));
  put(dir.path / "bad.gz", "this is not gzip at all");
  put(dir.path / "bad.zst", "this is not zstd at all");
  // Found while reading (the work begun): exit 1, as any error then; one named .gz that is not gzip at
  // all is found at open (exit 2).
  for (const char* name : {"cut.gz", "cut.zst", "bad.gz", "bad.zst", "missing.txt"}) {
    try {
      read_all(dir.path / name);
      ADD_FAILURE() << name << " was read without error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

// What a file is comes from its first bytes: gzip or zstd under any name, zero padding after a gzip member
// skipped (as gzip -d does), xz and bzip2 refused with the fix.
TEST(InputStream, CompressionIsReadFromTheFirstBytes) {
  TempDir dir;
  const std::string text = sample(5000);
  put(dir.path / "upper.GZ", gzip(text));
  put(dir.path / "plain-named.txt", zstd(text));
  put(dir.path / "padded.gz", gzip(text) + std::string(512, '\0'));
  EXPECT_EQ(read_all(dir.path / "upper.GZ"), text);
  EXPECT_EQ(read_all(dir.path / "plain-named.txt"), text);
  EXPECT_EQ(read_all(dir.path / "padded.gz"), text);
  put(dir.path / "x.xz", std::string("\xFD" "7zXZ", 5) + std::string(1, '\0') + "rest");
  put(dir.path / "x.bz2", "BZh91AY&SY");
  for (const char* name : {"x.xz", "x.bz2"}) {
    try {
      read_all(dir.path / name);
      ADD_FAILURE() << name << " was read";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("-compressed, which is not read here"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace zt::io
