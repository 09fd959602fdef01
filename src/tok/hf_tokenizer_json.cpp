// tokenizer.json -> LoadedVocabulary. Each part of the file is checked where it is read; a refusal
// names the JSON path, what is there, and what ztok supports.
#include "tok/hf_tokenizer_json.hpp"

#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/sha256.hpp"
#include "tok/nfc.hpp"

namespace zt::tok {
namespace {

using Json = nlohmann::json;

constexpr const char* kSupported =
    "ztok supports model.type BPE over the byte-level alphabet; pre_tokenizer ByteLevel (use_regex true) or a "
    "Sequence of Split (a known Regex, behavior Isolated) and ByteLevel (use_regex false), add_prefix_space false; "
    "normalizer null or NFC; added tokens without lstrip/rstrip/single_word; post_processor null, ByteLevel, "
    "TemplateProcessing whose single is [optional SpecialToken, Sequence A], or a Sequence of those";

struct Context {
  const std::string& where;
  [[noreturn]] void refuse(const std::string& path, const std::string& what) const {
    throw InputError(cat(where, ": ", path, " is ", what, ", which ztok does not read (", kSupported, ")"));
  }
  const Json& field(const Json& object, const std::string& path, const char* name) const {
    if (!object.is_object() || !object.contains(name)) refuse(cat(path, ".", name), "missing");
    return object[name];
  }
};

std::string type_of(const Json& j) {
  if (j.is_object() && j.contains("type") && j["type"].is_string()) return j["type"].get<std::string>();
  return j.dump().substr(0, 80);
}
bool flag(const Json& object, const char* name) {
  return object.contains(name) && object[name].is_boolean() && object[name].get<bool>();
}
bool null_or_empty(const Json& object, const char* name) {
  return !object.contains(name) || object[name].is_null() || (object[name].is_string() && object[name].get<std::string>().empty());
}

Pattern known_pattern(const Context& c, std::string_view regex, const std::string& path) {
  if (const std::optional<Pattern> pattern = pattern_from_regex(regex)) return *pattern;
  throw InputError(cat(c.where, ": ", path, " is the pre-tokenizer pattern \"", regex,
                       "\", for which ztok has no exact scanner (known: GPT-2's, cl100k_base's (Llama 3), o200k_base's, "
                       "with digit runs \\p{N}{1,K} or \\p{N} (Qwen2), e.g. \"", pattern_regex({PatternKind::kCl100k, 3}),
                       "\"); tokenizers with this pattern are not supported yet"));
}

bool parse_normalizer(const Context& c, const Json& n) {
  if (n.is_null()) return false;
  if (type_of(n) == "NFC") return true;
  if (type_of(n) == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
    for (std::size_t i = 0; i < n["normalizers"].size(); ++i)
      if (type_of(n["normalizers"][i]) != "NFC")
        c.refuse(cat("normalizer.normalizers[", i, "]"), cat("a ", type_of(n["normalizers"][i]), " normalizer"));
    return !n["normalizers"].empty();
  }
  c.refuse("normalizer", cat("a ", type_of(n), " normalizer"));
}

void check_byte_level(const Context& c, const Json& b, const std::string& path, bool use_regex) {
  if (flag(b, "add_prefix_space")) c.refuse(cat(path, ".add_prefix_space"), "true");
  // HF's ByteLevel defaults use_regex to true (serde default_true; files before tokenizers ~0.11 leave it
  // out): absent is true, which after a Split runs GPT-2's regex on each piece (outside sweep 34 F1/F5).
  const bool regex = !b.contains("use_regex") || flag(b, "use_regex");
  if (regex != use_regex) c.refuse(cat(path, ".use_regex"), use_regex ? "false" : "true (after a Split; absent means true)");
}

Pattern parse_pretokenizer(const Context& c, const Json& p) {
  if (type_of(p) == "ByteLevel") {  // its built-in regex is GPT-2's
    check_byte_level(c, p, "pre_tokenizer", true);
    return Pattern{PatternKind::kGpt2, 3};
  }
  if (type_of(p) != "Sequence") c.refuse("pre_tokenizer", cat("a ", type_of(p), " pre-tokenizer (not byte-level)"));
  const Json& steps = c.field(p, "pre_tokenizer", "pretokenizers");
  if (!steps.is_array() || steps.size() != 2 || type_of(steps[0]) != "Split" || type_of(steps[1]) != "ByteLevel")
    c.refuse("pre_tokenizer.pretokenizers", cat("the sequence ", steps.dump().substr(0, 200)));
  const Json& split = steps[0];
  const Json& pattern = c.field(split, "pre_tokenizer.pretokenizers[0]", "pattern");
  if (!pattern.is_object() || !pattern.contains("Regex") || !pattern["Regex"].is_string())
    c.refuse("pre_tokenizer.pretokenizers[0].pattern", cat("the pattern ", pattern.dump()));
  if (!split.contains("behavior") || split["behavior"] != "Isolated")
    c.refuse("pre_tokenizer.pretokenizers[0].behavior", split.value("behavior", Json()).dump());
  if (flag(split, "invert")) c.refuse("pre_tokenizer.pretokenizers[0].invert", "true");
  check_byte_level(c, steps[1], "pre_tokenizer.pretokenizers[1]", false);
  return known_pattern(c, pattern["Regex"].get<std::string>(), "pre_tokenizer.pretokenizers[0].pattern.Regex");
}

void check_model(const Context& c, const Json& m) {
  if (type_of(m) != "BPE") c.refuse("model.type", cat("\"", type_of(m), "\" (a ", type_of(m), " model)"));
  if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"] != 0) c.refuse("model.dropout", m["dropout"].dump());
  if (!null_or_empty(m, "continuing_subword_prefix"))
    c.refuse("model.continuing_subword_prefix", m["continuing_subword_prefix"].dump());
  if (!null_or_empty(m, "end_of_word_suffix")) c.refuse("model.end_of_word_suffix", m["end_of_word_suffix"].dump());
  if (flag(m, "byte_fallback")) c.refuse("model.byte_fallback", "true (a SentencePiece-style BPE with <0xNN> tokens)");
}

// Ids 0..n-1 of model.vocab and added_tokens, dense; model.vocab keys in the byte-level alphabet.
struct Tokens {
  std::size_t max_ids = 0;  // entries in model.vocab and added_tokens: dense ids stay below
  std::vector<std::string> bytes;
  std::vector<bool> present;
  std::unordered_map<std::string, std::uint32_t> by_string;  // model.vocab
  std::vector<std::string> vocab_key;                        // model.vocab's string of each id ("" if none)
};

void set_token(const Context& c, Tokens& t, std::uint64_t id, std::string bytes, const std::string& path) {
  if (id >= t.max_ids) c.refuse(path, cat("the id ", id, " (the ids must be 0..n-1, n <= ", t.max_ids, " entries)"));
  if (id >= t.bytes.size()) {
    t.bytes.resize(id + 1);
    t.present.resize(id + 1, false);
  }
  t.bytes[id] = std::move(bytes);
  t.present[id] = true;
}

Tokens read_vocab(const Context& c, const Json& vocab, const Json& added) {
  if (!vocab.is_object()) c.refuse("model.vocab", "not an object of token -> id");
  Tokens t;
  t.max_ids = vocab.size() + (added.is_array() ? added.size() : 0);
  t.by_string.reserve(vocab.size());
  std::vector<bool> is_added(t.max_ids, false);
  for (const Json& a : added)
    if (a.is_object() && a.contains("id") && a["id"].is_number_unsigned() && a["id"].get<std::uint64_t>() < t.max_ids)
      is_added[a["id"].get<std::uint64_t>()] = true;
  std::string bytes;
  for (const auto& [key, value] : vocab.items()) {
    const std::string path = cat("model.vocab[", Json(key).dump(), "]");
    if (!value.is_number_unsigned()) c.refuse(path, cat("the id ", value.dump()));
    const auto id = value.get<std::uint64_t>();
    if (!byte_level_to_bytes(key, bytes) && !(id < t.max_ids && is_added[id]))
      c.refuse(path, "a token outside the byte-level alphabet (a non-byte-level BPE)");
    if (id < t.present.size() && t.present[id]) c.refuse(path, cat("a second token with id ", id));
    set_token(c, t, id, bytes, path);
    t.by_string.emplace(key, static_cast<std::uint32_t>(id));
    if (id >= t.vocab_key.size()) t.vocab_key.resize(id + 1);
    t.vocab_key[id] = key;
  }
  return t;
}

std::vector<std::array<std::uint32_t, 2>> read_merges(const Context& c, const Json& merges, const Tokens& t) {
  if (!merges.is_array()) c.refuse("model.merges", "not an array");
  std::vector<std::array<std::uint32_t, 2>> out;
  out.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const Json& m = merges[i];
    std::string left, right;
    if (m.is_string()) {  // "a b"
      const std::string s = m.get<std::string>();
      const std::size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) c.refuse(cat("model.merges[", i, "]"), m.dump());
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {  // ["a", "b"]
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      c.refuse(cat("model.merges[", i, "]"), m.dump());
    }
    const auto l = t.by_string.find(left), r = t.by_string.find(right);
    if (l == t.by_string.end() || r == t.by_string.end())
      c.refuse(cat("model.merges[", i, "]"), cat(m.dump(), ", a merge of a token not in model.vocab"));
    out.push_back({l->second, r->second});
  }
  return out;
}

// An added token shares its id only with the model.vocab entry of the same string (GPT-2's <|endoftext|>
// is in both); two added tokens share neither an id nor a string. Otherwise one id would mean two
// tokens, or one token two ids, and which wins would depend on the reader.
struct AddedSeen {
  std::unordered_map<std::uint64_t, std::size_t> by_id;    // -> index in added_tokens
  std::unordered_map<std::string, std::size_t> by_content;
};
void check_added_token(const Context& c, const Tokens& t, const Json& added, std::size_t i, AddedSeen& seen) {
  const std::string path = cat("added_tokens[", i, "]");
  const auto id = added[i]["id"].get<std::uint64_t>();
  const std::string content = added[i]["content"].get<std::string>();
  if (const auto [it, fresh] = seen.by_id.emplace(id, i); !fresh)
    throw InputError(cat(c.where, ": ", path, " (\"", content, "\") has id ", id, ", which added_tokens[", it->second, "] (",
                         added[it->second]["content"].dump(), ") has too: one id cannot be two tokens; the file is inconsistent"));
  if (const auto [it, fresh] = seen.by_content.emplace(content, i); !fresh)
    throw InputError(cat(c.where, ": ", path, " repeats the content \"", content, "\" of added_tokens[", it->second,
                         "] with id ", id, " (there ", added[it->second]["id"].dump(), "): one token cannot have two ids"));
  if (id < t.vocab_key.size() && !t.vocab_key[id].empty() && t.vocab_key[id] != content)
    throw InputError(cat(c.where, ": ", path, " (\"", content, "\") has id ", id, ", which model.vocab gives to ",
                         Json(t.vocab_key[id]).dump(), ": one id cannot be two tokens; the file is inconsistent"));
  const auto same = t.by_string.find(content);
  if (same != t.by_string.end() && same->second != id)
    throw InputError(cat(c.where, ": ", path, " (\"", content, "\") has id ", id, ", but model.vocab gives \"", content,
                         "\" the id ", same->second, ": one token cannot have two ids; the file is inconsistent"));
}

// HF gives an added token that model.vocab does not hold the next id after model.vocab and the added tokens
// before it in the list, whatever its "id" says (it only logs a warning): a file whose ids disagree would
// get other ids there, so it is refused naming the one HF would give (outside sweep 34 F4).
void check_added_order(const Context& c, const Tokens& t, const Json& added) {
  std::uint64_t next = t.by_string.size();
  for (std::size_t i = 0; i < added.size(); ++i) {
    const std::string content = added[i]["content"].get<std::string>();
    if (t.by_string.count(content)) continue;
    const auto id = added[i]["id"].get<std::uint64_t>();
    if (id != next)
      throw InputError(cat(c.where, ": added_tokens[", i, "] (\"", content, "\") has id ", id, ", but Hugging Face tokenizers ",
                           "give it ", next, " (the next id after model.vocab's ", t.by_string.size(), " entries and the ",
                           "added tokens listed before it, whatever \"id\" says): list added_tokens in id order"));
    ++next;
  }
}

void read_added(const Context& c, const Json& added, bool nfc, Tokens& t, TextRules& spec) {
  if (!added.is_array()) c.refuse("added_tokens", "not an array");
  AddedSeen seen;
  for (std::size_t i = 0; i < added.size(); ++i) {
    const Json& a = added[i];
    const std::string path = cat("added_tokens[", i, "]");
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_unsigned() || !a.contains("content") ||
        !a["content"].is_string() || a["content"].get<std::string>().empty())
      c.refuse(path, a.dump().substr(0, 200));
    for (const char* option : {"lstrip", "rstrip", "single_word"})
      if (flag(a, option)) c.refuse(cat(path, ".", option), "true");
    check_added_token(c, t, added, i, seen);
    const auto id = a["id"].get<std::uint64_t>();
    AddedTokenMatcher::Token token{a["content"].get<std::string>(), static_cast<std::uint32_t>(id)};
    // A non-special added token that repeats its model.vocab entry (checked above) keeps that entry's
    // bytes: BPE can still make it, as in HF tokenizers, whose model vocabulary holds it too.
    const bool vocab_entry = id < t.vocab_key.size() && !t.vocab_key[id].empty();
    if (!vocab_entry || flag(a, "special")) set_token(c, t, id, token.text, path);
    if (flag(a, "special")) {
      spec.specials.push_back(std::move(token));
    } else if (nfc && flag(a, "normalized")) {  // matched in normalized text: its content normalized too (34 F3)
      std::string normalized;
      to_nfc(token.text, normalized);
      spec.normalized_added.push_back({std::move(normalized), token.id});
    } else {
      spec.raw_added.push_back(std::move(token));
    }
  }
  check_added_order(c, t, added);
}

