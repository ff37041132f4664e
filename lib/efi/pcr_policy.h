// The signed PCR policy of a unified kernel image, as systemd 252 defines it: the UKI
// carries .pcrpkey (a public key, PEM) and .pcrsig (JSON: that key's signature of the
// TPM2 policy "PCR 11 has the value the stub will measure for this UKI"). systemd's stub
// hands both to the initrd (/.extra/tpm2-pcr-public-key.pem, tpm2-pcr-signature.json),
// and a LUKS2 key sealed to the public key, not to one PCR value, unlocks under every UKI
// that key signed. `systemd-measure sign` computes the same, but only with a TPM at hand.
//
// Pure: bytes in, bytes out. RSA PKCS#1 v1.5 signatures depend only on the key and the
// data, so the same UKI parts and key give the same .pcrsig.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "efi/uki.h"
#include "util/result.h"

namespace sprout::efi {

using Pcr = std::array<std::uint8_t, 32>;  // a SHA-256 PCR value or digest

// MeasuredSection is one UKI section as the stub sees it: its name and its VirtualSize
// bytes.
struct MeasuredSection {
  std::string_view name;
  std::string_view data;
};

// PredictSectionsPcr11 is the sha256 bank's PCR 11 after systemd's stub measured
// sections, with no boot phase extended (`systemd-measure --phase=`; what an
// initramfs-tools initrd sees): from 32 zero bytes, for each section present and
// non-empty in the stub's order .linux, .osrel, .cmdline, .initrd, .splash, .dtb,
// .pcrpkey (whatever their order in sections or in the file), extend with sha256 of the
// name and its NUL, then with sha256 of the data. Other names, .pcrsig among them, are
// not measured.
Pcr PredictSectionsPcr11(const std::vector<MeasuredSection>& sections);

// PredictPcr11 is the PCR 11 of the UKI that BuildUki makes of parts.
Pcr PredictPcr11(const UkiParts& parts);

// PredictUkiPcr11 reads a UKI's sections and predicts its PCR 11. Fails on a file that is
// not a PE image, or whose measured section has a VirtualSize past its raw data (the
// zeros the loader would add are not in the file; sprout's UKIs and objcopy's have none).
Result<Pcr> PredictUkiPcr11(const std::string& uki);

// PcrPolicyDigest is the TPM2 policy digest of TPM2_PolicyPCR for PCR 11 (sha256 bank)
// holding pcr11: sha256(32 zero bytes || TPM_CC_PolicyPCR || TPML_PCR_SELECTION ||
// sha256(pcr11)), all big-endian.
Pcr PcrPolicyDigest(const Pcr& pcr11);

// PcrPublicKeyPem is the public half of an unencrypted RSA private key (PEM) as the SPKI
// PEM ("BEGIN PUBLIC KEY") that goes into .pcrpkey.
Result<std::string> PcrPublicKeyPem(std::string_view private_key_pem);

// PcrKeyFingerprint is systemd's "pkfp" of an RSA public key (SPKI PEM): hex sha256 of
// its PKCS#1 RSAPublicKey DER (not of the SPKI DER).
Result<std::string> PcrKeyFingerprint(std::string_view public_key_pem);

// SignPcrPolicy is the .pcrsig JSON for pcr11 signed with an unencrypted RSA private key
// (PEM): {"sha256":[{"pcrs":[11],"pkfp":HEX,"pol":HEX,"sig":BASE64}]}, sig being the RSA
// PKCS#1 v1.5 SHA-256 signature of the 32-byte policy digest.
Result<std::string> SignPcrPolicy(const Pcr& pcr11, std::string_view private_key_pem);

// AddPcrPolicy sets parts.pcrpkey to the key's public half and parts.pcrsig to its
// signature of the PCR 11 that the UKI of parts (with that .pcrpkey) measures.
Status AddPcrPolicy(UkiParts& parts, std::string_view private_key_pem);

// PcrPolicyCheck is what a UKI's signed PCR policy says, as `sprout inspect` shows it.
struct PcrPolicyCheck {
  bool present = false;             // the UKI has a .pcrsig section
  std::string pcr11;                // hex: the PCR 11 predicted from the UKI's own sections
  std::string key_fingerprint;      // hex pkfp of .pcrpkey; "" if there is none
  std::string signed_policy;        // hex "pol" of the entry checked (the one for this key)
  bool policy_matches = false;      // that policy is the predicted PCR 11's
  bool signature_verifies = false;  // its signature verifies with .pcrpkey
  std::string problem;              // why the check failed, "" when it passed
  bool ok() const { return present && policy_matches && signature_verifies; }
};

// CheckPcrPolicy reads a UKI's .pcrsig and .pcrpkey and checks them against its own
// sections. A .pcrsig that is not systemd's JSON, or has no sha256 entry for PCR 11 and
// .pcrpkey, or a missing .pcrpkey, is a failed check with the reason in problem; only a
// file that is not a PE image is an error.
Result<PcrPolicyCheck> CheckPcrPolicy(const std::string& uki);

}  // namespace sprout::efi
