// Encoding: repair UTF-8, cut into pieces, then per piece: cache, whole-token lookup, BPE merge
// (tiktoken's order: a piece that is itself a token is never merged from bytes).
#include "tok/tokenizer.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "tok/nfc.hpp"
#include "tok/utf8.hpp"

namespace zt::tok {

Tokenizer::Tokenizer(LoadedVocabulary loaded)
    : vocab_(std::move(loaded.vocab)), name_(std::move(loaded.name)), rules_(std::move(loaded.rules)),
      pretokenizer_(classes_, loaded.pattern), raw_added_(rules_.raw_added),
      normalized_added_(rules_.normalized_added) {
  for (const SpecialToken& t : loaded.declared) add_special(t.text, t.id);
}

void Tokenizer::decode(std::span<const std::uint32_t> ids, std::string& out) const {
  for (const std::uint32_t id : ids) {
    if (id >= vocab_.size())
      throw Error(cat("token id ", id, " is outside the vocabulary (size ", vocab_.size(), ")"));
    out += vocab_.token_bytes(id);
  }
}

std::uint32_t Tokenizer::special_id(std::string_view name) const {
  for (const SpecialToken& t : vocab_.specials())
    if (t.text == name) return t.id;
  for (const AddedTokenMatcher::Token& t : rules_.specials)
    if (t.text == name) return t.id;
  const auto it = specials_.find(name);
  return it == specials_.end() ? Vocab::kNone : it->second;
}

std::vector<AddedTokenMatcher::Token> Tokenizer::special_tokens() const {
  std::vector<AddedTokenMatcher::Token> out;
  const auto add = [&](const std::string& text, std::uint32_t id) {
    for (const AddedTokenMatcher::Token& t : out)
      if (t.text == text) return;
    if (!text.empty()) out.push_back({text, id});
  };
  for (const SpecialToken& t : vocab_.specials()) add(t.text, t.id);
  for (const AddedTokenMatcher::Token& t : rules_.specials) add(t.text, t.id);
  for (const auto& [name, id] : specials_) add(name, id);
  return out;
}

void Tokenizer::add_special(const std::string& name, std::uint32_t id) {
  const std::uint32_t known = special_id(name);
  if (known == id) return;  // the vocabulary's own special, or one declared before, given again
  if (known != Vocab::kNone)
    throw InputError(cat("special token ", name, " is already id ", known, ", not ", id));
  if (id < vocab_.size())
    throw InputError(cat("special token ", name, "=", id, ": id ", id, " is a token of the vocabulary (",
                         vocab_.size(), " ids); give an id of ", vocab_.size(), " or more"));
  for (const auto& [other, other_id] : specials_)
    if (other_id == id) throw InputError(cat("special tokens ", other, " and ", name, " share id ", id));
  specials_.emplace(name, id);
}

std::uint64_t Tokenizer::n_ids() const {
  std::uint64_t n = vocab_.size();
  for (const auto& entry : specials_) n = std::max<std::uint64_t>(n, std::uint64_t{entry.second} + 1);
  return n;
}

Encoder::Encoder(const Tokenizer& tokenizer, std::size_t cache_entries)
    : tokenizer_(&tokenizer), merger_(tokenizer.vocab()), cache_(cache_entries), cache_limit_(cache_entries) {
  cache_ids_.reserve(cache_entries * 4);
}

std::size_t Encoder::encode(std::string_view text, std::vector<std::uint32_t>& out) {
  if (first_invalid_utf8(text) == text.size()) {
    encode_valid(text, out);
    return 0;
  }
  repaired_.clear();
  const std::size_t replacements = append_replacing_invalid(text, repaired_);
  encode_valid(repaired_, out);
  if (repaired_.capacity() > BpeMerger::kKeepScratchBytes) {  // one huge text: not kept
    repaired_.clear();
    repaired_.shrink_to_fit();
  }
  return replacements;
}

std::size_t Encoder::encode_with_specials(std::string_view text, std::vector<std::uint32_t>& out) {
  if (!specials_) specials_ = std::make_unique<AddedTokenMatcher>(tokenizer_->special_tokens());
  std::size_t replaced = 0;
  for (std::size_t pos = 0;;) {
    const AddedTokenMatcher::Match m = specials_->empty() ? AddedTokenMatcher::Match{AddedTokenMatcher::kNoMatch, 0, 0}
                                                          : specials_->find(text, pos);
    const std::size_t end = m.begin == AddedTokenMatcher::kNoMatch ? text.size() : m.begin;
    if (end > pos) replaced += encode(text.substr(pos, end - pos), out);
    if (m.begin == AddedTokenMatcher::kNoMatch) return replaced;
    out.push_back(m.id);
    pos = m.begin + m.length;
  }
}

void Encoder::encode_valid(std::string_view text, std::vector<std::uint32_t>& out) {
  if (tokenizer_->has_text_rules()) {
    encode_between_added(text, tokenizer_->raw_added(), tokenizer_->rules().nfc, out);
  } else {
    encode_pieces(text, out);
  }
}

void Encoder::encode_valid_marking(std::string_view text, std::size_t boundary, std::vector<std::uint32_t>& out,
                                   std::vector<std::uint8_t>& past) {
  past.resize(out.size(), 0);
  const Marking marking{boundary, &past};
  if (tokenizer_->has_text_rules()) {
    encode_between_added(text, tokenizer_->raw_added(), tokenizer_->rules().nfc, out, &marking);
  } else {
    encode_pieces(text, out, &marking);
  }
}

// Where `boundary` (an offset in the text) falls in NFC(part), the part starting at byte `pos` of the text:
// NFC of what precedes it there, as NFC does not join across the boundary.
std::size_t Encoder::normalized_boundary(std::string_view part, std::size_t boundary, std::size_t pos) {
  if (boundary <= pos) return 0;
  if (boundary >= pos + part.size()) return std::string::npos;
  std::string head;
  to_nfc(part.substr(0, boundary - pos), head);
  return head.size();
}

// HF tokenizers' order: split at the raw added tokens, normalise each part between them, split that at
// the normalised added tokens, then pre-tokenise and merge each part on its own.
void Encoder::encode_between_added(std::string_view text, const AddedTokenMatcher& added, bool normalize,
                                   std::vector<std::uint32_t>& out, const Marking* marking) {
  for (std::size_t pos = 0;;) {
    const AddedTokenMatcher::Match m = added.empty() ? AddedTokenMatcher::Match{AddedTokenMatcher::kNoMatch, 0, 0}
                                                     : added.find(text, pos);
    const std::size_t end = m.begin == AddedTokenMatcher::kNoMatch ? text.size() : m.begin;
    if (end > pos) {
      const std::string_view part = text.substr(pos, end - pos);
      if (normalize) {  // the boundary in the normalised part
        const Marking inner{marking ? normalized_boundary(part, marking->boundary, pos) : 0, marking ? marking->past : nullptr};
        to_nfc(part, normalized_);
        encode_between_added(normalized_, tokenizer_->normalized_added(), false, out, marking ? &inner : nullptr);
      } else {
        const Marking inner{marking && marking->boundary > pos ? marking->boundary - pos : 0, marking ? marking->past : nullptr};
        encode_pieces(part, out, marking ? &inner : nullptr);
      }
    }
    if (m.begin == AddedTokenMatcher::kNoMatch) return;
    out.push_back(m.id);
    if (marking) marking->past->push_back(m.begin + m.length > marking->boundary ? 1 : 0);
    pos = m.begin + m.length;
  }
}

void Encoder::encode_pieces(std::string_view text, std::vector<std::uint32_t>& out, const Marking* marking) {
  const PreTokenizer& pre = tokenizer_->pretokenizer();
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t end = pre.piece_end(text, pos);
    const std::size_t first = out.size();
    encode_piece(text.substr(pos, end - pos), out);
    if (marking)  // each id's own end: a piece's tokens spell it byte for byte
      for (std::size_t i = first, at = pos; i < out.size(); ++i) {
        at += tokenizer_->vocab().token_bytes(out[i]).size();
        marking->past->push_back(at > marking->boundary ? 1 : 0);
      }
    pos = end;
  }
}

void Encoder::encode_piece(std::string_view piece, std::vector<std::uint32_t>& out) {
  const bool cacheable = piece.size() <= kMaxCachedPieceBytes;
  if (cacheable) {
    const std::uint32_t at = cache_.find(piece);
    if (at != BytesMap::kMissing) {
      const std::uint32_t* ids = cache_ids_.data() + at;
      out.insert(out.end(), ids + 1, ids + 1 + ids[0]);
      return;
    }
  }
  const std::size_t first = out.size();
  const std::uint32_t whole = tokenizer_->rules().whole_token_first ? tokenizer_->vocab().find(piece) : Vocab::kNone;
  if (whole != Vocab::kNone) {
    out.push_back(whole);
  } else {
    merger_.merge(piece, out);
  }
  if (!cacheable) return;
  if (cache_.size() >= cache_limit_) {  // bounded: start over rather than track recency
    cache_.clear();
    cache_ids_.clear();
  }
  cache_.insert(piece, static_cast<std::uint32_t>(cache_ids_.size()));
  cache_ids_.push_back(static_cast<std::uint32_t>(out.size() - first));
  cache_ids_.insert(cache_ids_.end(), out.begin() + first, out.end());
}

}  // namespace zt::tok
