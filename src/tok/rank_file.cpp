// tiktoken rank files (`*.tiktoken`, as load_tiktoken_bpe reads them): one "BASE64 RANK" line per
// token, rank = id, in LF, CRLF or CR line ends. Checked: base64 (standard alphabet, padded), ranks unique, bytes unique, every
// single byte a token, special ids outside the ranks.
#include <algorithm>
#include <array>
#include <charconv>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "tok/vocab.hpp"

namespace zt::tok {
namespace {

constexpr std::uint8_t kNotBase64 = 0xFF;

const std::array<std::uint8_t, 256>& base64_values() {
  static const auto kValues = [] {
    std::array<std::uint8_t, 256> v;
    v.fill(kNotBase64);
    const std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (std::size_t i = 0; i < alphabet.size(); ++i) v[static_cast<unsigned char>(alphabet[i])] = static_cast<std::uint8_t>(i);
    return v;
  }();
  return kValues;
}

// Standard padded base64 to bytes; false when malformed.
bool decode_base64(std::string_view in, std::string& out) {
  out.clear();
  if (in.empty() || in.size() % 4 != 0) return false;
  std::size_t pad = 0;
  while (pad < 2 && in[in.size() - 1 - pad] == '=') ++pad;
  std::uint32_t acc = 0;
  for (std::size_t i = 0; i < in.size() - pad; ++i) {
    const std::uint8_t v = base64_values()[static_cast<unsigned char>(in[i])];
    if (v == kNotBase64) return false;
    acc = (acc << 6) | v;
    if (i % 4 == 3) {
      out += static_cast<char>(acc >> 16);
      out += static_cast<char>((acc >> 8) & 0xFF);
      out += static_cast<char>(acc & 0xFF);
      acc = 0;
    }
  }
  if (pad == 1) { out += static_cast<char>(acc >> 10); out += static_cast<char>((acc >> 2) & 0xFF); }
  if (pad == 2) out += static_cast<char>(acc >> 4);
  return true;
}

}  // namespace

namespace {
bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\v' || c == '\f'; }

// The fields of a line split at runs of blanks, leading and trailing ones dropped (Python's bytes.split()).
std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  for (std::size_t i = 0; i < line.size();) {
    while (i < line.size() && is_blank(line[i])) ++i;
    std::size_t end = i;
    while (end < line.size() && !is_blank(line[end])) ++end;
    if (end > i) out.push_back(line.substr(i, end - i));
    i = end;
  }
  return out;
}

// One "BASE64 RANK" line: (rank, bytes), or an InputError saying which part is wrong.
std::pair<std::uint32_t, std::string> parse_line(std::string_view line, const std::string& where, std::size_t line_no) {
  const auto bad = [&](const std::string& why) {
    return InputError(cat(where, " line ", line_no, ": ", why, " (a tiktoken rank file has one \"BASE64 RANK\" per line); got \"",
                          line.substr(0, 80), "\""));
  };
  const std::vector<std::string_view> f = fields(line);
  if (f.size() != 2) throw bad(cat(f.size(), " field(s), not 2"));
  std::uint32_t rank = 0;
  const auto [end, err] = std::from_chars(f[1].data(), f[1].data() + f[1].size(), rank);
  if (err != std::errc() || end != f[1].data() + f[1].size() || rank >= (1u << 30))
    throw bad(cat("the rank \"", f[1], "\" is not a whole number below 2^30"));
  std::string bytes;
  if (!decode_base64(f[0], bytes)) throw bad(cat("\"", f[0].substr(0, 40), "\" is not standard padded base64"));
  return {rank, std::move(bytes)};
}
}  // namespace

// Lines end in \n, \r\n or \r (Python's bytes.splitlines(), which load_tiktoken_bpe uses); blank lines
// are skipped; a line's two fields are separated by blanks (bytes.split()).
Vocab Vocab::parse_ranks(std::string_view rank_file, const std::vector<SpecialToken>& specials,
                         const std::string& hash, const std::string& where) {
  std::vector<std::pair<std::uint32_t, std::string>> tokens;  // rank, bytes
  std::size_t line_no = 0;
  for (std::size_t pos = 0; pos < rank_file.size();) {
    std::size_t eol = rank_file.find_first_of("\r\n", pos);
    if (eol == std::string_view::npos) eol = rank_file.size();
    const std::string_view line = rank_file.substr(pos, eol - pos);
    pos = eol + (rank_file.substr(eol).starts_with("\r\n") ? 2 : 1);
    ++line_no;
    if (line.empty()) continue;
    tokens.push_back(parse_line(line, where, line_no));
  }
  if (tokens.empty()) throw InputError(cat(where, ": no tokens (an empty file is no tiktoken rank file)"));
  Vocab v;
  std::uint32_t size = 0;
  for (const auto& [rank, b] : tokens) size = std::max(size, rank + 1);
  for (const SpecialToken& s : specials) size = std::max(size, s.id + 1);
  std::vector<std::string> by_id(size);
  std::vector<bool> seen(size, false);
  for (auto& [rank, b] : tokens) {
    if (seen[rank]) throw InputError(cat(where, ": rank ", rank, " appears twice"));
    seen[rank] = true;
    by_id[rank] = std::move(b);
  }
  for (const SpecialToken& s : specials) {
    if (seen[s.id])
      throw InputError(cat(where, ": special token ", s.text, " has id ", s.id, ", which is a rank of the file"));
    seen[s.id] = true;
    by_id[s.id] = s.text;
    if (s.text == "<|endoftext|>") v.eot_ = s.id;
  }
  if (v.eot_ == kNone)
    throw InputError(cat(where, ": the special tokens have no <|endoftext|>, which ztok puts after every document"));
  v.set_tokens(by_id);
  v.specials_ = specials;
  const std::vector<bool> special = v.special_ids();
  v.index_tokens(special, where);
  v.index_merges_by_id(special);
  v.hash_ = hash;
  return v;
}

}  // namespace zt::tok
