// What a build says it is, as an update reads it: its serial, the profile whose nodes it
// updates, its role and its cluster ("update" in manifest.json and image.json, which
// image/manifest.h writes), and the two rules between the running build and a new one
// (docs/updates.md): the serial must grow, and profile, role and cluster must stay.
// Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "util/result.h"

namespace sprout::update {

// RecordedIdentity is a build's identity as its manifest.json or image.json records it.
// A build made before serials has no "update": its serial is its epoch (the default
// serial, so a build with a later epoch stays newer), its profile and role come from its
// recorded profile, and its cluster is unknown.
struct RecordedIdentity {
  std::optional<std::int64_t> serial;  // nullopt: unknown (neither a serial nor an epoch)
  bool serial_from_epoch = false;      // no "update": the serial is reproducible.sourceDateEpoch
  std::string profile;                 // "" unknown
  std::string role;                    // "" unknown
  std::string cluster;                 // "" unknown (a build before serials)
};

// ReadIdentity reads a manifest.json's or image.json's identity. Text that is not a JSON
// object, or an "update" that is not {serial: a non-negative integer, profile, role,
// cluster: non-empty strings}, is an error that names what (the file) and the fix: a
// damaged file is not read as "unknown".
Result<RecordedIdentity> ReadIdentity(const std::string& json_text, const std::string& what);

// CheckSerial allows a build whose serial is above the running one's; an equal or older
// serial, or one that is unknown on either side, is refused unless allow_downgrade
// (--allow-downgrade). The refusal names both serials and the flag; the result is a
// note for the log.
Result<std::string> CheckSerial(const RecordedIdentity& running, const RecordedIdentity& next, bool allow_downgrade);

// CheckSameNodes allows a build of the running build's profile, role and cluster. One
// that differs in any, or whose profile or role is unknown on either side, is refused
// unless allow_cross_profile (--allow-cross-profile); the refusal names each that
// differs. A cluster unknown on either side (a build before serials) is not compared,
// and the note says so.
Result<std::string> CheckSameNodes(const RecordedIdentity& running, const RecordedIdentity& next,
                                   bool allow_cross_profile);

// IdentityNotes are what the two rules said of a build they allowed, for the log.
struct IdentityNotes {
  std::string nodes;   // CheckSameNodes
  std::string serial;  // CheckSerial
};

// CheckIdentityRules runs CheckSameNodes and CheckSerial and reports every refusal at
// once, so one message names every flag it would take.
Result<IdentityNotes> CheckIdentityRules(const RecordedIdentity& running, const RecordedIdentity& next,
                                         bool allow_downgrade, bool allow_cross_profile);

}  // namespace sprout::update
