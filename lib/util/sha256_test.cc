#include "util/sha256.h"

#include <array>
#include <catch2/catch.hpp>
#include <string>

namespace sprout {
namespace {

std::string Hex(const std::array<std::uint8_t, 32>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (std::uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

TEST_CASE("sha256: the digest of a known string") {
  CHECK(Sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("hkdf: RFC 5869's first SHA-256 test case (the first 32 bytes of its output)") {
  std::string ikm(22, '\x0b');
  std::string salt;
  for (int i = 0; i <= 0x0c; ++i) salt += static_cast<char>(i);
  std::string info;
  for (int i = 0xf0; i <= 0xf9; ++i) info += static_cast<char>(i);
  auto okm = HkdfSha256(ikm, salt, info);
  REQUIRE(okm);
  CHECK(Hex(*okm) == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf");
}

TEST_CASE("hkdf: another salt or info gives another key") {
  auto a = HkdfSha256("secret", "sprout formation v1", "cluster:edge");
  auto b = HkdfSha256("secret", "sprout backup v1", "cluster:edge");
  auto c = HkdfSha256("secret", "sprout formation v1", "cluster:hall");
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  CHECK(*a != *b);
  CHECK(*a != *c);
}

}  // namespace
}  // namespace sprout
