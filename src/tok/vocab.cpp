// Vocabulary loading: GPT-2's unicode-escaped token strings back to bytes, consistency checks as
// tiktoken's data_gym_to_mergeable_bpe_ranks makes them, and the merge-pair index for BPE.
#include "tok/vocab.hpp"

#include <fstream>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/read_file.hpp"
#include "core/sha256.hpp"
#include "tok/unicode.hpp"

namespace zt::tok {
namespace {

constexpr const char* kEndOfText = "<|endoftext|>";

// bytes_to_unicode's order: the printable Latin-1 bytes keep their code point, the other 68 bytes
// map to U+0100.. in byte order. This is also tiktoken's rank order of the 256 single-byte tokens.
struct ByteOrder {
  std::array<char32_t, 256> to_unicode{};
  std::array<unsigned char, 256> rank_to_byte{};
  ByteOrder() {
    std::size_t rank = 0;
    auto printable = [](unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
    for (unsigned b = 0; b < 256; ++b)
      if (printable(b)) { to_unicode[b] = b; rank_to_byte[rank++] = static_cast<unsigned char>(b); }
    char32_t next = 256;
    for (unsigned b = 0; b < 256; ++b)
      if (!printable(b)) { to_unicode[b] = next++; rank_to_byte[rank++] = static_cast<unsigned char>(b); }
  }
};
const ByteOrder& byte_order() {
  static const ByteOrder kOrder;
  return kOrder;
}

constexpr const char* kGpt2FetchHint =
    ": run tools/fetch-vocab.sh DIR and pass --vocab DIR (DIR holds encoder.json and vocab.bpe)";

// Turns a GPT-2 token string (UTF-8 of the byte stand-ins) into its bytes; false if a code point is
// not a stand-in.
bool unicode_to_bytes(std::string_view text, std::string& bytes) {
  static const auto kInverse = [] {
    std::unordered_map<char32_t, unsigned char> inverse;
    for (unsigned b = 0; b < 256; ++b) inverse[byte_order().to_unicode[b]] = static_cast<unsigned char>(b);
    return inverse;
  }();
  bytes.clear();
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  for (std::size_t i = 0, len = 0; i < text.size(); i += len) {
    const auto it = kInverse.find(decode_valid_utf8(p + i, len));
    if (it == kInverse.end()) return false;
    bytes += static_cast<char>(it->second);
  }
  return true;
}

using Entries = std::vector<std::pair<std::string, std::uint32_t>>;  // token bytes, id

Entries parse_encoder(std::string_view json_text, const std::string& where, std::uint32_t& eot) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(cat(where, "/encoder.json is not valid JSON: ", e.what()));
  }
  if (!json.is_object()) throw InputError(cat(where, "/encoder.json: expected a JSON object of token -> id"));
  Entries entries;
  entries.reserve(json.size());
  std::string bytes;
  for (const auto& [key, value] : json.items()) {
    if (!value.is_number_unsigned() || value.get<std::uint64_t>() >= json.size())
      throw InputError(cat(where, "/encoder.json: id of token ", key, " is not in 0..", json.size() - 1));
    const auto id = value.get<std::uint32_t>();
    if (key == kEndOfText) { eot = id; entries.emplace_back(key, id); continue; }
    if (!unicode_to_bytes(key, bytes))
      throw InputError(cat(where, "/encoder.json: token ", key, " is not in GPT-2's byte-to-unicode alphabet"));
    entries.emplace_back(bytes, id);
  }
  if (eot == Vocab::kNone) throw InputError(cat(where, "/encoder.json has no ", kEndOfText, " token"));
  return entries;
}

}  // namespace

const std::array<char32_t, 256>& byte_to_unicode() { return byte_order().to_unicode; }
bool byte_level_to_bytes(std::string_view text, std::string& bytes) { return unicode_to_bytes(text, bytes); }

Vocab Vocab::parse(std::string_view encoder_json, std::string_view vocab_bpe, const std::string& where) {
  Vocab v;
  Entries entries = parse_encoder(encoder_json, where, v.eot_);
  std::vector<std::string> by_id(entries.size());
  std::vector<bool> seen(entries.size(), false);
  for (auto& [bytes, id] : entries) {
    if (seen[id]) throw InputError(cat(where, "/encoder.json: id ", id, " is used twice"));
    seen[id] = true;
    by_id[id] = std::move(bytes);
  }
  v.set_tokens(by_id);
  v.specials_ = {{kEndOfText, v.eot_}};
  const std::vector<bool> special = v.special_ids();
  v.index_tokens(special, where + "/encoder.json");
  v.check_gpt2_byte_order(where);
  v.index_merges_by_id(special);
  // vocab.bpe: "#version" line, then merge n (0-based) "A B" must be the token with id 256 + n.
  std::istringstream lines{std::string(vocab_bpe)};
  std::string line, a, b;
  std::size_t line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const std::size_t space = line.find(' ');
    if (space == std::string::npos || !unicode_to_bytes(line.substr(0, space), a) ||
        !unicode_to_bytes(line.substr(space + 1), b) || v.find(a + b) != 256 + v.n_merges_) {
      throw InputError(cat(where, "/vocab.bpe line ", line_no, " (", line, ") is not merge ", v.n_merges_,
                           " of encoder.json (token id ", 256 + v.n_merges_, "): the two files do not belong together"));
    }
    ++v.n_merges_;
  }
  if (256 + v.n_merges_ + 1 != v.size())
    throw InputError(cat(where, ": encoder.json has ", v.size(), " tokens but vocab.bpe has ", v.n_merges_,
                         " merges (expected 256 + merges + 1 special)"));
  Sha256 hasher;
  hasher.update(encoder_json);
  hasher.update(vocab_bpe);
  v.hash_ = to_hex(hasher.finish());
  return v;
}

