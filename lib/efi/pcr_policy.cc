#include "efi/pcr_policy.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "efi/openssl.h"
#include "efi/pe.h"
#include "util/sha256.h"
#include "util/text.h"

namespace sprout::efi {

namespace {

using ossl::Bio;
using ossl::Bytes;
using ossl::Key;
using ossl::MdCtx;

// The sections systemd's stub (252) measures into PCR 11, in the order it measures them.
// .pcrsig is left out on purpose: it signs the value these make.
constexpr std::array<std::string_view, 7> kMeasuredSections{".linux",  ".osrel", ".cmdline", ".initrd",
                                                            ".splash", ".dtb",   ".pcrpkey"};

// TPM_CC_PolicyPCR, big-endian.
constexpr std::array<std::uint8_t, 4> kPolicyPcrCommand{0x00, 0x00, 0x01, 0x7f};
// TPML_PCR_SELECTION with one TPMS_PCR_SELECTION: count 1, TPM_ALG_SHA256, three bytes of
// bitmap with bit 11 (byte 1, bit 3) set.
constexpr std::array<std::uint8_t, 10> kPcr11Selection{0x00, 0x00, 0x00, 0x01, 0x00, 0x0b, 0x03, 0x00, 0x08, 0x00};

std::string OpenSslError() { return ossl::ErrorText(); }

std::string HexOf(const Pcr& d) { return Hex(d.data(), d.size()); }

// Extend is TPM2_PCR_Extend of the sha256 bank with the digest of data.
void Extend(Pcr& pcr, std::string_view data) {
  Sha256 inner;
  inner.Update(data);
  const Pcr measured = inner.Digest();
  Sha256 outer;
  outer.Update(pcr.data(), pcr.size());
  outer.Update(measured.data(), measured.size());
  pcr = outer.Digest();
}

Result<Key> ReadRsaPrivateKey(std::string_view pem) {
  Key key = ossl::ReadPrivateKey(pem);  // an encrypted key is refused, as for the Authenticode signer
  if (!key)
    return Fail("the PCR policy's signing key is not an unencrypted PEM private key (" + OpenSslError() +
                "); give the RSA key the UKI is signed with, without a passphrase");
  if (EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_RSA)
    return Fail("the PCR policy's signing key is not RSA; systemd 252 checks signed PCR policies with RSA keys only");
  return key;
}

Result<Key> ReadRsaPublicKey(std::string_view pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  Key key(bio ? PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr) : nullptr, EVP_PKEY_free);
  if (!key) return Fail("the PCR policy's public key is not a PEM public key (" + OpenSslError() + ")");
  if (EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_RSA) return Fail("the PCR policy's public key is not RSA");
  return key;
}

std::string PublicPem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()), BIO_free);
  if (!bio || PEM_write_bio_PUBKEY(bio.get(), key) != 1) return "";
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

Result<std::string> Fingerprint(EVP_PKEY* key) {
  // For an RSA key, i2d_PublicKey writes PKCS#1 RSAPublicKey (modulus and exponent).
  const int n = i2d_PublicKey(key, nullptr);
  if (n <= 0) return Fail("cannot encode the PCR policy's public key: " + OpenSslError());
  std::string der(static_cast<std::size_t>(n), '\0');
  auto* p = reinterpret_cast<unsigned char*>(der.data());
  if (i2d_PublicKey(key, &p) != n) return Fail("cannot encode the PCR policy's public key: " + OpenSslError());
  return Sha256Hex(der);
}

std::optional<std::string> Unhex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]);
    const int lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

bool VerifySignature(EVP_PKEY* key, std::string_view data, std::string_view signature) {
  MdCtx ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  const bool ok = ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) == 1 &&
                  EVP_DigestVerify(ctx.get(), Bytes(signature), signature.size(), Bytes(data), data.size()) == 1;
  ERR_clear_error();
  return ok;
}

// Entry is one {"pcrs":[...],"pkfp":...,"pol":...,"sig":...} of .pcrsig's sha256 list.
struct Entry {
  std::string pkfp, pol, sig;
};

