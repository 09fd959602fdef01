// tokenizer.json reading on a hand-written file (data/tiny_tokenizer.json: bytes are ids 0..255, ten
// merges whose ids are out of merge order, five added tokens, NFC, a BOS template) and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "tok/bpe.hpp"
#include "tok/hf_tokenizer_json.hpp"
#include "tok/nfc.hpp"
#include "tok/tokenizer.hpp"
#include "tok/utf8.hpp"

namespace zt::tok {
namespace {

using Ids = std::vector<std::uint32_t>;
using Json = nlohmann::json;

const std::string& tiny_text() {
  static const std::string text = [] {
    std::ifstream in(std::string(ZT_TOK_TEST_DATA) + "/tiny_tokenizer.json", std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }();
  return text;
}

Tokenizer tokenizer_of(const std::string& json_text) {
  return Tokenizer(parse_hf_tokenizer_json(json_text, "tiny.json"));
}

Ids encode(const Tokenizer& t, std::string_view text) {
  Ids ids;
  Encoder(t).encode(text, ids);
  return ids;
}

Json tiny_json() { return Json::parse(tiny_text()); }

TEST(HfTokenizerJson, ReadsVocabularySpecialsAndBos) {
  const Tokenizer t = tokenizer_of(tiny_text());
  EXPECT_EQ(t.vocab().size(), 271u);
  EXPECT_EQ(t.eot(), 266u);  // <|endoftext|>
  EXPECT_EQ(t.bos(), 267u);  // the template's leading <s>
  EXPECT_EQ(t.name(), "hf-bpe");
  EXPECT_EQ(t.vocab().hash().size(), 64u);
  EXPECT_EQ(t.decode(Ids{258, 257, 266, 268}), "abcd<|endoftext|><t>");
}

// A chat template's tokens: the tokenizer.json's own specials are found by name (no --special needed);
// declared extras go past the vocabulary; giving an own special again with its id is accepted.
TEST(HfTokenizerJson, SpecialIdsOfTheFileAndDeclaredOnesPastIt) {
  LoadedVocabulary loaded = parse_hf_tokenizer_json(tiny_text(), "tiny.json");
  loaded.declared = {{"<s>", 267}, {"<|im_start|>", 300}};
  const Tokenizer t(std::move(loaded));
  EXPECT_EQ(t.special_id("<s>"), 267u);
  EXPECT_EQ(t.special_id("<|endoftext|>"), 266u);
  EXPECT_EQ(t.special_id("<|im_start|>"), 300u);
  EXPECT_EQ(t.special_id("<|im_end|>"), Vocab::kNone);
  EXPECT_EQ(t.n_ids(), 301u);
  LoadedVocabulary clash = parse_hf_tokenizer_json(tiny_text(), "tiny.json");
  clash.declared = {{"<s>", 280}};  // <s> is 267 in the file
  EXPECT_THROW(Tokenizer{std::move(clash)}, InputError);
  LoadedVocabulary inside = parse_hf_tokenizer_json(tiny_text(), "tiny.json");
  inside.declared = {{"<|im_end|>", 5}};  // an id of the vocabulary
  EXPECT_THROW(Tokenizer{std::move(inside)}, InputError);
}

// HF merges the pair that comes first in `merges`; tiktoken's rule (the lowest id of the concatenation,
// any split) gives [a, bc, d], [xyz] and [Ġwor, l, d] here.
TEST(HfTokenizerJson, MergesInMergeListOrderNotByTokenId) {
  const Tokenizer t = tokenizer_of(tiny_text());
  EXPECT_EQ(encode(t, "abcd"), (Ids{258, 257}));
  EXPECT_EQ(encode(t, "xyz"), (Ids{'x', 259}));  // "x yz" is no merge although "xyz" is a token
  EXPECT_EQ(encode(t, " world"), (Ids{262, 264, 'l', 'd'}));
}

TEST(HfTokenizerJson, IgnoreMergesTakesAWholeTokenPiece) {
  Json j = tiny_json();
  j["model"]["ignore_merges"] = true;
  const Tokenizer t = tokenizer_of(j.dump());
  EXPECT_EQ(encode(t, "xyz"), (Ids{261}));
  EXPECT_EQ(encode(t, "abcd"), (Ids{258, 257}));  // not a token: merged as before
}

TEST(HfTokenizerJson, MergesAsStringsOrPairsAreTheSame) {
  Json j = tiny_json();
  for (Json& m : j["model"]["merges"])
    if (m.is_array()) m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  EXPECT_EQ(tokenizer_of(j.dump()).vocab().hash().size(), 64u);
  EXPECT_EQ(encode(tokenizer_of(j.dump()), " world"), (Ids{262, 264, 'l', 'd'}));
}

TEST(HfTokenizerJson, AddedTokensLeftmostLongestSpecialTextIsOrdinary) {
  const Tokenizer t = tokenizer_of(tiny_text());
  EXPECT_EQ(encode(t, "a<t>xy"), (Ids{'a', 269, 'y'}));  // "<t>x" is longer than "<t>"
  EXPECT_EQ(encode(t, "<t><t>"), (Ids{268, 268}));
  EXPECT_EQ(encode(t, "<t"), (Ids{'<', 't'}));
  // A special token's text is text: <s> and <|endoftext|> are not matched.
  EXPECT_EQ(encode(t, "<s>"), (Ids{'<', 's', '>'}));
  const Ids eot_text = encode(t, "<|endoftext|>");
  EXPECT_EQ(std::count(eot_text.begin(), eot_text.end(), 266u), 0);
  EXPECT_EQ(t.decode(eot_text), "<|endoftext|>");
  // Text on either side of an added token is pre-tokenised on its own: " " before it is a piece.
  EXPECT_EQ(encode(t, "ab <t>ab"), (Ids{258, ' ', 268, 258}));
}

TEST(HfTokenizerJson, NfcBeforeMergesAndNormalizedAddedTokens) {
  const Tokenizer t = tokenizer_of(tiny_text());
  EXPECT_EQ(encode(t, "e\xCC\x81"), encode(t, "\xC3\xA9"));  // e + U+0301 composes to U+00E9
  EXPECT_EQ(encode(t, "\xC3\xA9"), (Ids{0xC3, 0xA9}));
  EXPECT_EQ(encode(t, "xe\xCC\x81!"), (Ids{'x', 270}));  // matched after normalisation
  Json j = tiny_json();
  j["normalizer"] = nullptr;
  const Tokenizer raw = tokenizer_of(j.dump());
  EXPECT_EQ(encode(raw, "e\xCC\x81"), (Ids{'e', 0xCC, 0x81}));
  EXPECT_EQ(encode(raw, "\xC3\xA9!"), (Ids{270}));  // no normaliser: matched in the raw text
  // A normalized added token written decomposed is normalized too, as HF does (sweep 34 F3: never matched).
  Json decomposed = tiny_json();
  decomposed["added_tokens"][4]["content"] = "e\xCC\x81!";
  const Tokenizer d = tokenizer_of(decomposed.dump());
  EXPECT_EQ(encode(d, "x\xC3\xA9!"), (Ids{'x', 270}));
  EXPECT_EQ(encode(d, "xe\xCC\x81!"), (Ids{'x', 270}));
}

TEST(HfTokenizerJson, PostProcessorWithoutBos) {
  for (const char* post : {R"(null)", R"({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false})",
                           R"({"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}]})"}) {
    Json j = tiny_json();
    j["post_processor"] = Json::parse(post);
    EXPECT_EQ(tokenizer_of(j.dump()).bos(), Vocab::kNone) << post;
  }
  Json seq = tiny_json();
  seq["post_processor"] = Json{{"type", "Sequence"}, {"processors", Json::array({Json{{"type", "ByteLevel"}}, tiny_json()["post_processor"]})}};
  EXPECT_EQ(tokenizer_of(seq.dump()).bos(), 267u);
}

