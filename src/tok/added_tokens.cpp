// Leftmost-longest matching of a few dozen literal tokens: a byte table finds the candidate starts,
// then the tokens are compared longest first (Qwen2 has 22, Llama 3 none that are not special).
#include "tok/added_tokens.hpp"

#include <algorithm>

namespace zt::tok {

AddedTokenMatcher::AddedTokenMatcher(std::vector<Token> tokens) : tokens_(std::move(tokens)) {
  std::stable_sort(tokens_.begin(), tokens_.end(),
                   [](const Token& a, const Token& b) { return a.text.size() > b.text.size(); });
  for (const Token& t : tokens_) {
    first_[static_cast<unsigned char>(t.text[0])] = true;
    longest_ = std::max(longest_, t.text.size());
  }
}

AddedTokenMatcher::Match AddedTokenMatcher::find(std::string_view text, std::size_t from) const {
  for (std::size_t pos = from; pos < text.size(); ++pos) {
    if (!first_[static_cast<unsigned char>(text[pos])]) continue;
    for (const Token& t : tokens_)
      if (matches_at(text, pos, t)) return {pos, t.text.size(), t.id};
  }
  return {kNoMatch, 0, 0};
}

bool AddedTokenMatcher::spans(std::string_view text, std::size_t cut) const {
  const std::size_t lowest = cut >= longest_ ? cut - longest_ + 1 : 0;
  for (std::size_t pos = lowest; pos < cut; ++pos) {
    if (!first_[static_cast<unsigned char>(text[pos])]) continue;
    for (const Token& t : tokens_)
      if (pos + t.text.size() > cut && matches_at(text, pos, t)) return true;
  }
  return false;
}

}  // namespace zt::tok
