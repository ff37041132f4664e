#include "efi/pcr_policy.h"

#include <openssl/evp.h>
#include <openssl/pem.h>

#include <catch2/catch.hpp>
#include <memory>
#include <nlohmann/json.hpp>

#include "efi/pe.h"
#include "efi/testing_pe.h"
#include "util/sha256.h"
#include "util/text.h"

using namespace sprout;
using namespace sprout::efi;

namespace {

// A fixed RSA 2048 key for these tests only (it is public: never sign anything real with
// it), and its public half as `openssl rsa -pubout` writes it.
constexpr const char* kTestKey = R"(-----BEGIN PRIVATE KEY-----
MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCmYeqIl/plUVVK
ZWtyTR9uZeCNz1ryrn6+Vhi35uWRUhkAdZyDRkuZgoyqHdekgqeblYj5yNvibeBz
A3hdraivPo85QuWuc0j2jg9Pl19iTQq2za5qPeuPcONJwTZ6V/pam0eCZfKPgIoN
T70YF2breMBRuMyJQU7GPq4mgoQkCZZiyXysTdvZ6M1AgHm+4zqOOI7KvnXf1CEv
wfLFwQQecAbD9/5ExX6Stb8qcDiWG5SY6LUoBl7a0W69knoE7AHtzg6pjRviPwPq
BNCI7ddrJ/wMOvMb+CmPSC2hb1uiXiHj8DFtuhN2oIML8h2pfNF51DcWMY2npOkv
RlFBSoFXAgMBAAECggEAGhNYbWXcIUrY4hr49uXtWiDvS2pG56e/R1c48oFmUxsZ
vf+wssYujPVv1C1vIWI0oGaUHAmFpHvx5DSUBaJ0wFo+mgvI8UkyEyn6bk/b7A0E
89dSUWY457cad/Gm9w+YteCGGYKevCy59hIcIY1xXNAE3AnpTE2G6fzi0Dg+O2Ng
lGsv2K0Yb82GNW/+VitHVcv1cgZFlNdJaQRq/z83par+xFXHxdfAj+BGFQcXxICh
ujKBnijZQmswD+D2xZFLTrqP0E+083pytKNicHmwsr3ZUNVvU1esJEeWPI8vNQTZ
5Z4bMuul6EX9ang+R/VY2WzsO+Xkea7RUt2hR98y0QKBgQDPenw6I3f8EaBIAEZB
1ZhxLMPHnA31EORGnOu8Dx0NWzqpa2CN9QleSlINDb/qyQRVXWz8jhd3qE9eewAP
QJQKp/cDp+I2ReilgLiXEEGALu1R2/GiLooDeIvkUEZAUTNTTE+78H8QCNVo1SFW
jb79M3OhYVvpNCYGtkZJmPAgvwKBgQDNSw8ERsMNpWPQBoWlTRMeGOsdH2SRYV81
3VcsR0WzsYVckK7ddycEc4m068hJUyZlOLxa5LH6Ih8Z4Rdl8Xr2jKdmDx0k/Tvr
VSGtJlG8V+gc/71V/iE4NcxZkG753P4RzVbPvYPFvhpSAju11KQcovPlt/jNNp9i
14pB/lStaQKBgAprMS/ONik/TVgwQ1bs/fG4+L/eU0kaJwxwttnDvIa+LQzy6m9W
fbjxbHthVGDa5U/QGDf6fq0wk4PAE3mwmX6Lfrj9RjvJeOxOsXZMh62DLcGtlM27
Ho0cEZJOgaibK0OkkmByrD7G4siX40uwZIXcfpL9C5uDVeGCZ7csaeqLAoGBAKVM
N3YpB+sX7YtVhQy5R5hnVgBoA5DvhzsW0pcLeDscyBXlRXd69kamRQ4Q/37S3cqI
6ViCZi/Sg5pR3IYv7uNQE4Wgy8W5xSJStL/3Z76wRWv8G1Z/Pf5Fixneqwyy/TwW
Sz0QCmcRD55SwANDiTSpnJquDD4oKiPrCx7iCwppAoGAIxiRU+4dBQG2O+5mUZ5U
SIDfZkxV3lX+uOQqw/Im4gqQYzksrN/0vPEjcfCwTl0emLYmh50N2yzvod0Xo11y
L/4oFDCuGR5GcKaMGtl5G1zc/049ZGmKV3REI7vDfltZBXc7fPNDHBtDJCdTsRv3
SA7TeHV1rNf7FzJtpU+oF3k=
-----END PRIVATE KEY-----
)";
constexpr const char* kTestPublicKey = R"(-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEApmHqiJf6ZVFVSmVrck0f
bmXgjc9a8q5+vlYYt+blkVIZAHWcg0ZLmYKMqh3XpIKnm5WI+cjb4m3gcwN4Xa2o
rz6POULlrnNI9o4PT5dfYk0Kts2uaj3rj3DjScE2elf6WptHgmXyj4CKDU+9GBdm
63jAUbjMiUFOxj6uJoKEJAmWYsl8rE3b2ejNQIB5vuM6jjiOyr5139QhL8HyxcEE
HnAGw/f+RMV+krW/KnA4lhuUmOi1KAZe2tFuvZJ6BOwB7c4OqY0b4j8D6gTQiO3X
ayf8DDrzG/gpj0gtoW9bol4h4/AxbboTdqCDC/IdqXzRedQ3FjGNp6TpL0ZRQUqB
VwIDAQAB
-----END PUBLIC KEY-----
)";

