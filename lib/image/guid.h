// GUIDs as GPT stores them, and deterministic derivation from build inputs.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sprout {

// Guid is a 16-byte GUID kept in its canonical text byte order (as printed).
struct Guid {
  std::array<std::uint8_t, 16> bytes{};

  // Parse reads "c12a7328-f81f-11d2-ba4b-00a0c93ec93b" (either case).
  static std::optional<Guid> Parse(std::string_view text);
  // Derive makes a version-4-shaped GUID from sha256(seed || "\0" || purpose), so one
  // build input always gives the same GUID and different purposes give different ones.
  static Guid Derive(std::string_view seed, std::string_view purpose);
  // FromBytes makes a GUID from the first 16 bytes of data, marked as version 4.
  static Guid FromBytes(const std::uint8_t* data);

  // ToString renders the canonical lower-case text form.
  std::string ToString() const;
  // ToDisk writes the mixed-endian on-disk form GPT uses (first three fields little-endian).
  void ToDisk(std::uint8_t* out) const;

  bool operator==(const Guid&) const = default;
};

// Partition type GUIDs from the UAPI Group's Discoverable Partitions Specification.
namespace dps {
inline constexpr std::string_view kEsp = "c12a7328-f81f-11d2-ba4b-00a0c93ec93b";
inline constexpr std::string_view kRootX86_64 = "4f68bce3-e8cd-4db1-96e7-fbcaf984b709";
inline constexpr std::string_view kRootVerityX86_64 = "2c7357ed-ebd2-46d9-aec1-23d437ec2bf5";
inline constexpr std::string_view kRootArm64 = "b921b045-1df0-41c3-af44-4c6f280d3fae";        // 64-bit ARM/AArch64
inline constexpr std::string_view kRootVerityArm64 = "df3300ce-d69f-4c92-978c-9bfb0f38d820";  // 64-bit ARM/AArch64
inline constexpr std::string_view kVar = "4d21b016-b534-45c2-a9fb-5c16e091fd2d";
inline constexpr std::string_view kLinuxGeneric = "0fc63daf-8483-4772-8e79-3d69d8477de4";
}  // namespace dps

}  // namespace sprout