std::uint32_t special_id(const Context& c, const TextRules& spec, const std::string& name, const std::string& path) {
  for (const AddedTokenMatcher::Token& s : spec.specials)
    if (s.text == name) return s.id;
  c.refuse(path, cat("\"", name, "\", not a special token of added_tokens"));
}

// TemplateProcessing's `single`: [Sequence A] or [SpecialToken X, Sequence A]; X is the BOS.
std::uint32_t template_bos(const Context& c, const Json& t, const std::string& path, const TextRules& spec) {
  const Json& single = c.field(t, path, "single");
  const auto is = [](const Json& item, const char* kind) { return item.is_object() && item.contains(kind); };
  if (single.is_array() && single.size() == 1 && is(single[0], "Sequence")) return Vocab::kNone;
  if (!single.is_array() || single.size() != 2 || !is(single[0], "SpecialToken") || !is(single[1], "Sequence"))
    c.refuse(cat(path, ".single"), cat("the template ", single.dump().substr(0, 200)));
  const Json& name = c.field(single[0]["SpecialToken"], cat(path, ".single[0].SpecialToken"), "id");
  if (!name.is_string()) c.refuse(cat(path, ".single[0].SpecialToken.id"), name.dump());
  return special_id(c, spec, name.get<std::string>(), cat(path, ".single[0].SpecialToken.id"));
}