// Pcr11Entries reads the sha256 entries for exactly PCR 11 from .pcrsig's JSON, or says
// why it is not systemd's format.
Result<std::vector<Entry>> Pcr11Entries(const std::string& text) {
  const auto json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded() || !json.is_object()) return Fail(".pcrsig is not a JSON object");
  const auto bank = json.find("sha256");
  if (bank == json.end() || !bank->is_array()) return Fail(".pcrsig has no \"sha256\" list");
  std::vector<Entry> out;
  for (const auto& e : *bank) {
    if (!e.is_object()) continue;
    const auto pcrs = e.find("pcrs");
    const auto pkfp = e.find("pkfp");
    const auto pol = e.find("pol");
    const auto sig = e.find("sig");
    if (pcrs == e.end() || pkfp == e.end() || pol == e.end() || sig == e.end()) continue;
    if (!pcrs->is_array() || pcrs->size() != 1 || !(*pcrs)[0].is_number_unsigned() || (*pcrs)[0] != 11) continue;
    if (!pkfp->is_string() || !pol->is_string() || !sig->is_string()) continue;
    out.push_back(Entry{pkfp->get<std::string>(), pol->get<std::string>(), sig->get<std::string>()});
  }
  return out;
}

std::string Lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

}  // namespace

Pcr PredictSectionsPcr11(const std::vector<MeasuredSection>& sections) {
  Pcr pcr{};
  for (std::string_view name : kMeasuredSections) {
    for (const auto& s : sections) {
      if (s.name != name) continue;
      if (!s.data.empty()) {
        Extend(pcr, std::string(name) + '\0');
        Extend(pcr, s.data);
      }
      break;  // the stub finds one section by each name
    }
  }
  return pcr;
}

Pcr PredictPcr11(const UkiParts& parts) {
  return PredictSectionsPcr11({{".linux", parts.kernel},
                               {".osrel", parts.osrel},
                               {".cmdline", parts.cmdline},
                               {".initrd", parts.initrd},
                               {".pcrpkey", parts.pcrpkey}});
}

Result<Pcr> PredictUkiPcr11(const std::string& uki) {
  auto pe = ParsePe(uki, "the UKI");
  if (!pe) return Fail(pe.error());
  std::vector<MeasuredSection> sections;
  for (std::string_view name : kMeasuredSections) {
    const PeSection* s = FindSection(*pe, name);
    if (s == nullptr || s->virtual_size == 0) continue;
    if (s->virtual_size > s->raw_size)
      return Fail("the UKI's " + std::string(name) + " section is " + std::to_string(s->virtual_size) +
                  " bytes in memory but has " + std::to_string(s->raw_size) +
                  " in the file; sprout predicts PCR 11 only from bytes the file holds");
    // ParsePe checked that the raw data lies in the file.
    sections.push_back({name, std::string_view(uki).substr(s->raw_offset, s->virtual_size)});
  }
  return PredictSectionsPcr11(sections);
}

Pcr PcrPolicyDigest(const Pcr& pcr11) {
  Sha256 pcr_digest;  // TPM2_PolicyPCR's pcrDigest: the hash of the selected PCRs' values
  pcr_digest.Update(pcr11.data(), pcr11.size());
  const Pcr selected = pcr_digest.Digest();
  const Pcr start{};  // a trial session starts with a zero policy digest
  Sha256 h;
  h.Update(start.data(), start.size());
  h.Update(kPolicyPcrCommand.data(), kPolicyPcrCommand.size());
  h.Update(kPcr11Selection.data(), kPcr11Selection.size());
  h.Update(selected.data(), selected.size());
  return h.Digest();
}

Result<std::string> PcrPublicKeyPem(std::string_view private_key_pem) {
  auto key = ReadRsaPrivateKey(private_key_pem);
  if (!key) return Fail(key.error());
  std::string pem = PublicPem(key->get());
  if (pem.empty()) return Fail("cannot write the PCR policy's public key: " + OpenSslError());
  return pem;
}

