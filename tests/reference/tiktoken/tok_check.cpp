// ztok's side of the tiktoken reference test: encodes the same bytes and compares with the ids the
// reference wrote (encode.mjs), reporting the first difference with its context.
//   tok_check classes UNICODE16.bin             every code point's class vs Unicode 16.0 data
//   tok_check categories CATEGORIES16.bin       every code point's Category (o200k's classes) vs Unicode
//                                               16.0 data; lists differing ranges as unicode.cpp's overlay
// VOCAB is --vocab's PATH: GPT-2's directory or a tiktoken rank file (tok/encoding.hpp).
//   tok_check file VOCAB TEXT EXPECTED.u32      one text
//   tok_check records VOCAB RECORDS EXPECTED    many texts ([u32 n][bytes]... / [u32 n][ids]...)
//   tok_check bench VOCAB TEXT REPEAT [IDS_OUT]  encode-only MB/s on one thread (one JSON line), as
//                                               encode.mjs --bench measures the peer; ids to IDS_OUT
// Prints one line per input: "ok NAME bytes=B tokens=T replaced=R" or "MISMATCH NAME ...". Exit 1 on
// any mismatch, 2 on usage.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tok/tokenizer.hpp"
#include "tok/utf8.hpp"

namespace {

using zt::tok::CharClass;
using Ids = std::vector<std::uint32_t>;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::uint32_t u32_at(const std::string& bytes, std::size_t offset) {
  std::uint32_t v;
  std::memcpy(&v, bytes.data() + offset, 4);
  return v;
}

std::string escaped(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7F && c != '\\') out += static_cast<char>(c);
    else { char buf[8]; std::snprintf(buf, sizeof buf, "\\x%02X", c); out += buf; }
  }
  return out;
}

// Code points of `text` that Unicode 16.0 made letters or numbers (utf8proc 2.8 alone gets them wrong).
std::size_t unicode16_only(std::string_view text) {
  std::string valid;
  zt::tok::append_replacing_invalid(text, valid);
  std::size_t n = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(valid.data());
  for (std::size_t i = 0, len = 0; i < valid.size(); i += len) {
    const char32_t cp = zt::tok::decode_valid_utf8(p + i, len);
    for (const auto& o : zt::tok::unicode16_overrides()) n += cp >= o.first && cp <= o.last;
  }
  return n;
}

// Compares one text; on a difference prints the ids around it and the text they cover.
bool compare(const zt::tok::Tokenizer& tok, const std::string& name, std::string_view text, const Ids& expected,
             std::size_t& tokens, std::size_t& replaced) {
  zt::tok::Encoder enc(tok);
  Ids ours;
  replaced += enc.encode(text, ours);
  tokens += expected.size();
  if (ours == expected) return true;
  std::size_t k = 0;
  while (k < ours.size() && k < expected.size() && ours[k] == expected[k]) ++k;
  const std::size_t from = k >= 3 ? k - 3 : 0;
  auto show = [&](const Ids& ids) {
    std::string s;
    for (std::size_t i = from; i < std::min(ids.size(), k + 4); ++i)
      s += std::to_string(ids[i]) + "'" + escaped(tok.vocab().token_bytes(ids[i])) + "' ";
    return s;
  };
  const std::size_t byte = tok.decode(std::span(ours.data(), k)).size();
  std::cout << "MISMATCH " << name << ": token " << k << " (byte " << byte << "), ours " << ours.size()
            << " ids, tiktoken " << expected.size() << "\n  text:     " << escaped(text.substr(byte, 48))
            << "\n  ours:     " << show(ours) << "\n  tiktoken: " << show(expected) << "\n";
  return false;
}

int check_classes(const std::string& path) {
  const std::string data = slurp(path);
  const zt::tok::CharClassTable table;
  std::size_t differ = 0;
  for (char32_t cp = 0; cp < data.size(); ++cp) {
    if (static_cast<std::uint8_t>(table.of(cp)) == static_cast<std::uint8_t>(data[cp])) continue;
    if (++differ <= 10) std::cout << "class of U+" << std::hex << unsigned(cp) << std::dec << " differs\n";
  }
  std::size_t overlaid = 0;
  for (const auto& o : zt::tok::unicode16_overrides())  // marks are class "other" before and after
    if (zt::tok::category_class(o.category) != CharClass::kOther) overlaid += o.last - o.first + 1;
  std::cout << (differ ? "MISMATCH" : "ok") << " classes: " << data.size() << " code points, " << differ
            << " differ from Unicode 16.0 (utf8proc's Unicode 15.0 gave " << overlaid
            << " of them wrongly before the overlay)\n";
  return differ == 0 ? 0 : 1;
}

