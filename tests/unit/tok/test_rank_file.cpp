// tiktoken rank files and the --vocab rules (tok/encoding.hpp) on a small hand-made rank file: what a
// file of no known encoding needs, what is refused and how the error names it; the real encodings'
// sizes, special tokens and ids where their files are available.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "core/error.hpp"
#include "vocab_fixture.hpp"

namespace zt::tok {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<std::uint32_t>;

std::string base64(std::string_view bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 3; ++k) v = (v << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0);
    for (std::size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(v >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

// 256 byte tokens (rank = byte), then "ab" 256, "abc" 257, "  " 258.
std::string small_rank_file() {
  std::string out;
  for (int b = 0; b < 256; ++b) out += base64(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
  out += base64("ab") + " 256\n" + base64("abc") + " 257\n" + base64("  ") + " 258\n";
  return out;
}

struct RankFile {
  fs::path path = fs::temp_directory_path() / ("zt_rank_file_" + std::to_string(::getpid()) + ".tiktoken");
  explicit RankFile(const std::string& text) { std::ofstream(path, std::ios::binary) << text; }
  ~RankFile() { fs::remove(path); }
};

std::string error_of(const fs::path& path, const VocabularyOptions& options) {
  try {
    load_vocabulary(path, options);
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(RankFile, UnknownFileNeedsPatternAndSpecials) {
  const RankFile file(small_rank_file());
  EXPECT_NE(error_of(file.path, {}).find("--pattern gpt2|cl100k|o200k"), std::string::npos) << error_of(file.path, {});
  VocabularyOptions o;
  o.pattern = Pattern{PatternKind::kCl100k, 3};
  o.specials = parse_special_tokens("<|endoftext|>=300,<|pad|>=301");
  const Tokenizer tok(load_vocabulary(file.path, o));
  EXPECT_EQ(tok.vocab().size(), 302u);  // ids 259..299 have no token
  EXPECT_EQ(tok.vocab().eot(), 300u);
  EXPECT_EQ(tok.name(), "tiktoken-ranks/cl100k");
  Ids ids;
  Encoder(tok).encode("abc ab   x<|pad|>", ids);
  EXPECT_EQ(tok.decode(ids), "abc ab   x<|pad|>");
  EXPECT_EQ(ids.front(), 257u);
  // The pattern and the special tokens are part of the vocabulary's identity.
  VocabularyOptions other = o;
  other.pattern = Pattern{PatternKind::kO200k, 3};
  EXPECT_NE(load_vocabulary(file.path, other).vocab.hash(), tok.vocab().hash());
}

TEST(RankFile, BadFilesAndOptionsAreRefusedNamingWhat) {
  const RankFile good(small_rank_file());
  VocabularyOptions o;
  o.pattern = Pattern{PatternKind::kGpt2, 3};
  o.specials = parse_special_tokens("<|pad|>=300");
  EXPECT_NE(error_of(good.path, o).find("no <|endoftext|>"), std::string::npos);
  o.specials = parse_special_tokens("<|endoftext|>=257");
  EXPECT_NE(error_of(good.path, o).find("which is a rank of the file"), std::string::npos);
  EXPECT_NE(error_of(good.path, {"cl100k_base", {}, {}}).find("is not cl100k_base"), std::string::npos);
  EXPECT_NE(error_of(good.path, {"p50k_base", {}, {}}).find("is not one ztok knows"), std::string::npos);
  o.specials = parse_special_tokens("<|endoftext|>=300");
  const RankFile bad_line(small_rank_file() + "!!notbase64 259\n");
  EXPECT_NE(error_of(bad_line.path, o).find("line 260"), std::string::npos) << error_of(bad_line.path, o);
  const RankFile twice(small_rank_file() + base64("xy") + " 256\n");
  EXPECT_NE(error_of(twice.path, o).find("rank 256 appears twice"), std::string::npos);
  const RankFile no_byte(small_rank_file().substr(small_rank_file().find('\n') + 1));  // byte 0 missing
  EXPECT_NE(error_of(no_byte.path, o).find("single byte 0"), std::string::npos);
  EXPECT_NE(error_of(fs::temp_directory_path() / "zt_no_such.tiktoken", {}).find("fetch-vocab.sh"), std::string::npos);
  EXPECT_THROW(parse_special_tokens("<|endoftext|>"), ConfigError);
  EXPECT_THROW(parse_special_tokens("a=1,a=2"), ConfigError);
  EXPECT_THROW(parse_special_tokens("a=x"), ConfigError);
}

// Line ends and separators as tiktoken's load_tiktoken_bpe reads them (bytes.splitlines(), then
// line.split()): a file saved with CRLF (or CR) line ends, or tabs between the fields, gives the same
// tokens; a bad line's message says which part is wrong.
TEST(RankFile, CrlfAndBlankSeparatedFilesReadAsTiktokenReadsThem) {
  VocabularyOptions o;
  o.pattern = Pattern{PatternKind::kCl100k, 3};
  o.specials = parse_special_tokens("<|endoftext|>=300");
  const RankFile lf(small_rank_file());
  const Tokenizer want(load_vocabulary(lf.path, o));
  Ids want_ids;
  Encoder(want).encode("abc ab   x", want_ids);
  std::string crlf, cr, tabs;
  for (const char c : small_rank_file()) {
    crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    cr += c == '\n' ? '\r' : c;
    tabs += c == ' ' ? '\t' : c;
  }
  for (const std::string& text : {crlf, cr, tabs, "\n" + crlf + "\r\n"}) {
    const RankFile file(text);
    const Tokenizer tok(load_vocabulary(file.path, o));
    EXPECT_EQ(tok.vocab().size(), want.vocab().size());
    Ids ids;
    Encoder(tok).encode("abc ab   x", ids);
    EXPECT_EQ(ids, want_ids);
  }
  const std::vector<std::pair<std::string, std::string>> bad = {
      {base64("xy") + " 259 7\r\n", "line 260: 3 field(s), not 2"},
      {base64("xy") + "\r\n", "line 260: 1 field(s), not 2"},
      {base64("xy") + " 25x\r\n", "line 260: the rank \"25x\" is not a whole number below 2^30"},
      {"!!notbase64 259\r\n", "line 260: \"!!notbase64\" is not standard padded base64"}};
  for (const auto& [line, want_msg] : bad) {
    const RankFile file(crlf + line);
    EXPECT_NE(error_of(file.path, o).find(want_msg), std::string::npos) << error_of(file.path, o);
  }
  // A file that cannot be read says why.
  EXPECT_NE(error_of(fs::temp_directory_path() / "zt_no_such.tiktoken", o).find("(no such file)"), std::string::npos);
  const fs::path dir = fs::temp_directory_path() / ("zt_gpt2_dir_" + std::to_string(::getpid()));
  fs::create_directories(dir / "encoder.json");  // a directory where GPT-2's file should be
  EXPECT_NE(error_of(dir, {}).find("encoder.json (it is a directory, not a file)"), std::string::npos) << error_of(dir, {});
  fs::remove_all(dir);
}

TEST(RankFile, KnownEncodingsBringTheirSpecialTokens) {
  const struct {
    const char* name;
    std::size_t size;
    std::uint32_t eot;
    Ids hello;  // "hello world" from tiktoken 1.0.22
  } kCases[] = {{"cl100k_base", 100277, 100257, {15339, 1917}}, {"o200k_base", 200019, 199999, {24912, 2375}}};
  for (const auto& c : kCases) {
    const Tokenizer* tok = testing::rank_file_tokenizer(c.name);
    if (tok == nullptr) GTEST_SKIP() << c.name << " unavailable: run tools/fetch-vocab.sh --encoding " << c.name;
    EXPECT_EQ(tok->name(), c.name);
    EXPECT_EQ(tok->vocab().size(), c.size);
    EXPECT_EQ(tok->vocab().eot(), c.eot);
    EXPECT_EQ(tok->vocab().hash(), known_encoding_by_name(c.name)->sha256);
    Ids ids;
    Encoder(*tok).encode("hello world", ids);
    EXPECT_EQ(ids, c.hello) << c.name;
  }
}

}  // namespace
}  // namespace zt::tok