std::uint32_t parse_post_processor(const Context& c, const Json& p, const TextRules& spec) {
  if (p.is_null() || type_of(p) == "ByteLevel") return Vocab::kNone;  // ByteLevel only trims offsets
  if (type_of(p) == "TemplateProcessing") return template_bos(c, p, "post_processor", spec);
  if (type_of(p) != "Sequence") c.refuse("post_processor", cat("a ", type_of(p), " post-processor"));
  const Json& steps = c.field(p, "post_processor", "processors");
  std::uint32_t bos = Vocab::kNone;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::string path = cat("post_processor.processors[", i, "]");
    if (type_of(steps[i]) == "TemplateProcessing" && bos == Vocab::kNone) bos = template_bos(c, steps[i], path, spec);
    else if (type_of(steps[i]) != "ByteLevel") c.refuse(path, cat("a ", type_of(steps[i]), " post-processor"));
  }
  return bos;
}

std::uint32_t end_of_text(const Context& c, const TextRules& spec) {
  for (const std::string_view name : end_of_text_names())
    for (const AddedTokenMatcher::Token& s : spec.specials)
      if (s.text == name) return s.id;
  std::string names;
  for (const AddedTokenMatcher::Token& s : spec.specials) names += cat(names.empty() ? "" : ", ", s.text);
  throw InputError(cat(c.where, ": no end-of-text special token among added_tokens (looked for <|endoftext|>, "
                       "<|end_of_text|>, </s>; its special tokens are: ", names.empty() ? "none" : names, ")"));
}

