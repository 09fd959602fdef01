// The known tiktoken encodings and the rules that turn `--vocab PATH [--encoding --pattern --special]`
// into a vocabulary, a pre-tokenizer and text rules.
#include "tok/encoding.hpp"

#include <charconv>

#include "core/error.hpp"
#include "core/sha256.hpp"
#include "tok/hf_tokenizer_json.hpp"

namespace zt::tok {
namespace {

constexpr const char* kFetchHint = "tools/fetch-vocab.sh --encoding gpt2|cl100k_base|o200k_base writes data/NAME.tiktoken";

std::string specials_text(const std::vector<SpecialToken>& specials) {
  std::string out;
  for (const SpecialToken& s : specials) out += cat(out.empty() ? "" : ",", s.text, "=", s.id);
  return out;
}

std::string known_names() {
  std::string out;
  for (const KnownEncoding& e : known_encodings()) out += cat(out.empty() ? "" : ", ", e.name);
  return out;
}

}  // namespace

const std::vector<KnownEncoding>& known_encodings() {
  static const std::vector<KnownEncoding> kEncodings = {
      {"gpt2", "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930", {PatternKind::kGpt2, 3},
       {{"<|endoftext|>", 50256}}},
      {"cl100k_base", "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7", {PatternKind::kCl100k, 3},
       {{"<|endoftext|>", 100257}, {"<|fim_prefix|>", 100258}, {"<|fim_middle|>", 100259},
        {"<|fim_suffix|>", 100260}, {"<|endofprompt|>", 100276}}},
      {"o200k_base", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d", {PatternKind::kO200k, 3},
       {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}}},
  };
  return kEncodings;
}

const KnownEncoding* known_encoding_by_name(std::string_view name) {
  if (name == "r50k_base") name = "gpt2";
  for (const KnownEncoding& e : known_encodings())
    if (e.name == name) return &e;
  return nullptr;
}

const KnownEncoding* known_encoding_by_sha256(std::string_view sha256_hex) {
  for (const KnownEncoding& e : known_encodings())
    if (e.sha256 == sha256_hex) return &e;
  return nullptr;
}

LoadedVocabulary load_vocabulary(const std::filesystem::path& path, const VocabularyOptions& options) {
  const std::string where = path.string();
  const KnownEncoding* named = nullptr;
  if (!options.encoding.empty() && (named = known_encoding_by_name(options.encoding)) == nullptr)
    throw InputError(cat("--encoding ", options.encoding, " is not one ztok knows (", known_names(), ")"));
  // Specials declared past a vocabulary that brings its own (ztok --format instruct's templates).
  const bool extra = options.extra_specials;
  const std::vector<SpecialToken> declared = extra ? options.specials : std::vector<SpecialToken>{};
  const bool custom = options.pattern.has_value() || (!options.specials.empty() && !extra);
  if (std::filesystem::is_directory(path)) {
    std::error_code ec;
    if (!std::filesystem::exists(path / "encoder.json", ec) && std::filesystem::exists(path / "tokenizer.json", ec))
      throw InputError(cat(where, " is a model directory with a tokenizer.json (not GPT-2's encoder.json + vocab.bpe): "
                           "pass --vocab ", (path / "tokenizer.json").string()));
    if ((named != nullptr && named->name != "gpt2") || custom)
      throw InputError(cat(where, " is a directory, i.e. GPT-2's encoder.json + vocab.bpe: --encoding other than gpt2, "
                           "--pattern and --special apply to tiktoken rank files (", kFetchHint, ")"));
    return {Vocab::load(path), Pattern{PatternKind::kGpt2, 3}, "gpt2", {}, declared};
  }
  if (path.extension() == ".json") {
    if (path.filename() == "encoder.json")
      throw InputError(cat(where, " is GPT-2's encoder.json, which comes with vocab.bpe: pass their directory, --vocab ",
                           path.parent_path().empty() ? std::string(".") : path.parent_path().string()));
    if (named != nullptr || custom)
      throw InputError(cat(where, " is a tokenizer.json, which brings its own pattern and special tokens: "
                           "--encoding, --pattern and --special apply to tiktoken rank files"));
    LoadedVocabulary loaded = load_hf_tokenizer_json(path);
    loaded.declared = declared;
    return loaded;
  }
  const std::string bytes = read_vocabulary_file(path, "vocabulary file", cat(": ", kFetchHint));
  Sha256 hasher;
  hasher.update(bytes);
  const std::string sha = to_hex(hasher.finish());
  const KnownEncoding* known = known_encoding_by_sha256(sha);
  if (named != nullptr && known != named)
    throw InputError(cat(where, " is not ", named->name, ": its SHA-256 is ", sha, ", ", named->name, "'s rank file has ",
                         named->sha256, " (", kFetchHint, ")"));
  if (known != nullptr) {
    if (custom)
      throw InputError(cat(where, " is ", known->name, " (by its SHA-256), which brings its own pattern and special "
                           "tokens: drop --pattern and --special"));
    return {Vocab::parse_ranks(bytes, known->specials, sha, where), known->pattern, std::string(known->name), {},
            declared};
  }
  if (!options.pattern || options.specials.empty())
    throw InputError(cat(where, " (SHA-256 ", sha.substr(0, 16), "...) is not a tiktoken encoding ztok knows (",
                         known_names(), "): give its pre-tokenisation with --pattern gpt2|cl100k|o200k and its "
                         "special tokens with --special '<|endoftext|>=ID[,NAME=ID...]'"));
  Sha256 custom_hash;
  custom_hash.update(bytes);
  custom_hash.update(cat("\n#pattern ", pattern_regex(*options.pattern), "\n#special ", specials_text(options.specials)));
  return {Vocab::parse_ranks(bytes, options.specials, to_hex(custom_hash.finish()), where), *options.pattern,
          "tiktoken-ranks/" + pattern_name(*options.pattern), {}};
}

std::vector<SpecialToken> parse_special_tokens(std::string_view spec) {
  std::vector<SpecialToken> out;
  for (std::size_t pos = 0; pos <= spec.size();) {
    std::size_t comma = spec.find(',', pos);
    if (comma == std::string_view::npos) comma = spec.size();
    const std::string_view item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    const std::size_t eq = item.rfind('=');
    std::uint32_t id = 0;
    const std::string_view id_text = eq == std::string_view::npos ? "" : item.substr(eq + 1);
    const auto [end, err] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
    const bool digits = !id_text.empty() && id_text.find_first_not_of("0123456789") == std::string_view::npos;
    if (eq != 0 && eq != std::string_view::npos && digits && (err == std::errc::result_out_of_range || id >= (1u << 30)))
      throw ConfigError(cat("--special: \"", item, "\": the id ", id_text, " is out of range (ids are below 2^30 = ",
                            1u << 30, ")"));
    if (eq == 0 || eq == std::string_view::npos || id_text.empty() || err != std::errc() ||
        end != id_text.data() + id_text.size())
      throw ConfigError(cat("--special: \"", item, "\" is not NAME=ID (e.g. --special '<|endoftext|>=100257')"));
    for (const SpecialToken& s : out)
      if (s.text == item.substr(0, eq) || s.id == id)
        throw ConfigError(cat("--special: \"", item, "\" repeats a name or an id"));
    out.push_back({std::string(item.substr(0, eq)), id});
  }
  return out;
}

}  // namespace zt::tok
