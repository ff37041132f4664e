// The TPM 2.0's dictionary-attack protection, as two commands in bytes (pure: no device).
//
// A TPM counts an unclean shutdown (a power cut, a panic) of a boot that used a
// DA-protected object against its lockout limit; systemd 252 seals the state's key
// without noDA, so power cuts in a row lock a node out of its encrypted state
// (docs/secure-boot.md). A node that unlocked and booted resets the counter with
// TPM2_DictionaryAttackLockReset, which needs the lockout hierarchy's authorization:
// done only when that authorization is empty (TPM_PT_PERMANENT's lockoutAuthSet clear),
// since a wrong one would itself lock the lockout hierarchy for its recovery time.
//
// Encodings from the TPM 2.0 Library specification, Part 3 (commands) and Part 2
// (structures); every integer big-endian.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace sprout::tpm {

using Bytes = std::vector<std::uint8_t>;

// DaState is what TPM2_GetCapability(TPM_PROPERTIES) says of the lockout.
struct DaState {
  std::uint32_t counter = 0;           // TPM_PT_LOCKOUT_COUNTER: failures counted now
  std::uint32_t max_tries = 0;         // TPM_PT_MAX_AUTH_FAIL: the lockout limit
  std::uint32_t interval_seconds = 0;  // TPM_PT_LOCKOUT_INTERVAL: one count forgiven per
  std::uint32_t recovery_seconds = 0;  // TPM_PT_LOCKOUT_RECOVERY: after a lockout-auth failure
  bool in_lockout = false;             // TPMA_PERMANENT.inLockout
  bool lockout_auth_set = false;       // TPMA_PERMANENT.lockoutAuthSet
};

// ReadDaCommand is TPM2_GetCapability for the variable properties TPM_PT_PERMANENT
// (0x200) through TPM_PT_LOCKOUT_RECOVERY (0x211), with no session.
Bytes ReadDaCommand();

// ParseDaResponse reads ReadDaCommand's answer. Fails, naming the response code, when the
// TPM refused, and on a short or malformed answer; a property the TPM left out reads 0.
Result<DaState> ParseDaResponse(const Bytes& response);

// ResetCommand is TPM2_DictionaryAttackLockReset on TPM_RH_LOCKOUT, authorized by a
// password session (TPM_RS_PW) with an empty password.
Bytes ResetCommand();

// CheckResponse is the response code of any answer: ok for TPM_RC_SUCCESS, else an error
// naming the code ("TPM_RC_LOCKOUT (0x921)").
Status CheckResponse(const Bytes& response);

// DescribeDa is the state as one line: "lockout counter 1 of 3, one count forgiven every
// 1000 s" (and ", IN LOCKOUT" / ", lockout authorization set").
std::string DescribeDa(const DaState& s);

}  // namespace sprout::tpm