// What systemd 252's `systemd-measure sign --linux=l --osrel=o --pcrpkey=pub.pem
// --bank=sha256 --phase= --private-key=k.pem --json=short` printed for these inputs (with
// swtpm as the TPM it insists on), where l holds "hello\n", o "os\n", and k.pem and
// pub.pem are kTestKey and kTestPublicKey; and `systemd-measure calculate`'s PCR 11.
constexpr const char* kReferencePcr11 = "72ab13a2aeb0d16788c718ef15d07893817fd585aa132d67b7134333d79016d9";
constexpr const char* kReferencePkfp = "5f0d9d6e5f782ee9f129f3bac69cf6ba56024c8541efc9485bbc6155bd9b08d3";
constexpr const char* kReferencePol = "3b7d276729cde2d1ecbf9a6d54a4d8473d177c5145a27098fe3f0e5fa0f9b0d0";
constexpr const char* kReferenceSig =
    "c7+N6OneYZljeb3BmZuB2ssuTMWMU391eH4C9QHWT6iRoRIT6wZdgXdUdf6bpnk5IRVeFmUZ9pt93l4E4UMwNiLgBb"
    "GODPwuL7052s77xrLXYSb70AgG2uMpDBYksG6lZKhrVXQE11fwjYyVnc5GclGExia0BPCQ/rJ+beMFCDXHZw1IIoNd"
    "KGGqFgQWHjjELs4KWpSHeDs5ZbkqasqqxIPcPJYNb3PoNMGRQ05v1y3eWO3LnSHCDgybN3iqUpvRfKIVf/y15l9WOo"
    "nhSJiVEWOjV0HW6j8q9w/OpKIRQOSqY7UXMgvnNuOf/68recuGITYGunKIlZ13MOslGqU0+A==";

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string HexOf(const Pcr& d) { return Hex(d.data(), d.size()); }

std::vector<MeasuredSection> ReferenceSections() {
  return {{".linux", "hello\n"}, {".osrel", "os\n"}, {".pcrpkey", kTestPublicKey}};
}

// VerifiesWithOpenSsl checks an RSA PKCS#1 v1.5 signature of sha256(data) with
// public_pem through EVP_PKEY_verify, apart from the code under test.
bool VerifiesWithOpenSsl(const std::string& public_pem, const std::string& data, const std::string& signature) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(public_pem.data(), static_cast<int>(public_pem.size())),
                                                BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr),
                                                          EVP_PKEY_free);
  REQUIRE(key);
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(EVP_PKEY_CTX_new(key.get(), nullptr),
                                                                  EVP_PKEY_CTX_free);
  REQUIRE(ctx);
  REQUIRE(EVP_PKEY_verify_init(ctx.get()) == 1);
  REQUIRE(EVP_PKEY_CTX_set_rsa_padding(ctx.get(), RSA_PKCS1_PADDING) == 1);
  REQUIRE(EVP_PKEY_CTX_set_signature_md(ctx.get(), EVP_sha256()) == 1);
  Sha256 h;
  h.Update(data);
  const auto digest = h.Digest();
  return EVP_PKEY_verify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                         digest.data(), digest.size()) == 1;
}

