// Counting ill-formed UTF-8 per input file, in input order, and the one warning per file.
#include "ztok/utf8_report.hpp"

#include <cstdio>

#include "core/error.hpp"
#include "core/log.hpp"
#include "ztok/tokenize_stream.hpp"

namespace zt::ztok {

void InvalidUtf8Report::add(const TokenizedChunk& r) {
  for (std::size_t i = 0; i < r.chunk.segments.size(); ++i) {
    const Segment& s = r.chunk.segments[i];
    if (s.file != file_) {
      judge();
      file_ = s.file;
    }
    bytes_ += s.end - s.begin;
    replaced_ += i < r.replaced_bytes.size() ? r.replaced_bytes[i] : 0;
  }
}

void InvalidUtf8Report::judge() {
  if (file_ != kNoFile && replaced_ > kWarnFraction * static_cast<double>(bytes_)) {
    char percent[16];
    std::snprintf(percent, sizeof percent, "%.1f%%", 100.0 * static_cast<double>(replaced_) / static_cast<double>(bytes_));
    const std::string message =
        cat("ztok: ", inputs_[file_], ": ", percent, " of its bytes (", replaced_, " of ", bytes_,
            ") are not valid UTF-8 and became U+FFFD; is it a binary file or in another encoding? Convert it "
            "(iconv -t UTF-8) or leave it out; --strict-utf8 refuses such input");
    if (any_rank_) log::warn_any_rank(message);
    else log::warn(message);
  }
  file_ = kNoFile;
  bytes_ = replaced_ = 0;
}

}  // namespace zt::ztok
