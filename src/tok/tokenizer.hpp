// Byte-level BPE: token-for-token identical to tiktoken's encode_ordinary for gpt2, cl100k_base and
// o200k_base (and any rank file with one of their patterns), and to HF tokenizers' encode (without
// special-token matching) for a Hugging Face tokenizer.json with one of those patterns (TextRules).
// Tokenizer is immutable and shared by threads; each thread encodes with its own Encoder.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tok/added_tokens.hpp"
#include "tok/bpe.hpp"
#include "tok/encoding.hpp"
#include "tok/pretokenizer.hpp"
#include "tok/text_rules.hpp"
#include "tok/unicode.hpp"
#include "tok/vocab.hpp"

namespace zt::tok {

class Tokenizer {
 public:
  // GPT-2's vocabulary and pattern.
  explicit Tokenizer(Vocab vocab) : Tokenizer(LoadedVocabulary{std::move(vocab), Pattern{}, "gpt2", {}}) {}
  explicit Tokenizer(LoadedVocabulary loaded);
  // `--vocab PATH` with ztok's --encoding / --pattern / --special: a GPT-2 directory, a tiktoken rank
  // file or a tokenizer.json (encoding.hpp).
  static Tokenizer load(const std::filesystem::path& path, const VocabularyOptions& options = {}) {
    return Tokenizer(load_vocabulary(path, options));
  }
  Tokenizer(const Tokenizer&) = delete;  // the pre-tokenizer points into this object
  Tokenizer& operator=(const Tokenizer&) = delete;
  Tokenizer(Tokenizer&& other) noexcept
      : vocab_(std::move(other.vocab_)), name_(std::move(other.name_)), rules_(std::move(other.rules_)),
        classes_(std::move(other.classes_)), pretokenizer_(classes_, other.pretokenizer_.pattern()),
        raw_added_(std::move(other.raw_added_)), normalized_added_(std::move(other.normalized_added_)),
        specials_(std::move(other.specials_)) {}

  const Vocab& vocab() const { return vocab_; }
  // "gpt2", "cl100k_base", "o200k_base", "tiktoken-ranks/PATTERN" or "hf-bpe": the shards' `tokenizer`.
  const std::string& name() const { return name_; }
  const TextRules& rules() const { return rules_; }
  const Pattern& pattern() const { return pretokenizer_.pattern(); }
  std::uint32_t eot() const { return vocab_.eot(); }  // after every document
  std::uint32_t bos() const { return rules_.bos; }    // before every document, or Vocab::kNone
  const AddedTokenMatcher& raw_added() const { return raw_added_; }
  const AddedTokenMatcher& normalized_added() const { return normalized_added_; }
  // Whether encoding does more than pre-tokenise and merge (normalise, match added tokens).
  bool has_text_rules() const { return rules_.nfc || !raw_added_.empty() || !normalized_added_.empty(); }

  // The single id of special token `name` ("<|endoftext|>", "<|im_start|>", "<|eot_id|>", ...), or
  // Vocab::kNone: the vocabulary's own specials (a rank file's, a tokenizer.json's special added
  // tokens, GPT-2's <|endoftext|>), then those declared with add_special (ztok's --special NAME=ID).
  // The one lookup chat templates use, whatever file the specials come from.
  std::uint32_t special_id(std::string_view name) const;
  // Every special token: the vocabulary's, a tokenizer.json's special added tokens, those add_special declared.
  std::vector<AddedTokenMatcher::Token> special_tokens() const;
  // Declares a special token before the tokenizer is shared. The vocabulary's own special given again
  // with its id is accepted; an id of an ordinary token, or a name or id already taken differently, is
  // a zt::InputError.
  void add_special(const std::string& name, std::uint32_t id);
  // Ids in use: the vocabulary's and every declared special's (what a shard's vocab_size must cover).
  std::uint64_t n_ids() const;
  const PreTokenizer& pretokenizer() const { return pretokenizer_; }
  const CharClassTable& classes() const { return classes_; }

  // Appends the bytes of `ids` to out (the special token as its text "<|endoftext|>"). The bytes of a
  // prefix of a sequence may end inside a UTF-8 character. Throws zt::Error for an id >= vocab size.
  void decode(std::span<const std::uint32_t> ids, std::string& out) const;
  std::string decode(std::span<const std::uint32_t> ids) const {
    std::string out;
    decode(ids, out);
    return out;
  }

 private:
  Vocab vocab_;
  std::string name_;
  TextRules rules_;
  CharClassTable classes_;
  PreTokenizer pretokenizer_;
  AddedTokenMatcher raw_added_, normalized_added_;
  std::map<std::string, std::uint32_t, std::less<>> specials_;  // declared by add_special
};

// Per-thread encoding state: the piece cache and BPE scratch, so encoding allocates nothing per piece.
class Encoder {
 public:
  // Pieces up to kMaxCachedPieceBytes are cached; the cache is emptied when it holds
  // cache_entries pieces, so its memory stays below about cache_entries * 100 bytes.
  static constexpr std::size_t kMaxCachedPieceBytes = 48;
  explicit Encoder(const Tokenizer& tokenizer, std::size_t cache_entries = std::size_t{1} << 15);

  // Appends the ids of `text` to out. Ill-formed UTF-8 is first replaced (one U+FFFD per maximal
  // subpart, Python's errors="replace"); returns the number of replacements. The text of a special
  // token is ordinary text (tiktoken's encode_ordinary); non-special added tokens are matched.
  std::size_t encode(std::string_view text, std::vector<std::uint32_t>& out);
  // Same for text known to be valid UTF-8.
  void encode_valid(std::string_view text, std::vector<std::uint32_t>& out);
  // encode_valid, and for each id appended, whether the text it comes from ends past byte `boundary` of
  // `text` (1) or not (0), appended to `past`: which ids of a rendered chat turn hold its reply. The
  // boundary must be a place NFC does not join across (after a line feed, as every template's header ends).
  void encode_valid_marking(std::string_view text, std::size_t boundary, std::vector<std::uint32_t>& out,
                            std::vector<std::uint8_t>& past);
  // Appends the ids of one pre-token piece.
  void encode_piece(std::string_view piece, std::vector<std::uint32_t>& out);
  // As encode(), but as a Hugging Face tokenizer encodes a prompt (tokenizer(text)): a special token's
  // text (leftmost, longest) is that token's id. Returns the replacements of ill-formed UTF-8.
  std::size_t encode_with_specials(std::string_view text, std::vector<std::uint32_t>& out);

 private:
  // Where ids came from relative to a boundary, for encode_valid_marking; null on the plain path.
  struct Marking {
    std::size_t boundary;  // a byte offset in the text being encoded
    std::vector<std::uint8_t>* past;
  };
  void encode_pieces(std::string_view text, std::vector<std::uint32_t>& out, const Marking* marking = nullptr);
  void encode_between_added(std::string_view text, const AddedTokenMatcher& added, bool normalize,
                            std::vector<std::uint32_t>& out, const Marking* marking = nullptr);
  static std::size_t normalized_boundary(std::string_view part, std::size_t boundary, std::size_t pos);

  const Tokenizer* tokenizer_;
  BpeMerger merger_;
  BytesMap cache_;                        // piece -> offset in cache_ids_: [count, ids...]
  std::vector<std::uint32_t> cache_ids_;
  std::size_t cache_limit_;
  std::string repaired_;                  // scratch for text with ill-formed UTF-8
  std::string normalized_;                // scratch: NFC of the text between two raw added tokens
  std::unique_ptr<AddedTokenMatcher> specials_;  // encode_with_specials: every special's text, made at first use
};

}  // namespace zt::tok
