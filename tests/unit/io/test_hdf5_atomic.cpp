// HDF5 wrappers (attributes, hyperslabs, errors that name the file) and atomic file replacement.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "io/h5_check.hpp"
#include "io/hdf5.hpp"
#include "tests/unit/temp_dir.hpp"

namespace zt::io {
namespace {

namespace fs = std::filesystem;

struct AtomicTempDir : test::TempDir {  // its own name and path beside the other io tests' (a unity build)
  AtomicTempDir() : TempDir("h5_test") {}
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Hdf5, AttributesAndDatasetsRoundTrip) {
  AtomicTempDir dir;
  const std::string path = (dir.path / "a.h5").string();
  std::vector<std::string> many;
  for (int i = 0; i < 20000; ++i) many.push_back("corpus/part_" + std::to_string(i) + ".txt");  // > 64 KiB
  {
    H5File f = H5File::create(path);
    f.set_attr("name", std::string("caf\xC3\xA9"));
    f.set_attr("count", std::uint64_t{1} << 40);
    f.set_attr("list", many);
    f.set_attr("none", std::vector<std::string>{});
    H5Dataset d = f.create_dataset("d", H5Type::kU16, 1000, {.chunk = 64, .checksum = true});
    std::vector<std::uint16_t> v(1000);
    for (int i = 0; i < 1000; ++i) v[i] = static_cast<std::uint16_t>(i * 37);
    d.write(0, std::span<const std::uint16_t>(v).first(500));
    d.write(500, std::span<const std::uint16_t>(v).subspan(500));
    f.create_dataset("empty", H5Type::kU64, 0, {.chunk = 64});
  }
  H5File f = H5File::open_read(path);
  EXPECT_EQ(f.attr_string("name"), "caf\xC3\xA9");
  EXPECT_EQ(f.attr_u64("count"), std::uint64_t{1} << 40);
  EXPECT_EQ(f.attr_strings("list"), many);
  EXPECT_TRUE(f.attr_strings("none").empty());
  EXPECT_FALSE(f.has_attr("absent"));
  H5Dataset d = f.open_dataset("d");
  EXPECT_EQ(d.length(), 1000u);
  EXPECT_EQ(d.type(), H5Type::kU16);
  std::vector<std::int32_t> got(10);
  d.read(990, std::span(got));
  EXPECT_EQ(got[9], 999 * 37 % 65536);
  EXPECT_EQ(f.open_dataset("empty").length(), 0u);
  EXPECT_THROW(d.read(995, std::span(got)), IoError);
}

TEST(Hdf5, FailuresNameTheFileAndObject) {
  AtomicTempDir dir;
  const fs::path junk = dir.path / "junk.h5";
  std::ofstream(junk) << "not hdf5";
  try {
    H5File::open_read(junk.string());
    FAIL() << "opened a non-HDF5 file";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("junk.h5"), std::string::npos) << e.what();
  }
  H5File f = H5File::create((dir.path / "b.h5").string());
  try {
    f.attr_u64("missing");
    FAIL() << "read a missing attribute";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("b.h5 attribute missing"), std::string::npos) << e.what();
  }
}

TEST(Hdf5, SameContentGivesIdenticalBytes) {
  AtomicTempDir dir;
  for (const char* name : {"1.h5", "2.h5"}) {
    H5File f = H5File::create((dir.path / name).string());
    f.set_attr("s", std::string("x"));
    std::vector<std::uint32_t> v(100, 7);
    f.create_dataset("d", H5Type::kU32, 100, {.chunk = 32, .checksum = true}).write(0, std::span<const std::uint32_t>(v));
  }
  EXPECT_EQ(slurp(dir.path / "1.h5"), slurp(dir.path / "2.h5"));
}

TEST(Hdf5, NdFloatDatasetsRoundTripAndChecksumsCatchDamage) {
  AtomicTempDir dir;
  const std::string path = (dir.path / "f.h5").string();
  std::vector<float> m(3 * 5000);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = 0.5f * static_cast<float>(i) - 7;
  {
    H5File f = H5File::create(path);
    f.create_dataset("m", H5Type::kF32, {3, 5000}, {.chunk = 4096, .checksum = true}).write_all(m);
    f.create_dataset("v", H5Type::kF32, m.size(), {.chunk = 4096, .checksum = true}).write(0, m);
    f.create_dataset("r", H5Type::kU64, {0, 2}).write_all(std::vector<std::uint64_t>{});
  }
  {
    const H5File f = H5File::open_read(path);
    EXPECT_EQ(f.open_dataset("m").dims(), (std::vector<std::uint64_t>{3, 5000}));
    std::vector<float> back(m.size()), part(10);
    f.open_dataset("m").read_all(back);
    EXPECT_EQ(back, m);
    f.open_dataset("v").read(9000, part);
    EXPECT_EQ(part[3], m[9003]);
    EXPECT_THROW(f.open_dataset("m").read_all(part), IoError);  // wrong element count
    EXPECT_EQ(f.open_dataset("r").dims(), (std::vector<std::uint64_t>{0, 2}));
  }
  std::string bytes = slurp(path);  // flip one byte of the data: the chunk's Fletcher-32 fails
  const std::size_t at = bytes.find(std::string(reinterpret_cast<const char*>(&m[2000]), sizeof(float)));
  ASSERT_NE(at, std::string::npos);
  bytes[at] ^= 0x10;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  const H5File f = H5File::open_read(path);
  std::vector<float> back(m.size());
  EXPECT_THROW(f.open_dataset("m").read_all(back), IoError);
}

TEST(AtomicFile, ReplacesWholeOrLeavesTheOldFile) {
  AtomicTempDir dir;
  const fs::path p = dir.path / "state.json";
  write_file_atomic(p, "one");
  write_file_atomic(p, "two");
  EXPECT_EQ(slurp(p), "two");
  EXPECT_FALSE(fs::exists(p.string() + ".tmp"));
  {
    AtomicFile abandoned(p);
    std::ofstream(abandoned.tmp_path()) << "half";
  }  // no commit: the temporary goes, the old content stays
  EXPECT_EQ(slurp(p), "two");
  EXPECT_FALSE(fs::exists(p.string() + ".tmp"));
  EXPECT_THROW(write_file_atomic(dir.path / "no" / "such" / "dir", "x"), IoError);
}

}  // namespace
// A system call's failure as HDF5 describes it (two lines, its buffer's address, its byte counts), on one
// line with the reason: what every rank prints when ckpt.dir fills up.
TEST(Hdf5Errors, ASystemFailureIsOneLineWithItsReason) {
  EXPECT_EQ(detail::one_line_error("file write failed: time = Mon Nov 30 17:51:50 2026\n, filename = 'x.h5', file "
                                   "descriptor = 19, errno = 28, error message = 'No space left on device', buf = "
                                   "0x557c, total write size = 8, bytes actually written = 18446744073709551615"),
            "file write failed: No space left on device (errno 28)");
  EXPECT_EQ(detail::one_line_error("unable to open\nfile"), "unable to open file");
}

}  // namespace zt::io
