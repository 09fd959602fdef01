// A Hugging Face tokenizer.json whose model is byte-level BPE (GPT-2, Llama 3, Qwen2 ship one), read
// into what the Tokenizer needs. Everything else is refused, naming what it is, its JSON path and what
// is supported.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tok/encoding.hpp"

namespace zt::tok {

// The file's vocabulary (vocab.hash(): hex SHA-256 of the file's bytes; vocab.eot(): the end-of-text
// special token), its pattern (the Split regex, or ByteLevel's built-in GPT-2 regex, through
// pattern_from_regex: any other regex is refused), name "hf-bpe", and its rules: whole_token_first
// is model.ignore_merges; non-special added tokens are matched in the raw text unless normalized: true
// under an NFC normalizer; bos is the post-processor's leading special token.
LoadedVocabulary parse_hf_tokenizer_json(std::string_view json_text, const std::string& where);
LoadedVocabulary load_hf_tokenizer_json(const std::filesystem::path& path);

// The special token that ends a document, by name, first found: <|endoftext|> (GPT-2, Qwen2),
// <|end_of_text|> (Llama 3), </s>.
const std::vector<std::string_view>& end_of_text_names();

}  // namespace zt::tok