Pcr PcrFromHex(const std::string& hex) {
  Pcr p{};
  for (std::size_t i = 0; i < p.size(); ++i)
    p[i] = static_cast<std::uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return p;
}

UkiParts TestParts() {
  return UkiParts{"ID=sprout\n", "root=PARTLABEL=root-a ro", std::string(3000, 'k'), std::string(2000, 'i')};
}

// SignedTestUki is a UKI of the synthetic stub with the PCR policy signed by kTestKey.
std::string SignedTestUki(UkiParts parts = TestParts()) {
  REQUIRE(AddPcrPolicy(parts, kTestKey));
  auto uki = BuildUki(testing::MakeTestPe(), parts);
  REQUIRE(uki);
  return *uki;
}

}  // namespace

TEST_CASE("PredictPcr11 and the PCR policy match systemd-measure's for a fixed key", "[efi]") {
  const Pcr pcr11 = PredictSectionsPcr11(ReferenceSections());
  CHECK(HexOf(pcr11) == kReferencePcr11);
  CHECK(HexOf(PcrPolicyDigest(pcr11)) == kReferencePol);
  CHECK(PcrPublicKeyPem(kTestKey).value() == kTestPublicKey);
  CHECK(PcrKeyFingerprint(kTestPublicKey).value() == kReferencePkfp);
  auto json = SignPcrPolicy(pcr11, kTestKey);
  REQUIRE(json);
  CHECK(*json == std::string(R"({"sha256":[{"pcrs":[11],"pkfp":")") + kReferencePkfp + R"(","pol":")" + kReferencePol +
                     R"(","sig":")" + kReferenceSig + R"("}]})");
}

TEST_CASE("PredictPcr11 measures in the stub's order, whatever the sections' order", "[efi]") {
  const std::string expected = kReferencePcr11;
  CHECK(HexOf(PredictSectionsPcr11({{".pcrpkey", kTestPublicKey}, {".osrel", "os\n"}, {".linux", "hello\n"}})) ==
        expected);
  // .pcrsig, names the stub does not measure, and empty sections change nothing.
  CHECK(HexOf(PredictSectionsPcr11({{".text", "code"},
                                    {".pcrsig", "{}"},
                                    {".osrel", "os\n"},
                                    {".initrd", ""},
                                    {".pcrpkey", kTestPublicKey},
                                    {".linux", "hello\n"}})) == expected);
  // Each measured name counts: the same bytes under another name give another value.
  CHECK(HexOf(PredictSectionsPcr11({{".linux", "hello\n"}, {".cmdline", "os\n"}, {".pcrpkey", kTestPublicKey}})) !=
        expected);
  // With nothing measured PCR 11 stays zero.
  CHECK(PredictSectionsPcr11({}) == Pcr{});
  // A UKI's file order (.osrel, .cmdline, .linux, .initrd, .pcrpkey, .pcrsig) is not the
  // measured order, and reading the file back gives what the parts predict.
  UkiParts parts = TestParts();
  REQUIRE(AddPcrPolicy(parts, kTestKey));
  auto uki = BuildUki(testing::MakeTestPe(), parts);
  REQUIRE(uki);
  CHECK(PredictUkiPcr11(*uki).value() == PredictPcr11(parts));
  CHECK(PredictPcr11(parts) == PredictSectionsPcr11({{".initrd", parts.initrd},
                                                     {".pcrpkey", parts.pcrpkey},
                                                     {".cmdline", parts.cmdline},
                                                     {".osrel", parts.osrel},
                                                     {".linux", parts.kernel}}));
}

