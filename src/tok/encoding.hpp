// Which vocabulary, pre-tokenizer, special tokens and text rules a `--vocab PATH` means:
//   a directory       GPT-2's encoder.json + vocab.bpe (tools/fetch-vocab.sh DIR)
//   a *.json file     a Hugging Face tokenizer.json of a byte-level BPE (hf_tokenizer_json.hpp); its
//                     Split regex must be one pattern_from_regex knows
//   any other file    a tiktoken rank file (`*.tiktoken`). The encodings gpt2 (= r50k_base),
//                     cl100k_base and o200k_base are recognised by the SHA-256 of the file and bring
//                     their own pattern and special tokens; any other rank file needs both a pattern
//                     and the special tokens (one of them <|endoftext|>), or is refused.
// --encoding, --pattern and --special apply to rank files only (--encoding gpt2 also to a directory).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tok/pattern.hpp"
#include "tok/text_rules.hpp"
#include "tok/vocab.hpp"

namespace zt::tok {

// A tiktoken encoding ztok knows: tiktoken's own definition (registry), with the rank file's SHA-256.
struct KnownEncoding {
  std::string_view name;    // "gpt2", "cl100k_base", "o200k_base"
  std::string_view sha256;  // hex SHA-256 of the rank file (as OpenAI publishes it)
  Pattern pattern;
  std::vector<SpecialToken> specials;
};
const std::vector<KnownEncoding>& known_encodings();
// By name ("r50k_base" is "gpt2") or by rank-file SHA-256; nullptr when unknown.
const KnownEncoding* known_encoding_by_name(std::string_view name);
const KnownEncoding* known_encoding_by_sha256(std::string_view sha256_hex);

// ztok's --encoding, --pattern and --special.
struct VocabularyOptions {
  std::string encoding;                // "" or a known encoding's name, checked against the file
  std::optional<Pattern> pattern;      // rank files of no known encoding only
  // A rank file of no known encoding: its special tokens. With extra_specials, any other vocabulary:
  // special tokens declared past it (a chat template's tokens the vocabulary lacks; ztok --format
  // instruct); without, they are refused for other vocabularies.
  std::vector<SpecialToken> specials;
  bool extra_specials = false;
};

struct LoadedVocabulary {
  Vocab vocab;
  Pattern pattern;
  // What the shards' `tokenizer` attribute says: the encoding name ("gpt2", "cl100k_base",
  // "o200k_base"), "tiktoken-ranks/PATTERN" for another rank file, "hf-bpe" for a tokenizer.json.
  std::string name;
  TextRules rules;  // tokenizer.json only: normaliser, added tokens, BOS; GPT-2's defaults otherwise
  std::vector<SpecialToken> declared;  // VocabularyOptions::extra_specials: Tokenizer::add_special's
};

// Loads PATH as described above; every problem is an InputError naming the file and the fix. A rank
// file's Vocab::hash() is its SHA-256 for a known encoding, else the SHA-256 of its bytes followed by
// "\n#pattern REGEX\n#special NAME=ID,..." (the pattern and special tokens decide the ids too); a
// tokenizer.json's is the SHA-256 of the file; GPT-2's directory's that of encoder.json + vocab.bpe.
LoadedVocabulary load_vocabulary(const std::filesystem::path& path, const VocabularyOptions& options = {});

// "NAME=ID[,NAME=ID...]" (ztok --special) to special tokens; a ConfigError names what is wrong.
std::vector<SpecialToken> parse_special_tokens(std::string_view spec);

}  // namespace zt::tok