LoadedVocabulary parse_root(const Json& root, std::string_view json_text, const std::string& where) {
  const Context c{where};
  if (!root.is_object() || !root.contains("model")) throw InputError(cat(where, " is not a tokenizer.json (no \"model\")"));
  const Json& model = root["model"];
  check_model(c, model);
  const Json no_added = Json::array();
  const Json& added = root.contains("added_tokens") ? root["added_tokens"] : no_added;
  TextRules spec;
  spec.nfc = parse_normalizer(c, root.value("normalizer", Json()));
  const Pattern pattern = parse_pretokenizer(c, root.value("pre_tokenizer", Json()));
  Tokens tokens = read_vocab(c, c.field(model, "model", "vocab"), added);
  Vocab::MergeListParts parts;
  parts.merges = read_merges(c, c.field(model, "model", "merges"), tokens);
  read_added(c, added, spec.nfc, tokens, spec);
  for (std::size_t id = 0; id < tokens.present.size(); ++id)
    if (!tokens.present[id]) c.refuse(cat("id ", id), "missing from model.vocab and added_tokens (the ids must be 0..n-1)");
  spec.whole_token_first = flag(model, "ignore_merges");
  spec.bos = parse_post_processor(c, root.value("post_processor", Json()), spec);
  parts.eot = end_of_text(c, spec);
  parts.tokens = std::move(tokens.bytes);
  for (const auto* list : {&spec.raw_added, &spec.normalized_added})
    for (const AddedTokenMatcher::Token& t : *list)
      if (t.id >= tokens.vocab_key.size() || tokens.vocab_key[t.id].empty()) parts.added.push_back(t.id);
  // A special token model.vocab also holds (GPT-2's <|endoftext|>, or one merges or a byte make: HF loads
  // such a file) stays an ordinary token BPE can make, as an added one does (outside sweep 35 S1: refused
  // with a message about the merges or bytes).
  for (const AddedTokenMatcher::Token& t : spec.specials)
    if (t.id >= tokens.vocab_key.size() || tokens.vocab_key[t.id].empty()) parts.added.push_back(t.id);
  Sha256 hasher;
  hasher.update(json_text);
  parts.hash = to_hex(hasher.finish());
  return LoadedVocabulary{Vocab::from_merge_list(std::move(parts), where), pattern, "hf-bpe", std::move(spec)};
}

}  // namespace

const std::vector<std::string_view>& end_of_text_names() {
  static const std::vector<std::string_view> kNames = {"<|endoftext|>", "<|end_of_text|>", "</s>"};
  return kNames;
}

LoadedVocabulary parse_hf_tokenizer_json(std::string_view json_text, const std::string& where) {
  Json root;
  try {
    root = Json::parse(json_text);
  } catch (const Json::exception& e) {
    throw InputError(cat(where, " is not valid JSON: ", e.what()));
  }
  try {
    return parse_root(root, json_text, where);
  } catch (const Json::exception& e) {  // a value of an unexpected JSON type somewhere not checked above
    throw InputError(cat(where, ": unexpected structure (", e.what(), "); ", kSupported));
  }
}

LoadedVocabulary load_hf_tokenizer_json(const std::filesystem::path& path) {
  return parse_hf_tokenizer_json(read_vocabulary_file(path, "tokenizer file"), path.string());
}

}  // namespace zt::tok
