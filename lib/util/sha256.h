// SHA-256 over OpenSSL's EVP interface, for digests, cache keys and derived IDs.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "util/result.h"

namespace sprout {

// Sha256 hashes a stream of bytes incrementally.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  // Update adds bytes to the hash.
  void Update(const void* data, std::size_t size);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  // Digest finishes the hash; call it once.
  std::array<std::uint8_t, 32> Digest();
  // HexDigest finishes the hash and renders it as 64 hex digits.
  std::string HexDigest();

 private:
  void* ctx_;
};

// Sha256Hex hashes a string and returns hex.
std::string Sha256Hex(std::string_view data);

// Sha256File hashes a file's contents and returns hex.
Result<std::string> Sha256File(const std::filesystem::path& path);

// HkdfSha256 derives a 32-byte key from KEY material with HKDF-SHA256 (RFC 5869),
// extracting with SALT and expanding with INFO. Each use names its purpose and version
// in SALT or INFO, so two uses never share a key made from the same secret.
Result<std::array<std::uint8_t, 32>> HkdfSha256(std::string_view key, std::string_view salt, std::string_view info);

}  // namespace sprout
