// Added tokens that are matched in the text before pre-tokenisation, as HF tokenizers' AddedVocabulary
// does: leftmost-longest, each match one id, the text between matches tokenised on its own.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zt::tok {

class AddedTokenMatcher {
 public:
  struct Token {
    std::string text;  // non-empty
    std::uint32_t id;
  };
  struct Match {
    std::size_t begin, length;
    std::uint32_t id;
  };
  static constexpr std::size_t kNoMatch = std::string_view::npos;

  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<Token> tokens);

  bool empty() const { return tokens_.empty(); }
  // The leftmost match at or after `from`, the longest token there; begin == kNoMatch when none.
  Match find(std::string_view text, std::size_t from) const;
  // Whether an occurrence of some token starts before `cut` and ends after it: cutting the text
  // there would change the matches.
  bool spans(std::string_view text, std::size_t cut) const;

 private:
  bool matches_at(std::string_view text, std::size_t pos, const Token& t) const {
    return text.size() - pos >= t.text.size() && text.compare(pos, t.text.size(), t.text) == 0;
  }

  std::vector<Token> tokens_;        // longest first: the first that matches at a position is the longest
  std::array<bool, 256> first_{};    // bytes some token starts with
  std::size_t longest_ = 0;
};

}  // namespace zt::tok
