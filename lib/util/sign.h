// Ed25519 signatures with OpenSSL: key pairs as PEM files, detached raw signatures
// (64 bytes) over whole files, the form `openssl pkeyutl -rawin` also reads. And the
// RSA key and self-signed certificate that UEFI Secure Boot's db takes.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "util/result.h"

namespace sprout {

// GenerateEd25519 writes a new key pair: the private key as PKCS#8 PEM with mode 0600
// and the public key as SubjectPublicKeyInfo PEM. Neither file may exist already.
Status GenerateEd25519(const std::filesystem::path& private_pem, const std::filesystem::path& public_pem);

// SignEd25519 signs message with the private key in PEM form.
Result<std::string> SignEd25519(std::string_view private_pem, std::string_view message);

// PublicKeyOf is the public key (SubjectPublicKeyInfo PEM, as GenerateEd25519 writes
// it) of an Ed25519 private key in PEM form.
Result<std::string> PublicKeyOf(std::string_view private_pem);

// VerifyEd25519 checks signature over message with the public key in PEM form; a
// mismatch is an error that says so.
Status VerifyEd25519(std::string_view public_pem, std::string_view message, std::string_view signature);

// GenerateSecureBootKey writes a new RSA 2048 private key (PKCS#8 PEM, mode 0600) and a
// self-signed X.509 certificate for it (PEM, CN=common_name, SHA-256, valid from now for
// 30 years: firmware does not check the dates), the pair `sprout uki --key --cert` signs
// with and the firmware's db enrolls. Neither file may exist already.
Status GenerateSecureBootKey(const std::filesystem::path& private_pem, const std::filesystem::path& cert_pem,
                             const std::string& common_name);

}  // namespace sprout
