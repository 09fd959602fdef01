// A byte-level BPE vocabulary: the bytes of every id, the byte tokens, and the merge index BPE uses.
// Three sources: GPT-2's encoder.json (token string -> id) + vocab.bpe (merge list), cross-checked the
// way tiktoken builds its `gpt2` ranks, and a tiktoken rank file (`*.tiktoken`: one "BASE64 RANK" line
// per token) with its special tokens -- in both a merge's rank is the id of the token it makes -- and a
// Hugging Face tokenizer.json's merge list (from_merge_list: a merge's rank is its index in the list).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tok/flat_map.hpp"

namespace zt::tok {

// A special token: never produced from text (encode_ordinary), only added (end of text).
struct SpecialToken {
  std::string text;
  std::uint32_t id;
  friend bool operator==(const SpecialToken&, const SpecialToken&) = default;
};

// A vocabulary file's bytes (encoder.json, vocab.bpe, a rank file, tokenizer.json); when it cannot be
// opened, an InputError "cannot read WHAT PATH" followed by `fix` (e.g. ": run tools/fetch-vocab.sh").
std::string read_vocabulary_file(const std::filesystem::path& path, std::string_view what, std::string_view fix = "");

// GPT-2's printable stand-in for each byte (encoder.py bytes_to_unicode): byte -> code point.
const std::array<char32_t, 256>& byte_to_unicode();
// The bytes of a token written in that alphabet (vocab.bpe, tokenizer.json); false if a code point is
// not a byte's stand-in.
bool byte_level_to_bytes(std::string_view text, std::string& bytes);

class Vocab {
 public:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;

  // Reads DIR/encoder.json and DIR/vocab.bpe; any problem is an InputError naming the file. For a
  // rank file and more choices, see load_vocabulary (encoding.hpp).
  static Vocab load(const std::filesystem::path& dir);
  // The same from the two files' bytes; `where` names them in errors.
  static Vocab parse(std::string_view encoder_json, std::string_view vocab_bpe, const std::string& where);
  // A tiktoken rank file's bytes and its special tokens, one of them "<|endoftext|>"; `hash` is what
  // hash() returns (encoding.hpp decides it). Ids without a token (o200k_base has one) decode to "".
  static Vocab parse_ranks(std::string_view rank_file, const std::vector<SpecialToken>& specials,
                           const std::string& hash, const std::string& where);

  // A merge list in priority order (HF tokenizers' rule: the adjacent pair that comes first in the list
  // is merged first). tokens[id] are the bytes of every id; the ids in `added` are added tokens: never
  // found by find() (their text is not BPE's). Each merge (left, right) makes the token whose bytes
  // are left's followed by right's, which must exist among the ordinary tokens; every single byte must
  // be an ordinary token. `hash` identifies the source. Problems are InputErrors naming `where`.
  struct MergeListParts {
    std::vector<std::string> tokens;
    std::vector<std::uint32_t> added;
    std::vector<std::array<std::uint32_t, 2>> merges;
    std::uint32_t eot = kNone;
    std::string hash;
  };
  static Vocab from_merge_list(MergeListParts parts, const std::string& where);

  std::size_t size() const { return token_offsets_.size() - 1; }  // ids 0..size()-1 (50257)
  std::uint32_t eot() const { return eot_; }                        // <|endoftext|> (50256)
  // GPT-2 files: hex SHA-256 of encoder.json + vocab.bpe bytes; rank files: see encoding.hpp.
  const std::string& hash() const { return hash_; }
  const std::vector<SpecialToken>& specials() const { return specials_; }
  std::size_t n_merges() const { return n_merges_; }

  std::string_view token_bytes(std::uint32_t id) const {
    return std::string_view(token_bytes_).substr(token_offsets_[id], token_offsets_[id + 1] - token_offsets_[id]);
  }
  // Id of an ordinary (mergeable) token with exactly these bytes, or kNone. Never a special token.
  std::uint32_t find(std::string_view bytes) const { return ordinary_.find(bytes); }
  std::uint32_t byte_token(unsigned char b) const { return byte_tokens_[b]; }
  // The rank of merging token a with token b (lower merges first), or kNone when they do not merge.
  // GPT-2 (tiktoken's rule): the id of the token whose bytes are a's followed by b's, precomputed over
  // every split of every token. A merge list: the index of (a, b) in the list.
  std::uint32_t merged(std::uint32_t a, std::uint32_t b) const { return pairs_.find(a, b); }
  // The token a merge of rank `rank` makes.
  std::uint32_t merge_result(std::uint32_t rank) const { return merge_ids_.empty() ? rank : merge_ids_[rank]; }

 private:
  Vocab() = default;
  void set_tokens(const std::vector<std::string>& by_id);
  std::vector<bool> special_ids() const;
  // `not_ordinary[id]`: a special or added token, never found by find() nor merged.
  void index_tokens(const std::vector<bool>& not_ordinary, const std::string& where);
  void index_merges_by_id(const std::vector<bool>& not_ordinary);  // rank == id of the token made
  void check_gpt2_byte_order(const std::string& where);

  std::string token_bytes_;                  // all tokens' bytes, back to back
  std::vector<std::uint32_t> token_offsets_; // [size + 1]
  std::array<std::uint32_t, 256> byte_tokens_{};
  BytesMap ordinary_;
  PairMap pairs_;
  std::vector<std::uint32_t> merge_ids_;     // merge list: rank -> token made; empty: rank == token id
  std::uint32_t eot_ = kNone;
  std::vector<SpecialToken> specials_;
  std::size_t n_merges_ = 0;
  std::string hash_;
};

}  // namespace zt::tok