TEST_CASE("The PCR policy digest and signature verify apart from sprout's code", "[efi]") {
  const Pcr pcr11 = PredictSectionsPcr11(ReferenceSections());
  // TPM2_PolicyPCR's digest, written out byte by byte.
  Sha256 selected;
  selected.Update(pcr11.data(), pcr11.size());
  const auto pcr_digest = selected.Digest();
  std::string input(32, '\0');
  input += std::string("\x00\x00\x01\x7f", 4);                           // TPM_CC_PolicyPCR
  input += std::string("\x00\x00\x00\x01\x00\x0b\x03\x00\x08\x00", 10);  // PCR 11 of sha256
  input.append(reinterpret_cast<const char*>(pcr_digest.data()), pcr_digest.size());
  CHECK(Sha256Hex(input) == HexOf(PcrPolicyDigest(pcr11)));

  auto json = nlohmann::json::parse(SignPcrPolicy(pcr11, kTestKey).value());
  const auto& entry = json.at("sha256").at(0);
  CHECK(entry.at("pcrs") == nlohmann::json::array({11}));
  const Pcr pol = PcrFromHex(entry.at("pol").get<std::string>());
  CHECK(pol == PcrPolicyDigest(pcr11));
  auto sig = Base64Decode(entry.at("sig").get<std::string>());
  REQUIRE(sig);
  CHECK(sig->size() == 256);
  const std::string pol_bytes(reinterpret_cast<const char*>(pol.data()), pol.size());
  CHECK(VerifiesWithOpenSsl(kTestPublicKey, pol_bytes, *sig));
  std::string other = pol_bytes;
  other[0] ^= 1;
  CHECK(!VerifiesWithOpenSsl(kTestPublicKey, other, *sig));
}

TEST_CASE("The PCR policy is deterministic for a given key", "[efi]") {
  const Pcr pcr11 = PredictSectionsPcr11(ReferenceSections());
  CHECK(SignPcrPolicy(pcr11, kTestKey).value() == SignPcrPolicy(pcr11, kTestKey).value());
  CHECK(SignedTestUki() == SignedTestUki());
  UkiParts other = TestParts();
  other.cmdline += " quiet";
  CHECK(SignedTestUki(other) != SignedTestUki());
}

TEST_CASE("AddPcrPolicy fills .pcrpkey and a .pcrsig for the UKI with it", "[efi]") {
  UkiParts parts = TestParts();
  parts.pcrsig = "stale";
  REQUIRE(AddPcrPolicy(parts, kTestKey));
  CHECK(parts.pcrpkey == kTestPublicKey);
  auto json = nlohmann::json::parse(parts.pcrsig);
  CHECK(json.at("sha256").at(0).at("pol") == HexOf(PcrPolicyDigest(PredictPcr11(parts))));
  CHECK(json.at("sha256").at(0).at("pkfp") == kReferencePkfp);
}

