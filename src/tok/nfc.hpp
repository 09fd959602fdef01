// Unicode Normalization Form C, the normalizer of Qwen2-family tokenizer.json files (utf8proc).
#pragma once

#include <string>
#include <string_view>

namespace zt::tok {

// Replaces `out` with the NFC form of `text` (valid UTF-8). Runs of ASCII are copied as they are: an
// ASCII character never composes with the character before it and is never reordered, so the text
// is normalised piecewise between them.
void to_nfc(std::string_view text, std::string& out);

}  // namespace zt::tok
