#include "tpm/lockout.h"

#include <cstdio>
#include <map>

namespace sprout::tpm {
namespace {

constexpr std::uint16_t kStNoSessions = 0x8001;  // TPM_ST_NO_SESSIONS
constexpr std::uint16_t kStSessions = 0x8002;    // TPM_ST_SESSIONS
constexpr std::uint32_t kCcGetCapability = 0x0000017A;
constexpr std::uint32_t kCcLockReset = 0x00000139;  // TPM_CC_DictionaryAttackLockReset
constexpr std::uint32_t kCapTpmProperties = 0x00000006;
constexpr std::uint32_t kRhLockout = 0x4000000A;
constexpr std::uint32_t kRsPw = 0x40000009;  // the password session
constexpr std::uint32_t kPtPermanent = 0x200;
constexpr std::uint32_t kPtLockoutCounter = 0x20E;
constexpr std::uint32_t kPtMaxAuthFail = 0x20F;
constexpr std::uint32_t kPtLockoutInterval = 0x210;
constexpr std::uint32_t kPtLockoutRecovery = 0x211;
constexpr std::uint32_t kLockoutAuthSet = 1U << 2;  // TPMA_PERMANENT
constexpr std::uint32_t kInLockout = 1U << 9;
constexpr std::size_t kHeader = 10;  // tag, size, code

void Put16(Bytes& b, std::uint16_t v) {
  b.push_back(static_cast<std::uint8_t>(v >> 8));
  b.push_back(static_cast<std::uint8_t>(v));
}

void Put32(Bytes& b, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<std::uint8_t>(v >> shift));
}

std::uint32_t Get32(const Bytes& b, std::size_t at) {
  return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) | (std::uint32_t{b[at + 2]} << 8) |
         std::uint32_t{b[at + 3]};
}

// Command is a command's header (its size filled in) followed by body.
Bytes Command(std::uint16_t tag, std::uint32_t code, const Bytes& body) {
  Bytes b;
  Put16(b, tag);
  Put32(b, static_cast<std::uint32_t>(kHeader + body.size()));
  Put32(b, code);
  b.insert(b.end(), body.begin(), body.end());
  return b;
}

std::string Hex(std::uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%X", v);
  return text;
}

// RcName names the response codes a lockout reset or read can meet (Part 2, 6.6).
std::string RcName(std::uint32_t rc) {
  static const std::map<std::uint32_t, std::string> names = {
      {0x100, "TPM_RC_INITIALIZE"},   {0x101, "TPM_RC_FAILURE"},      {0x120, "TPM_RC_DISABLED"},
      {0x125, "TPM_RC_AUTH_MISSING"}, {0x143, "TPM_RC_COMMAND_CODE"}, {0x908, "TPM_RC_YIELDED"},
      {0x909, "TPM_RC_CANCELED"},     {0x90A, "TPM_RC_TESTING"},      {0x920, "TPM_RC_NV_RATE"},
      {0x921, "TPM_RC_LOCKOUT"},      {0x922, "TPM_RC_RETRY"},        {0x923, "TPM_RC_NV_UNAVAILABLE"},
  };
  if (auto it = names.find(rc); it != names.end()) return it->second;
  if ((rc & 0x80U) != 0) {  // format 1: the error in the low 6 bits, then which handle/session/parameter
    static const std::map<std::uint32_t, std::string> fmt1 = {
        {0x084, "TPM_RC_VALUE"}, {0x08B, "TPM_RC_HANDLE"}, {0x08E, "TPM_RC_AUTH_FAIL"}, {0x0A2, "TPM_RC_BAD_AUTH"}};
    if (auto it = fmt1.find(0x80U | (rc & 0x3FU)); it != fmt1.end()) return it->second;
  }
  return "response code";
}

}  // namespace

Bytes ReadDaCommand() {
  Bytes body;
  Put32(body, kCapTpmProperties);
  Put32(body, kPtPermanent);
  Put32(body, kPtLockoutRecovery - kPtPermanent + 1);
  return Command(kStNoSessions, kCcGetCapability, body);
}

Bytes ResetCommand() {
  Bytes body;
  Put32(body, kRhLockout);
  Put32(body, 9);  // the authorization area's size: one password session
  Put32(body, kRsPw);
  Put16(body, 0);     // nonce: empty
  body.push_back(0);  // session attributes: none
  Put16(body, 0);     // the password: empty
  return Command(kStSessions, kCcLockReset, body);
}

Status CheckResponse(const Bytes& r) {
  if (r.size() < kHeader)
    return Fail("the TPM's answer is " + std::to_string(r.size()) + " bytes, shorter than a header");
  if (Get32(r, 2) != r.size()) {
    return Fail("the TPM's answer says it is " + std::to_string(Get32(r, 2)) + " bytes but is " +
                std::to_string(r.size()));
  }
  const std::uint32_t rc = Get32(r, 6);
  if (rc != 0) return Fail("the TPM answered " + RcName(rc) + " (" + Hex(rc) + ")");
  return Ok{};
}

Result<DaState> ParseDaResponse(const Bytes& r) {
  if (auto ok = CheckResponse(r); !ok) return Fail(ok.error());
  // moreData (1), capability (4), count (4), then count × (property, value).
  if (r.size() < kHeader + 9) return Fail("the TPM's capability answer is too short");
  if (Get32(r, kHeader + 1) != kCapTpmProperties) return Fail("the TPM answered another capability than asked");
  const std::uint32_t count = Get32(r, kHeader + 5);
  const std::size_t list = kHeader + 9;
  if (count > (r.size() - list) / 8) {
    return Fail("the TPM's capability answer lists " + std::to_string(count) + " properties but holds fewer");
  }
  std::map<std::uint32_t, std::uint32_t> props;
  for (std::size_t at = list; at < list + std::size_t{8} * count; at += 8) props[Get32(r, at)] = Get32(r, at + 4);
  DaState s;
  s.counter = props[kPtLockoutCounter];
  s.max_tries = props[kPtMaxAuthFail];
  s.interval_seconds = props[kPtLockoutInterval];
  s.recovery_seconds = props[kPtLockoutRecovery];
  s.in_lockout = (props[kPtPermanent] & kInLockout) != 0;
  s.lockout_auth_set = (props[kPtPermanent] & kLockoutAuthSet) != 0;
  return s;
}

std::string DescribeDa(const DaState& s) {
  std::string text = "lockout counter " + std::to_string(s.counter) + " of " + std::to_string(s.max_tries) +
                     ", one count forgiven every " + std::to_string(s.interval_seconds) + " s";
  if (s.in_lockout) text += ", IN LOCKOUT";
  if (s.lockout_auth_set) text += ", lockout authorization set";
  return text;
}

}  // namespace sprout::tpm
