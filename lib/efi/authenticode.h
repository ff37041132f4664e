// Authenticode signatures of PE images, as UEFI Secure Boot checks them: the image's
// Authenticode SHA-256 digest in a PKCS#7 SignedData (SpcIndirectDataContent), appended
// as a WIN_CERTIFICATE in the certificate table.
//
// Deterministic: the signed attributes are the content type, the message digest and an
// empty SpcSpOpusInfo, with no signing time, and RSA PKCS#1 v1.5 signatures depend only
// on the key and the data; so one image signed twice with one key gives the same bytes
// (a reproducible build stays bit-identical for a given key).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace sprout::efi {

// AuthenticodeDigest is the SHA-256 Authenticode digest of an image: every byte of the
// headers except the CheckSum field and the certificate table's directory entry, then
// the sections in file order, then whatever follows them except the certificate table.
Result<std::array<std::uint8_t, 32>> AuthenticodeDigest(std::string_view image, const std::string& what);

// SignPe signs an unsigned image with a PEM private key (RSA) and its PEM certificate,
// and returns the signed image: the certificate table appended (8-byte aligned) with one
// WIN_CERTIFICATE (revision 0x0200, type PKCS_SIGNED_DATA), its directory entry set, and
// the CheckSum recomputed. Fails, naming what, on a signed image, a key that does not
// match the certificate, or a key that is not RSA.
Result<std::string> SignPe(std::string_view image, std::string_view key_pem, std::string_view cert_pem,
                           const std::string& what);

// CheckSigningPair checks that key_pem is an unencrypted RSA private key and cert_pem
// its X.509 certificate, as SignPe needs them, and returns the certificate's subject;
// what names the pair in the error. A build checks this before its long steps.
Result<std::string> CheckSigningPair(std::string_view key_pem, std::string_view cert_pem, const std::string& what);

// PeSignature is what an image's signature says, as `sprout inspect` shows it.
struct PeSignature {
  bool signed_ = false;
  std::string subject;          // the signer's certificate subject, one line ("CN=...")
  std::string issuer;           // its issuer
  std::string cert_sha256;      // SHA-256 of the signer's certificate (DER), hex
  bool digest_matches = false;  // the signed digest is the image's Authenticode digest
};

// ReadPeSignature reads an image's signature (signed_ false when it has none) and checks
// the signed digest against the image. It does not check the chain: that is the
// firmware's db.
Result<PeSignature> ReadPeSignature(std::string_view image, const std::string& what);

// VerifyPeSignature checks that the image is signed by cert_pem's key over its current
// bytes (the PKCS#7 signature and the digest), as the firmware does with cert_pem in db.
Status VerifyPeSignature(std::string_view image, std::string_view cert_pem, const std::string& what);

}  // namespace sprout::efi
