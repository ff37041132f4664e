#include "tpm/lockout.h"

#include <catch2/catch.hpp>

using namespace sprout::tpm;

namespace {

// Answer builds a response: tag, size, code, then body.
Bytes Answer(std::uint32_t rc, const Bytes& body = {}) {
  Bytes b = {0x80, 0x01};
  const auto size = static_cast<std::uint32_t>(10 + body.size());
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(size >> s));
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(rc >> s));
  b.insert(b.end(), body.begin(), body.end());
  return b;
}

void Put32(Bytes& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(v >> s));
}

// Properties is a TPM_PROPERTIES capability answer's body listing pairs.
Bytes Properties(const std::vector<std::pair<std::uint32_t, std::uint32_t>>& pairs) {
  Bytes b = {0};  // moreData: no
  Put32(b, 6);
  Put32(b, static_cast<std::uint32_t>(pairs.size()));
  for (const auto& [p, v] : pairs) {
    Put32(b, p);
    Put32(b, v);
  }
  return b;
}

}  // namespace

TEST_CASE("tpm: the two commands' bytes, as Part 3 of the TPM 2.0 specification lays them out", "[tpm]") {
  // TPM2_GetCapability(TPM_CAP_TPM_PROPERTIES, TPM_PT_PERMANENT, 18), no session.
  CHECK(ReadDaCommand() == Bytes{0x80, 0x01, 0, 0, 0, 22, 0, 0, 0x01, 0x7A, 0, 0, 0, 6, 0, 0, 0x02, 0x00, 0, 0, 0, 18});
  // TPM2_DictionaryAttackLockReset(TPM_RH_LOCKOUT), a password session with an empty
  // password: 27 bytes.
  CHECK(ResetCommand() == Bytes{0x80, 0x02, 0, 0, 0,    27, 0, 0,    0x01, 0x39, 0x40, 0, 0, 0x0A,
                                0,    0,    0, 9, 0x40, 0,  0, 0x09, 0,    0,    0,    0, 0});
}

TEST_CASE("tpm: a lockout state read from a capability answer", "[tpm]") {
  // swtpm's defaults after one unclean shutdown: counter 1 of 3, 1000 s, recovery 1000 s.
  auto s = ParseDaResponse(
      Answer(0, Properties({{0x200, 0}, {0x201, 0x80000007}, {0x20E, 1}, {0x20F, 3}, {0x210, 1000}, {0x211, 1000}})));
  REQUIRE(s);
  CHECK(s->counter == 1);
  CHECK(s->max_tries == 3);
  CHECK(s->interval_seconds == 1000);
  CHECK(s->recovery_seconds == 1000);
  CHECK_FALSE(s->in_lockout);
  CHECK_FALSE(s->lockout_auth_set);
  CHECK(DescribeDa(*s) == "lockout counter 1 of 3, one count forgiven every 1000 s");

  auto locked = ParseDaResponse(Answer(0, Properties({{0x200, (1U << 9) | (1U << 2)}, {0x20E, 3}, {0x20F, 3}})));
  REQUIRE(locked);
  CHECK(locked->in_lockout);
  CHECK(locked->lockout_auth_set);
  CHECK(DescribeDa(*locked) ==
        "lockout counter 3 of 3, one count forgiven every 0 s, IN LOCKOUT, lockout authorization set");
}

TEST_CASE("tpm: a refusal or a malformed answer is an error that names it", "[tpm]") {
  CHECK(CheckResponse(Answer(0)));
  CHECK(CheckResponse(Answer(0x921)).error() == "the TPM answered TPM_RC_LOCKOUT (0x921)");
  // Format 1: TPM_RC_AUTH_FAIL on session 1 (0x08E | session bit | session number).
  CHECK(CheckResponse(Answer(0x98E)).error() == "the TPM answered TPM_RC_AUTH_FAIL (0x98E)");
  CHECK(CheckResponse(Answer(0x9A2)).error() == "the TPM answered TPM_RC_BAD_AUTH (0x9A2)");
  CHECK(CheckResponse(Answer(0x12345)).error() == "the TPM answered response code (0x12345)");
  CHECK(CheckResponse(Bytes{0x80, 0x01, 0}).error().find("shorter than a header") != std::string::npos);
  Bytes lying = Answer(0);
  lying[5] = 40;
  CHECK(CheckResponse(lying).error().find("says it is 40 bytes but is 10") != std::string::npos);
  CHECK(ParseDaResponse(Answer(0x101)).error() == "the TPM answered TPM_RC_FAILURE (0x101)");
  Bytes few = Properties({{0x20E, 1}});
  few[8] = 5;  // claims 5 pairs, holds 1
  CHECK(ParseDaResponse(Answer(0, few)).error().find("lists 5 properties but holds fewer") != std::string::npos);
  Bytes other = Properties({});
  other[4] = 7;  // another capability
  CHECK(ParseDaResponse(Answer(0, other)).error().find("another capability") != std::string::npos);
  CHECK(ParseDaResponse(Answer(0, Bytes{0, 0})).error().find("too short") != std::string::npos);
}