Result<std::string> PcrKeyFingerprint(std::string_view public_key_pem) {
  auto key = ReadRsaPublicKey(public_key_pem);
  if (!key) return Fail(key.error());
  return Fingerprint(key->get());
}

Result<std::string> SignPcrPolicy(const Pcr& pcr11, std::string_view private_key_pem) {
  auto key = ReadRsaPrivateKey(private_key_pem);
  if (!key) return Fail(key.error());
  auto pkfp = Fingerprint(key->get());
  if (!pkfp) return Fail(pkfp.error());
  const Pcr pol = PcrPolicyDigest(pcr11);
  MdCtx ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  std::size_t size = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key->get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &size, pol.data(), pol.size()) != 1)
    return Fail("cannot sign the PCR policy: " + OpenSslError());
  std::string sig(size, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &size, pol.data(), pol.size()) != 1)
    return Fail("cannot sign the PCR policy: " + OpenSslError());
  sig.resize(size);
  nlohmann::ordered_json entry;
  entry["pcrs"] = {11};
  entry["pkfp"] = *pkfp;
  entry["pol"] = HexOf(pol);
  entry["sig"] = Base64Encode(sig);
  nlohmann::ordered_json out;
  out["sha256"] = nlohmann::ordered_json::array({entry});
  return out.dump();
}

Status AddPcrPolicy(UkiParts& parts, std::string_view private_key_pem) {
  auto pem = PcrPublicKeyPem(private_key_pem);
  if (!pem) return Fail(pem.error());
  parts.pcrpkey = std::move(*pem);
  parts.pcrsig.clear();
  auto sig = SignPcrPolicy(PredictPcr11(parts), private_key_pem);
  if (!sig) return Fail(sig.error());
  parts.pcrsig = std::move(*sig);
  return Ok{};
}

Result<PcrPolicyCheck> CheckPcrPolicy(const std::string& uki) {
  auto pe = ParsePe(uki, "the UKI");
  if (!pe) return Fail(pe.error());
  PcrPolicyCheck c;
  auto sigtext = UkiSection(uki, ".pcrsig");
  if (!sigtext) return c;  // no signed policy
  c.present = true;
  auto pcr11 = PredictUkiPcr11(uki);
  if (!pcr11) {
    c.problem = pcr11.error();
    return c;
  }
  c.pcr11 = HexOf(*pcr11);
  auto pkey_pem = UkiSection(uki, ".pcrpkey");
  if (!pkey_pem) {
    c.problem = "there is no .pcrpkey to check .pcrsig with";
    return c;
  }
  auto key = ReadRsaPublicKey(*pkey_pem);
  if (!key) {
    c.problem = ".pcrpkey: " + key.error();
    return c;
  }
  auto fp = Fingerprint(key->get());
  if (!fp) {
    c.problem = fp.error();
    return c;
  }
  c.key_fingerprint = *fp;
  auto entries = Pcr11Entries(*sigtext);
  if (!entries) {
    c.problem = entries.error();
    return c;
  }
  const std::string want = HexOf(PcrPolicyDigest(*pcr11));
  const Entry* chosen = nullptr;
  for (const auto& e : *entries) {
    if (Lower(e.pkfp) != c.key_fingerprint) continue;
    if (chosen == nullptr || Lower(e.pol) == want) chosen = &e;
    if (Lower(e.pol) == want) break;
  }
  if (chosen == nullptr) {
    c.problem = ".pcrsig has no sha256 entry for PCR 11 signed by .pcrpkey's key";
    return c;
  }
  c.signed_policy = Lower(chosen->pol);
  c.policy_matches = c.signed_policy == want;
  auto pol = Unhex(chosen->pol);
  auto sig = Base64Decode(chosen->sig);
  c.signature_verifies = pol && pol->size() == 32 && sig && VerifySignature(key->get(), *pol, *sig);
  if (!c.policy_matches)
    c.problem = "the signed policy " + c.signed_policy + " is not this file's PCR 11's (" + want + ")";
  else if (!c.signature_verifies)
    c.problem = "the signature does not verify with .pcrpkey";
  return c;
}

}  // namespace sprout::efi
