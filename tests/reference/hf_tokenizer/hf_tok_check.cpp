// Compares ztok's encoding of a tokenizer.json with the reference's ids (hf-encode.mjs), text by text,
// and checks that decoding gives the text back (its NFC form under an NFC normalizer).
//   hf_tok_check TOKENIZER.json CASES.json IDS.bin
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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: hf_tok_check TOKENIZER.json CASES.json IDS.bin\n";
    return 2;
  }
  try {
    const zt::tok::Tokenizer tokenizer = zt::tok::Tokenizer::load(argv[1]);
    const auto texts = nlohmann::json::parse(read_all(argv[2])).get<std::vector<std::string>>();
    const std::string ids_bytes = read_all(argv[3]);
    zt::tok::Encoder encoder(tokenizer);
    std::size_t at = 0, bad = 0, tokens = 0;
    std::string normal;
    for (std::size_t t = 0; t < texts.size(); ++t) {
      auto word = [&] {
        std::uint32_t v = 0;
        if (at + 4 > ids_bytes.size()) throw zt::InputError(zt::cat(argv[3], " is shorter than ", argv[2], " needs"));
        std::memcpy(&v, ids_bytes.data() + at, 4);
        at += 4;
        return v;
      };
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
    std::cout << argv[1] << " on " << argv[2] << ": " << texts.size() << " texts, " << tokens << " tokens, "
              << bad << " differ\n";
    return bad == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "hf_tok_check: " << e.what() << "\n";
    return 2;
  }
}
