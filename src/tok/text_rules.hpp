// What a tokenizer does around pre-tokenisation and BPE, beyond GPT-2's defaults: the normalizer,
// added tokens matched in the text, the merge rule's whole-token shortcut, the document's BOS.
#pragma once

#include <cstdint>
#include <vector>

#include "tok/added_tokens.hpp"

namespace zt::tok {

struct TextRules {
  bool nfc = false;                  // NFC-normalise the text between raw added tokens
  bool whole_token_first = true;     // a piece that is a token is that token (tiktoken; HF ignore_merges)
  std::vector<AddedTokenMatcher::Token> raw_added;         // matched in the raw text
  std::vector<AddedTokenMatcher::Token> normalized_added;  // matched in the normalised text
  std::vector<AddedTokenMatcher::Token> specials;          // recorded; their text stays ordinary text
  std::uint32_t bos = 0xFFFFFFFFu;   // put before every document, or none (Vocab::kNone)
};

}  // namespace zt::tok
