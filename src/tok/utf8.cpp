// UTF-8 well-formedness after the Unicode standard's Table 3-7, with a word-at-a-time ASCII path.
#include "tok/utf8.hpp"

#include <cstdint>
#include <cstring>

namespace zt::tok {
namespace {

// What Table 3-7 says of a lead byte: the sequence length it starts (0: it never starts one: 80..C1,
// F5..FF) and the allowed range of the second byte (later bytes are always 80..BF).
struct LeadByte {
  std::size_t length;
  unsigned lo = 0x80, hi = 0xBF;
};
LeadByte lead_byte(unsigned b0) {
  if (b0 >= 0xC2 && b0 <= 0xDF) return {2};
  if (b0 == 0xE0) return {3, 0xA0};
  if (b0 >= 0xE1 && b0 <= 0xEF) return {3, 0x80, b0 == 0xED ? 0x9Fu : 0xBFu};
  if (b0 == 0xF0) return {4, 0x90};
  if (b0 >= 0xF1 && b0 <= 0xF3) return {4};
  if (b0 == 0xF4) return {4, 0x80, 0x8F};
  return {0};
}

// Number of bytes of a well-formed sequence starting at p (1..4), or 0 when it is ill-formed there.
// `left` is the number of bytes available from p (>= 1).
std::size_t well_formed_length(const unsigned char* p, std::size_t left) {
  if (p[0] < 0x80) return 1;
  const LeadByte lead = lead_byte(p[0]);
  if (lead.length == 0 || left < lead.length) return 0;
  if (p[1] < lead.lo || p[1] > lead.hi) return 0;
  for (std::size_t k = 2; k < lead.length; ++k)
    if (p[k] < 0x80 || p[k] > 0xBF) return 0;
  return lead.length;
}

}  // namespace

std::size_t first_invalid_utf8(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t n = bytes.size();
  std::size_t i = 0;
  while (i < n) {
    if (i + 8 <= n) {  // eight ASCII bytes at once
      std::uint64_t word;
      std::memcpy(&word, p + i, 8);
      if ((word & 0x8080808080808080ull) == 0) { i += 8; continue; }
    }
    if (p[i] < 0x80) { ++i; continue; }
    const std::size_t len = well_formed_length(p + i, n - i);
    if (len == 0) return i;
    i += len;
  }
  return n;
}

std::size_t invalid_subpart_length(std::string_view bytes, std::size_t pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data()) + pos;
  const std::size_t left = bytes.size() - pos;
  const LeadByte lead = lead_byte(p[0]);
  if (lead.length == 0) return 1;  // 80..C1, F5..FF: never start a sequence
  // The maximal subpart is the lead byte plus the continuation bytes that were still acceptable.
  std::size_t k = 1;
  if (k < left && p[1] >= lead.lo && p[1] <= lead.hi) {
    k = 2;
    while (k < lead.length && k < left && p[k] >= 0x80 && p[k] <= 0xBF) ++k;
  }
  return k;
}

std::size_t invalid_utf8_bytes(std::string_view bytes) {
  std::size_t invalid = 0;
  for (std::size_t bad = first_invalid_utf8(bytes); bad != bytes.size(); bad = first_invalid_utf8(bytes)) {
    const std::size_t length = invalid_subpart_length(bytes, bad);
    invalid += length;
    bytes.remove_prefix(bad + length);
  }
  return invalid;
}

std::size_t append_replacing_invalid(std::string_view bytes, std::string& out) {
  std::size_t replacements = 0;
  while (!bytes.empty()) {
    const std::size_t bad = first_invalid_utf8(bytes);
    out.append(bytes.data(), bad);
    if (bad == bytes.size()) break;
    out.append("\xEF\xBF\xBD");
    ++replacements;
    bytes.remove_prefix(bad + invalid_subpart_length(bytes, bad));
  }
  return replacements;
}

}  // namespace zt::tok
