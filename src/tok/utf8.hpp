// UTF-8 validation and repair with Python's bytes.decode("utf-8", errors="replace") semantics: each
// maximal subpart of an ill-formed sequence (Unicode §3.9, U+FFFD substitution) becomes one U+FFFD.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace zt::tok {

// Byte offset of the first ill-formed byte, or bytes.size() when all of it is valid UTF-8.
std::size_t first_invalid_utf8(std::string_view bytes);

// Length (1..3) of the maximal subpart that starts at bytes[pos], which must be ill-formed there
// (first_invalid_utf8 points at such a place).
std::size_t invalid_subpart_length(std::string_view bytes, std::size_t pos);

// Number of bytes in ill-formed subparts (what append_replacing_invalid replaces).
std::size_t invalid_utf8_bytes(std::string_view bytes);

// Appends bytes to out with every maximal ill-formed subpart replaced by U+FFFD (EF BF BD);
// returns the number of replacements.
std::size_t append_replacing_invalid(std::string_view bytes, std::string& out);

}  // namespace zt::tok
