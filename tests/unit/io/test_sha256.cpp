// SHA-256 against the FIPS 180-4 example vectors, and block-boundary independence.
#include <gtest/gtest.h>

#include <string>

#include "core/sha256.hpp"

namespace zt {
namespace {

TEST(Sha256, MatchesTheStandardsVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PiecewiseUpdatesEqualOneUpdate) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += static_cast<char>(i * 131 % 251);
  const std::string whole = sha256_hex(text);
  for (std::size_t step : {1u, 7u, 55u, 56u, 63u, 64u, 65u, 200u}) {
    Sha256 h;
    for (std::size_t i = 0; i < text.size(); i += step) h.update(std::string_view(text).substr(i, step));
    EXPECT_EQ(to_hex(h.finish()), whole) << "step " << step;
  }
}

}  // namespace
}  // namespace zt