TEST_CASE("The PCR policy's key must be an unencrypted RSA private key", "[efi]") {
  auto garbage = PcrPublicKeyPem("not a key");
  REQUIRE(!garbage);
  CHECK(Contains(garbage.error(), "the PCR policy's signing key is not an unencrypted PEM private key"));
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> ec(EVP_EC_gen("P-256"), EVP_PKEY_free);
  REQUIRE(ec);
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  REQUIRE(PEM_write_bio_PrivateKey(bio.get(), ec.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  const std::string ec_pem(data, static_cast<std::size_t>(n));
  auto ec_sig = SignPcrPolicy(Pcr{}, ec_pem);
  REQUIRE(!ec_sig);
  CHECK(ec_sig.error() ==
        "the PCR policy's signing key is not RSA; systemd 252 checks signed PCR policies with RSA keys only");
  auto fp = PcrKeyFingerprint(kTestKey);  // a private key is not a public key PEM
  REQUIRE(!fp);
  CHECK(Contains(fp.error(), "the PCR policy's public key is not a PEM public key"));
}

TEST_CASE("CheckPcrPolicy accepts a signed UKI's policy and names what is wrong with others", "[efi]") {
  const std::string uki = SignedTestUki();
  auto good = CheckPcrPolicy(uki);
  REQUIRE(good);
  CHECK(good->ok());
  CHECK(good->problem.empty());
  CHECK(good->pcr11 == HexOf(PredictPcr11([] {
          UkiParts p = TestParts();
          p.pcrpkey = kTestPublicKey;
          return p;
        }())));
  CHECK(good->key_fingerprint == kReferencePkfp);
  CHECK(good->signed_policy == HexOf(PcrPolicyDigest(PcrFromHex(good->pcr11))));

  // No .pcrsig: nothing to check, and not a failure.
  auto none = CheckPcrPolicy(BuildUki(testing::MakeTestPe(), TestParts()).value());
  REQUIRE(none);
  CHECK(!none->present);

  // Another command line under the old signature: the policy is not this file's.
  UkiParts parts = TestParts();
  REQUIRE(AddPcrPolicy(parts, kTestKey));
  parts.cmdline += " init=/bin/sh";
  auto changed = CheckPcrPolicy(BuildUki(testing::MakeTestPe(), parts).value());
  REQUIRE(changed);
  CHECK(changed->present);
  CHECK(!changed->ok());
  CHECK(!changed->policy_matches);
  CHECK(changed->signature_verifies);
  CHECK(Contains(changed->problem, "is not this file's PCR 11's"));

  // A signature of another policy, pasted in with this one's digest.
  UkiParts forged = TestParts();
  REQUIRE(AddPcrPolicy(forged, kTestKey));
  auto json = nlohmann::json::parse(forged.pcrsig);
  auto other = nlohmann::json::parse(SignPcrPolicy(Pcr{}, kTestKey).value());
  json["sha256"][0]["sig"] = other["sha256"][0]["sig"];
  forged.pcrsig = json.dump();
  auto bad_sig = CheckPcrPolicy(BuildUki(testing::MakeTestPe(), forged).value());
  REQUIRE(bad_sig);
  CHECK(bad_sig->policy_matches);
  CHECK(!bad_sig->signature_verifies);
  CHECK(bad_sig->problem == "the signature does not verify with .pcrpkey");

  // A .pcrsig without a .pcrpkey, and one that is not systemd's JSON.
  UkiParts no_key = TestParts();
  REQUIRE(AddPcrPolicy(no_key, kTestKey));
  no_key.pcrpkey.clear();
  auto missing = CheckPcrPolicy(BuildUki(testing::MakeTestPe(), no_key).value());
  REQUIRE(missing);
  CHECK(missing->problem == "there is no .pcrpkey to check .pcrsig with");
  for (const char* text :
       {"not json", "[]", R"({"sha256":{}})", R"({"sha256":[{"pcrs":[7],"pkfp":"","pol":"","sig":""}]})"}) {
    INFO(text);
    UkiParts weird = TestParts();
    REQUIRE(AddPcrPolicy(weird, kTestKey));
    weird.pcrsig = text;
    auto c = CheckPcrPolicy(BuildUki(testing::MakeTestPe(), weird).value());
    REQUIRE(c);
    CHECK(c->present);
    CHECK(!c->ok());
    CHECK(!c->problem.empty());
  }
  auto not_pe = CheckPcrPolicy("text");
  REQUIRE(!not_pe);
  CHECK(not_pe.error() == "the UKI is not a PE32+ EFI image: no MZ header");
}

TEST_CASE("PredictUkiPcr11 refuses a measured section larger in memory than in the file", "[efi]") {
  std::string uki = SignedTestUki();
  auto pe = ParsePe(uki, "uki");
  REQUIRE(pe);
  std::size_t header = pe->section_table_offset;
  for (const auto& s : pe->sections) {
    if (s.name == ".cmdline") break;
    header += 40;
  }
  PutLe32(uki, header + 8, 0x10000);  // VirtualSize past its 0x200 raw bytes
  auto pcr = PredictUkiPcr11(uki);
  REQUIRE(!pcr);
  CHECK(pcr.error() ==
        "the UKI's .cmdline section is 65536 bytes in memory but has 512 in the file; sprout predicts PCR 11 only "
        "from bytes the file holds");
}
