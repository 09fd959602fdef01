// Compares ztok's encoding of a tokenizer.json with the reference's ids (hf-encode.mjs), text by text,
// and checks that decoding gives the text back (its NFC form under an NFC normalizer).
//   hf_tok_check TOKENIZER.json CASES.json IDS.bin [CASES.json IDS.bin]...
//   hf_tok_check --template TOKENIZER_CONFIG.json: the chat template ztrain takes the model's own
//     chat_template for (ztok::identify_chat_template), or "none: why" (zgen, evaluation and RL refuse it).
//   hf_tok_check --equal VOCAB_A VOCAB_B: the two tokenizers give the same ids on every Unicode scalar
//     value in five contexts (GPT-2's tokenizer.json against encoder.json + vocab.bpe: HF's merge-list
//     rule against tiktoken's, which tests/reference/tiktoken checks on the same texts).
// Exit 0 all equal, 1 a mismatch (the first few are printed with their text), 2 bad input.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "tok/nfc.hpp"
#include "tok/tokenizer.hpp"
#include "tok/unicode.hpp"
#include "ztok/chat_template.hpp"

namespace {

std::string read_all(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw zt::InputError(zt::cat("cannot read ", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string escaped(const std::string& text) {
  std::string out;
  for (unsigned char c : text.substr(0, 300)) {
    if (c >= 0x20 && c < 0x7F && c != '\\') out += static_cast<char>(c);
    else { char b[8]; std::snprintf(b, sizeof b, "\\x%02X", c); out += b; }
  }
  return out;
}

std::string ids_text(const std::vector<std::uint32_t>& ids, std::size_t from) {
  std::string out;
  for (std::size_t i = from; i < ids.size() && i < from + 12; ++i) out += zt::cat(ids[i], " ");
  return out;
}

// Texts of CASES.json that differ from IDS.bin or do not decode back; the first few are printed.
std::size_t compare_cases(const zt::tok::Tokenizer& tokenizer, const char* name, const char* cases_path,
                          const char* ids_path) {
  const auto texts = nlohmann::json::parse(read_all(cases_path)).get<std::vector<std::string>>();
  const std::string ids_bytes = read_all(ids_path);
  zt::tok::Encoder encoder(tokenizer);
  std::size_t at = 0, bad = 0, tokens = 0;
  std::string normal;
  auto word = [&] {
    std::uint32_t v = 0;
    if (at + 4 > ids_bytes.size()) throw zt::InputError(zt::cat(ids_path, " is shorter than ", cases_path, " needs"));
    std::memcpy(&v, ids_bytes.data() + at, 4);
    at += 4;
    return v;
  };
  for (std::size_t t = 0; t < texts.size(); ++t) {
    std::vector<std::uint32_t> want(word());
    for (auto& id : want) id = word();
    std::vector<std::uint32_t> got;
    encoder.encode(texts[t], got);
    tokens += got.size();
    if (tokenizer.rules().nfc) zt::tok::to_nfc(texts[t], normal);
    else normal = texts[t];
    const bool round_trip = tokenizer.decode(got) == normal;
    if (got == want && round_trip) continue;
    if (++bad > 5) continue;
    std::size_t d = 0;
    while (d < got.size() && d < want.size() && got[d] == want[d]) ++d;
    std::cerr << "text " << t << " (" << texts[t].size() << " bytes) \"" << escaped(texts[t]) << "\"\n";
    if (got != want)
      std::cerr << "  first difference at id " << d << ": ztok " << ids_text(got, d) << "| reference " << ids_text(want, d) << "\n";
    if (!round_trip) std::cerr << "  decode(encode(text)) is not the text\n";
  }
  std::cout << name << " on " << cases_path << ": " << texts.size() << " texts, " << tokens << " tokens, " << bad
            << " differ\n";
  return bad;
}

int equal_on_every_code_point(const char* a_path, const char* b_path) {
  const zt::tok::Tokenizer a = zt::tok::Tokenizer::load(a_path), b = zt::tok::Tokenizer::load(b_path);
  zt::tok::Encoder ea(a), eb(b);
  std::vector<std::uint32_t> ia, ib;
  std::size_t texts = 0, bad = 0;
  std::string cp;
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    cp.clear();
    zt::tok::append_utf8(c, cp);
    for (const std::string& text : {cp, "a" + cp, " " + cp + cp, cp + "'s " + cp, "1" + cp + " x\n"}) {
      ia.clear();
      ib.clear();
      ea.encode(text, ia);
      eb.encode(text, ib);
      ++texts;
      if (ia != ib && ++bad <= 5)
        std::cerr << "\"" << escaped(text) << "\": " << ids_text(ia, 0) << "| " << ids_text(ib, 0) << "\n";
    }
  }
  std::cout << a_path << " vs " << b_path << ": " << texts << " texts (every scalar value in 5 contexts), " << bad
            << " differ\n";
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--template") {
    try {
      const std::string jinja = nlohmann::json::parse(read_all(argv[2])).at("chat_template").get<std::string>();
      const auto chat = zt::ztok::identify_chat_template(jinja);
      std::cout << (chat ? zt::ztok::to_string(*chat) : "none: " + zt::ztok::unidentified_because(jinja)) << "\n";
      return 0;
    } catch (const std::exception& e) {
      std::cerr << "hf_tok_check: " << e.what() << "\n";
      return 2;
    }
  }
  if (argc == 4 && std::string(argv[1]) == "--equal") {
    try {
      return equal_on_every_code_point(argv[2], argv[3]);
    } catch (const std::exception& e) {
      std::cerr << "hf_tok_check: " << e.what() << "\n";
      return 2;
    }
  }
  if (argc < 4 || argc % 2 != 0) {
    std::cerr << "usage: hf_tok_check TOKENIZER.json CASES.json IDS.bin [CASES.json IDS.bin]... | --equal VOCAB_A VOCAB_B\n";
    return 2;
  }
  try {
    const zt::tok::Tokenizer tokenizer = zt::tok::Tokenizer::load(argv[1]);
    std::size_t bad = 0;
    for (int i = 2; i + 1 < argc; i += 2) bad += compare_cases(tokenizer, argv[1], argv[i], argv[i + 1]);
    return bad == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "hf_tok_check: " << e.what() << "\n";
    return 2;
  }
}