Json split_pretokenizer(const std::string& regex) {
  return Json{{"type", "Sequence"},
              {"pretokenizers",
               Json::array({Json{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
                            Json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
}

// Each edit makes a file ztok refuses; the message names the JSON path and what is there.
void expect_refused(const std::function<void(Json&)>& edit, const std::vector<std::string>& needles) {
  Json j = tiny_json();
  edit(j);
  try {
    tokenizer_of(j.dump());
    ADD_FAILURE() << "accepted: " << needles[0];
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tiny.json"), std::string::npos) << what;
    for (const std::string& n : needles) EXPECT_NE(what.find(n), std::string::npos) << n << " in " << what;
  }
}

TEST(HfTokenizerJson, RefusesWhatItDoesNotRead) {
  expect_refused([](Json& j) { j["model"]["type"] = "Unigram"; }, {"model.type", "Unigram", "supports model.type BPE"});
  expect_refused([](Json& j) { j["model"]["type"] = "WordPiece"; }, {"model.type", "WordPiece"});
  expect_refused([](Json& j) { j["model"]["byte_fallback"] = true; }, {"model.byte_fallback"});
  expect_refused([](Json& j) { j["model"]["continuing_subword_prefix"] = "##"; }, {"model.continuing_subword_prefix"});
  expect_refused([](Json& j) { j["model"]["vocab"]["\xE2\x96\x81the"] = 271; }, {"model.vocab[", "byte-level alphabet"});
  expect_refused([](Json& j) { j["model"]["vocab"].erase("xyz"); j["model"]["vocab"]["xyq"] = 261; },
                 {"merge 5 makes a token that is not in the vocabulary"});
  expect_refused([](Json& j) { j["model"]["merges"].push_back("qq r"); }, {"model.merges[10]", "not in model.vocab"});
  expect_refused([](Json& j) { j["model"]["vocab"].erase("or"); }, {"the ids must be 0..n-1"});  // a hole at 264
  expect_refused([](Json& j) { j["normalizer"] = Json{{"type", "NFKC"}}; }, {"normalizer", "NFKC"});
  expect_refused([](Json& j) { j["pre_tokenizer"] = Json{{"type", "Metaspace"}}; }, {"pre_tokenizer", "Metaspace"});
  expect_refused([](Json& j) { j["pre_tokenizer"]["add_prefix_space"] = true; }, {"pre_tokenizer.add_prefix_space"});
  expect_refused(
      [](Json& j) {
        j["pre_tokenizer"] = Json::parse(R"({"type": "Sequence", "pretokenizers": [
          {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}|\\s+"}, "behavior": "Isolated", "invert": false},
          {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})");
      },
      {"pre_tokenizer.pretokenizers[0].pattern.Regex", "\\p{N}{1,3}|\\s+", "no exact scanner"});
  expect_refused([](Json& j) { j["added_tokens"][2]["lstrip"] = true; }, {"added_tokens[2].lstrip"});
  // HF's ByteLevel takes an absent use_regex as true: after a Split that is GPT-2's regex again (sweep 34 F1).
  expect_refused(
      [](Json& j) {
        j["pre_tokenizer"] = split_pretokenizer(pattern_regex(Pattern{PatternKind::kGpt2, 3}));
        j["pre_tokenizer"]["pretokenizers"][1].erase("use_regex");
      },
      {"pre_tokenizer.pretokenizers[1].use_regex", "absent means true"});
  // Added tokens whose ids are not in list order: HF numbers them in list order (sweep 34 F4).
  expect_refused([](Json& j) { std::swap(j["added_tokens"][2], j["added_tokens"][3]); },
                 {"added_tokens[2] (\"<t>x\") has id 269, but Hugging Face tokenizers give it 268"});
  expect_refused([](Json& j) { j["post_processor"] = Json{{"type", "RobertaProcessing"}}; }, {"post_processor", "RobertaProcessing"});
  expect_refused([](Json& j) { j["post_processor"]["single"].push_back(j["post_processor"]["single"][0]); },
                 {"post_processor.single"});
  expect_refused([](Json& j) { j["model"]["vocab"]["xyz"] = 1000000000; }, {"the id 1000000000", "0..n-1"});
  expect_refused([](Json& j) { j["post_processor"] = Json{{"type", "Sequence"}, {"processors", 3}}; }, {"unexpected structure"});
  expect_refused([](Json& j) { j["added_tokens"] = Json{{"x", 1}}; }, {"added_tokens"});
  expect_refused([](Json& j) { j["added_tokens"][0]["content"] = "<|eos|>"; },
                 {"no end-of-text special token", "<|eos|>, <s>"});
}

// A top-level ByteLevel without use_regex (as tokenizers before ~0.11 wrote GPT-2's file) is HF's
// default, true: the same tokenizer as with it (sweep 34 F5: refused as "false").
TEST(HfTokenizerJson, ByteLevelWithoutUseRegexIsTrue) {
  Json j = tiny_json();
  j["pre_tokenizer"].erase("use_regex");
  const Tokenizer without = tokenizer_of(j.dump()), with = tokenizer_of(tiny_text());
  for (const char* text : {"abcd xyz", "it's 123 <t>x", "  e\xCC\x81!"}) EXPECT_EQ(encode(without, text), encode(with, text)) << text;
}

// The key model.vocab gives `id` in the tiny file.
std::string vocab_key(const Json& j, std::uint64_t id) {
  for (const auto& [key, value] : j["model"]["vocab"].items())
    if (value.get<std::uint64_t>() == id) return key;
  return "";
}

// One id for two tokens, or one token under two ids, is refused naming both entries; an added token
// that repeats its model.vocab entry (GPT-2's <|endoftext|> is in both) is not a collision.
TEST(HfTokenizerJson, CollidingAddedTokensAreRefused) {
  expect_refused([](Json& j) { j["added_tokens"][3]["id"] = 268; },
                 {"added_tokens[3] (\"<t>x\") has id 268, which added_tokens[2] (\"<t>\") has too"});
  expect_refused([](Json& j) { j["added_tokens"][3]["content"] = "<t>"; },
                 {"added_tokens[3] repeats the content \"<t>\" of added_tokens[2] with id 269 (there 268)"});
  expect_refused([](Json& j) { j["added_tokens"].push_back(Json{{"id", 256}, {"content", "<u>"}, {"special", false}}); },
                 {"added_tokens[5] (\"<u>\") has id 256, which model.vocab gives to " + Json(vocab_key(tiny_json(), 256)).dump()});
  expect_refused(
      [](Json& j) { j["added_tokens"].push_back(Json{{"id", 271}, {"content", vocab_key(j, 256)}, {"special", false}}); },
      {"added_tokens[5] (\"" + vocab_key(tiny_json(), 256) + "\") has id 271, but model.vocab gives", "the id 256"});
  Json same = tiny_json();
  same["added_tokens"].push_back(Json{{"id", 256}, {"content", vocab_key(same, 256)}, {"special", false}});
  const Tokenizer t = tokenizer_of(same.dump());
  EXPECT_EQ(t.vocab().size(), 271u);
  EXPECT_EQ(encode(t, "bc"), Ids{256});  // still the merge's product
  EXPECT_EQ(t.decode(Ids{256}), "bc");
  // The same as a special token (HF loads it; sweep 35 S1: refused with a message about the merges): BPE
  // still makes it, its text being text, as every special token's is here; a single byte likewise.
  for (const std::uint64_t id : {std::uint64_t{256}, std::uint64_t{'h'}}) {
    Json special = tiny_json();
    special["added_tokens"].push_back(Json{{"id", id}, {"content", vocab_key(special, id)}, {"special", true}});
    const Tokenizer s = tokenizer_of(special.dump());
    EXPECT_EQ(encode(s, vocab_key(special, id)), Ids{static_cast<std::uint32_t>(id)}) << id;
  }
}

// A split that is already GPT-2's pattern maps to the same kind as ByteLevel's built-in regex.
TEST(HfTokenizerJson, SplitWithGpt2PatternIsGpt2) {
  Json j = tiny_json();
  j["pre_tokenizer"] = split_pretokenizer(pattern_regex(Pattern{PatternKind::kGpt2, 3}));
  const Tokenizer t = tokenizer_of(j.dump());
  EXPECT_EQ(t.pattern(), (Pattern{PatternKind::kGpt2, 3}));
  EXPECT_EQ(encode(t, "abcd xyz"), (Ids{258, 257, ' ', 'x', 259}));  // " xyz": no " x" merge
}

// Llama 3's Split regex (cl100k_base's) and Qwen2's (the same with \p{N}: single digits) select the
// cl100k scanner with their digit run; the pieces, not just the kind, follow it.
TEST(HfTokenizerJson, SplitWithLlama3OrQwen2PatternIsCl100k) {
  const std::string llama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  const std::string qwen2 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  for (const auto& [regex, digits] : {std::pair{llama3, 3u}, std::pair{qwen2, 1u}}) {
    Json j = tiny_json();
    j["pre_tokenizer"] = split_pretokenizer(regex);
    const Tokenizer t = tokenizer_of(j.dump());
    EXPECT_EQ(t.pattern(), (Pattern{PatternKind::kCl100k, digits})) << regex;
    std::vector<std::string> pieces;
    t.pretokenizer().for_each_piece("1234", [&](std::string_view p) { pieces.emplace_back(p); });
    EXPECT_EQ(pieces.size(), digits == 3 ? 2u : 4u) << regex;  // "123" "4" / "1" "2" "3" "4"
  }
}

// The text HF tokenizers encode: NFC applies between the raw added tokens, which are matched first
// (so "<t>" + U+0338 keeps its ">" and does not become "<t" + U+226F).
std::string nfc_between_raw_added(const Tokenizer& t, std::string_view text) {
  std::string out, part;
  for (std::size_t pos = 0;;) {
    const AddedTokenMatcher::Match m = t.raw_added().find(text, pos);
    const std::size_t end = m.begin == AddedTokenMatcher::kNoMatch ? text.size() : m.begin;
    to_nfc(text.substr(pos, end - pos), part);
    out += part;
    if (m.begin == AddedTokenMatcher::kNoMatch) return out;
    out += text.substr(m.begin, m.length);
    pos = m.begin + m.length;
  }
}

// Fuzz: fragments around the added tokens and NFC, raw bytes, truncations. Nothing crashes, every id
// is in the vocabulary, and decoding gives the repaired text back, NFC-normalised between raw added tokens.
TEST(HfTokenizerJson, FuzzNeverCrashesAndRoundTripsToNfc) {
  const std::vector<std::string> fragments = {
      "a", "b", "c", "d", "x", "y", "z", "ab", "xyz", " ", "  ", " w", "or", "\n", "\r\n", "<t>", "<t>x", "<t", "<",
      ">", "\xC3\xA9", "e\xCC\x81", "!", "\xC3\xA9!", "\xCC\x81", "\xCC\xB8", "<|endoftext|>", "<s>", "\xE1\x84\x80",
      "\xE1\x85\xA1", "\xEA\xB0\x80", "\xF0\x9F\x98\x80", "\xFF", "\xC3", "\xE2\x82", "\xED\xA0\x80", std::string(1, '\0')};
  const Tokenizer t = tokenizer_of(tiny_text());
  Encoder enc(t, 64);
  std::mt19937 rng(20261127);
  std::string repaired;
  for (int trial = 0; trial < 4000; ++trial) {
    std::string text;
    const std::size_t n = rng() % 40;
    const bool raw_bytes = trial % 4 == 0;
    for (std::size_t i = 0; i < n; ++i)
      text += raw_bytes ? std::string(1, static_cast<char>(rng() & 0xFF)) : fragments[rng() % fragments.size()];
    if (trial % 4 == 1 && !text.empty()) text.resize(rng() % text.size());
    repaired.clear();
    const std::size_t replaced = append_replacing_invalid(text, repaired);
    Ids ids;
    ASSERT_EQ(enc.encode(text, ids), replaced) << trial;
    for (const std::uint32_t id : ids) ASSERT_LT(id, t.vocab().size());
    ASSERT_EQ(t.decode(ids), nfc_between_raw_added(t, repaired)) << "trial " << trial;
  }
}

// Merge-list ranks through the three merge strategies: long words take the heap or lean path in encoding.
TEST(HfTokenizerJson, ScanAndHeapMergeAgreeOnMergeListRanks) {
  const Tokenizer t = tokenizer_of(tiny_text());
  BpeMerger merger(t.vocab());
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string word;
    const std::size_t n = 2 + rng() % 400;
    for (std::size_t i = 0; i < n; ++i) word += "abcdxyz"[rng() % 7];
    Ids scan, heap, lean;
    merger.merge_scan(word, scan);
    merger.merge_heap(word, heap);
    merger.merge_lean(word, lean);
    ASSERT_EQ(scan, heap) << word;
    ASSERT_EQ(scan, lean) << word;
    ASSERT_EQ(t.decode(scan), word);
  }
}

}  // namespace
}  // namespace zt::tok