void Vocab::set_tokens(const std::vector<std::string>& by_id) {
  token_bytes_.clear();
  token_offsets_.assign(1, 0);
  for (const std::string& bytes : by_id) {
    token_bytes_ += bytes;
    token_offsets_.push_back(static_cast<std::uint32_t>(token_bytes_.size()));
  }
}

std::vector<bool> Vocab::special_ids() const {
  std::vector<bool> special(size(), false);
  for (const SpecialToken& s : specials_) special[s.id] = true;
  return special;
}

Vocab Vocab::from_merge_list(MergeListParts parts, const std::string& where) {
  Vocab v;
  v.set_tokens(parts.tokens);
  v.eot_ = parts.eot;
  v.hash_ = std::move(parts.hash);
  std::vector<bool> added(v.size(), false);
  for (const std::uint32_t id : parts.added) added.at(id) = true;
  v.index_tokens(added, where);
  v.pairs_ = PairMap(parts.merges.size());
  v.merge_ids_.reserve(parts.merges.size());
  for (std::size_t rank = 0; rank < parts.merges.size(); ++rank) {
    const auto [left, right] = parts.merges[rank];
    const std::uint32_t made = v.find(cat(v.token_bytes(left), v.token_bytes(right)));
    if (made == kNone)
      throw InputError(cat(where, ": merge ", rank, " makes a token that is not in the vocabulary"));
    if (v.pairs_.find(left, right) != PairMap::kMissing)
      throw InputError(cat(where, ": merge ", rank, " repeats merge ", v.pairs_.find(left, right)));
    v.pairs_.insert(left, right, static_cast<std::uint32_t>(rank));
    v.merge_ids_.push_back(made);
  }
  v.n_merges_ = parts.merges.size();
  return v;
}

// GPT-2: byte tokens must be ids 0..255 in tiktoken's order.
void Vocab::check_gpt2_byte_order(const std::string& where) {
  for (unsigned rank = 0; rank < 256; ++rank) {
    const unsigned char b = byte_order().rank_to_byte[rank];
    if (find(std::string_view(reinterpret_cast<const char*>(&b), 1)) != rank)
      throw InputError(cat(where, "/encoder.json: single-byte token ", unsigned{b}, " must have id ", rank));
  }
}

// The ordinary tokens (not special or added, not empty: o200k_base has an id without a token) and
// every byte's token.
void Vocab::index_tokens(const std::vector<bool>& not_ordinary, const std::string& where) {
  ordinary_ = BytesMap(size());
  for (std::uint32_t id = 0; id < size(); ++id) {
    if (not_ordinary[id] || token_bytes(id).empty()) continue;
    if (!ordinary_.insert(token_bytes(id), id))
      throw InputError(cat(where, ": token ", id, " has the same bytes as token ", find(token_bytes(id))));
  }
  for (unsigned b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    byte_tokens_[b] = find(std::string_view(&c, 1));
    if (byte_tokens_[b] == kNone)
      throw InputError(cat(where, ": no token for the single byte ", b, " (a byte-level BPE needs all 256)"));
  }
}

// tiktoken's merge rule: a pair merges at the rank (id) of the token it makes, for every split of
// every ordinary token into two ordinary tokens.
void Vocab::index_merges_by_id(const std::vector<bool>& not_ordinary) {
  std::vector<std::array<std::uint32_t, 3>> pairs;
  for (std::uint32_t id = 0; id < size(); ++id) {
    if (not_ordinary[id]) continue;
    const std::string_view t = token_bytes(id);
    for (std::size_t k = 1; k < t.size(); ++k) {
      const std::uint32_t left = find(t.substr(0, k)), right = find(t.substr(k));
      if (left != kNone && right != kNone) pairs.push_back({left, right, id});
    }
  }
  pairs_ = PairMap(pairs.size());
  for (const auto& [left, right, id] : pairs) pairs_.insert(left, right, id);
}

Vocab Vocab::load(const std::filesystem::path& dir) {
  const std::string encoder = read_vocabulary_file(dir / "encoder.json", "vocabulary file", kGpt2FetchHint);
  const std::string merges = read_vocabulary_file(dir / "vocab.bpe", "vocabulary file", kGpt2FetchHint);
  return parse(encoder, merges, dir.string());
}

std::string read_vocabulary_file(const std::filesystem::path& path, std::string_view what, std::string_view fix) {
  std::optional<std::string> bytes = read_file(path);
  if (bytes) return std::move(*bytes);
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  const char* why = std::filesystem::is_directory(status) ? "it is a directory, not a file"
                    : !std::filesystem::exists(status)    ? "no such file"
                                                          : "it exists but cannot be read: permissions?";
  throw InputError(cat("cannot read ", what, " ", path.string(), " (", why, ")", fix));
}

}  // namespace zt::tok
