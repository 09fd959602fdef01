// NFC with utf8proc (Unicode 15.0 in Debian 12; see the README for what a version difference can do).
#include "tok/nfc.hpp"

#include <cstdlib>
#include <memory>

#include <utf8proc.h>

#include "core/error.hpp"

namespace zt::tok {
namespace {

std::size_t next_non_ascii(std::string_view text, std::size_t pos) {
  while (pos < text.size() && static_cast<unsigned char>(text[pos]) < 0x80) ++pos;
  return pos;
}
std::size_t next_ascii(std::string_view text, std::size_t pos) {
  while (pos < text.size() && static_cast<unsigned char>(text[pos]) >= 0x80) ++pos;
  return pos;
}

void append_nfc(std::string_view span, std::string& out) {
  utf8proc_uint8_t* normalized = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(span.data()), static_cast<utf8proc_ssize_t>(span.size()),
                   &normalized, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(normalized, &std::free);
  if (n < 0) throw Error(cat("NFC normalisation failed: ", utf8proc_errmsg(n)));
  out.append(reinterpret_cast<const char*>(normalized), static_cast<std::size_t>(n));
}

}  // namespace

void to_nfc(std::string_view text, std::string& out) {
  out.clear();
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t first = next_non_ascii(text, pos);
    if (first == text.size()) {
      out.append(text.substr(pos));
      break;
    }
    const std::size_t start = first > pos ? first - 1 : first;  // an ASCII letter can take the marks after it
    out.append(text.substr(pos, start - pos));
    const std::size_t end = next_ascii(text, first);
    append_nfc(text.substr(start, end - start), out);
    pos = end;
  }
}

}  // namespace zt::tok