int check_categories(const std::string& path) {
  const std::string data = slurp(path);
  const zt::tok::CharClassTable table;
  std::size_t differ = 0;
  for (char32_t cp = 0; cp < data.size();) {
    const auto expected = static_cast<std::uint8_t>(data[cp]);
    if (static_cast<std::uint8_t>(table.category(cp)) == expected) { ++cp; continue; }
    char32_t last = cp;
    while (last + 1 < data.size() && static_cast<std::uint8_t>(data[last + 1]) == expected &&
           static_cast<std::uint8_t>(table.category(last + 1)) != expected)
      ++last;
    std::printf("  differs: {0x%X, 0x%X, Category(%u)}, ztok says %u\n", unsigned(cp), unsigned(last), unsigned(expected),
                unsigned(table.category(cp)));
    differ += last - cp + 1;
    cp = last + 1;
  }
  std::cout << (differ ? "MISMATCH" : "ok") << " categories: " << data.size() << " code points, " << differ
            << " differ from Unicode 16.0 (Lu Ll Lt Lm Lo M N White_Space)\n";
  return differ == 0 ? 0 : 1;
}

int check_texts(const std::string& mode, const std::string& vocab, const std::string& input, const std::string& ids_path) {
  const zt::tok::Tokenizer tok = zt::tok::Tokenizer::load(vocab);
  const std::string data = slurp(input), ids = slurp(ids_path);
  std::size_t tokens = 0, replaced = 0, texts = 0, bad = 0;
  const std::size_t new_in_16 = unicode16_only(data);
  if (mode == "file") {
    Ids expected(ids.size() / 4);
    std::memcpy(expected.data(), ids.data(), expected.size() * 4);
    texts = 1;
    bad += !compare(tok, input, data, expected, tokens, replaced);
  } else {
    for (std::size_t o = 0, q = 0; o < data.size(); ++texts) {
      const std::uint32_t n = u32_at(data, o), m = u32_at(ids, q);
      Ids expected(m);
      std::memcpy(expected.data(), ids.data() + q + 4, std::size_t{m} * 4);
      bad += !compare(tok, input + " #" + std::to_string(texts), std::string_view(data).substr(o + 4, n), expected,
                      tokens, replaced);
      o += 4 + n;
      q += 4 + std::size_t{m} * 4;
    }
  }
  std::cout << (bad ? "MISMATCH " : "ok ") << input << " texts=" << texts << " bytes=" << data.size()
            << " tokens=" << tokens << " replaced=" << replaced << " unicode16_only=" << new_in_16 << " mismatched_texts=" << bad << "\n";
  return bad == 0 ? 0 : 1;
}

// Times Encoder::encode on the whole text, REPEAT times after one warm-up (a fresh Encoder each
// time, so the piece cache starts empty as tiktoken's does); best and median MB/s (1 MB = 1e6 bytes).
int bench(const std::string& vocab, const std::string& input, int repeat, const std::string& ids_out) {
  const zt::tok::Tokenizer tok = zt::tok::Tokenizer::load(vocab);
  const std::string data = slurp(input);
  Ids ids;
  ids.reserve(data.size() / 2);
  std::vector<double> seconds;
  for (int r = 0; r <= repeat; ++r) {
    ids.clear();
    zt::tok::Encoder enc(tok);
    const auto t0 = std::chrono::steady_clock::now();
    enc.encode(data, ids);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) seconds.push_back(s);  // run 0 warms up the page cache and allocator
  }
  std::sort(seconds.begin(), seconds.end());
  const double mb = data.size() / 1e6;
  std::cout << "{\"impl\": \"ztok-encoder\", \"bytes\": " << data.size() << ", \"tokens\": " << ids.size()
            << ", \"repeat\": " << repeat << ", \"best_mb_per_s\": " << mb / seconds.front()
            << ", \"median_mb_per_s\": " << mb / seconds[(seconds.size() - 1) / 2]
            << ", \"min_mb_per_s\": " << mb / seconds.back() << "}\n";
  if (!ids_out.empty()) {
    std::ofstream out(ids_out, std::ios::binary);
    out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 4));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> a(argv + 1, argv + argc);
    if (a.size() == 2 && a[0] == "classes") return check_classes(a[1]);
    if (a.size() == 2 && a[0] == "categories") return check_categories(a[1]);
    if (a.size() == 4 && (a[0] == "file" || a[0] == "records")) return check_texts(a[0], a[1], a[2], a[3]);
    if ((a.size() == 4 || a.size() == 5) && a[0] == "bench")
      return bench(a[1], a[2], std::stoi(a[3]), a.size() == 5 ? a[4] : "");
    std::cerr << "usage: tok_check classes FILE | categories FILE | file VOCAB TEXT IDS | records VOCAB RECORDS IDS | bench VOCAB TEXT N [IDS]\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "tok_check: " << e.what() << "\n";
    return 1;
  }
}
