// ztok's account of ill-formed UTF-8 per input file: a file that is largely not UTF-8 (a binary file,
// text in another encoding) is named once, with the share of its bytes that became U+FFFD.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace zt::ztok {

struct TokenizedChunk;

class InvalidUtf8Report {
 public:
  // Warn above 1% of a file's bytes. Real UTF-8 text with stray bad bytes (a truncated download, a
  // few Latin-1 quotes) stays far below; Latin-1 or KOI8-R text without conversion is typically 2-40%
  // (every non-ASCII byte), a binary file 40-70%. Either way the tokens are of little use.
  static constexpr double kWarnFraction = 0.01;

  // inputs: the names segments' `file` indexes; any_rank: warn from every rank (multi-rank ztok).
  InvalidUtf8Report(const std::vector<std::string>& inputs, bool any_rank) : inputs_(inputs), any_rank_(any_rank) {}
  // Counts the chunk's segments; a file is judged when the first segment of a later file arrives.
  void add(const TokenizedChunk& r);
  void finish() { judge(); }  // the last file

 private:
  void judge();

  static constexpr std::uint64_t kNoFile = std::numeric_limits<std::uint64_t>::max();
  const std::vector<std::string>& inputs_;
  bool any_rank_;
  std::uint64_t file_ = kNoFile, bytes_ = 0, replaced_ = 0;
};

}  // namespace zt::ztok
