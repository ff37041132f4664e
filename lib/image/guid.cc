#include "image/guid.h"

#include "util/sha256.h"
#include "util/text.h"

namespace sprout {

std::optional<Guid> Guid::Parse(std::string_view text) {
  if (text.size() != 36) return std::nullopt;
  Guid g;
  std::size_t b = 0;
  for (std::size_t i = 0; i < text.size();) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (text[i] != '-') return std::nullopt;
      ++i;
      continue;
    }
    auto nibble = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    int hi = nibble(text[i]), lo = nibble(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    g.bytes[b++] = static_cast<std::uint8_t>(hi << 4 | lo);
    i += 2;
  }
  return g;
}

Guid Guid::FromBytes(const std::uint8_t* data) {
  Guid g;
  for (std::size_t i = 0; i < 16; ++i) g.bytes[i] = data[i];
  g.bytes[6] = static_cast<std::uint8_t>((g.bytes[6] & 0x0f) | 0x40);  // version 4
  g.bytes[8] = static_cast<std::uint8_t>((g.bytes[8] & 0x3f) | 0x80);  // RFC 4122 variant
  return g;
}

Guid Guid::Derive(std::string_view seed, std::string_view purpose) {
  Sha256 h;
  h.Update(seed);
  h.Update("\0", 1);
  h.Update(purpose);
  auto d = h.Digest();
  return FromBytes(d.data());
}

std::string Guid::ToString() const {
  std::string hex = Hex(bytes.data(), bytes.size());
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" + hex.substr(16, 4) + "-" +
         hex.substr(20);
}

void Guid::ToDisk(std::uint8_t* out) const {
  static const int kOrder[16] = {3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15};
  for (int i = 0; i < 16; ++i) out[i] = bytes[static_cast<std::size_t>(kOrder[i])];
}

}  // namespace sprout
