// The OpenSSL pieces lib/efi's signers share (authenticode.cc, pcr_policy.cc): owning
// pointers, the error queue as text, and reading an unencrypted PEM private key.
// Internal to lib/efi; nothing outside it includes this.
#pragma once

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <memory>
#include <string>
#include <string_view>

namespace sprout::efi::ossl {

using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;
using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

// ErrorText takes the oldest error off OpenSSL's queue and clears the rest.
inline std::string ErrorText() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

inline const unsigned char* Bytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

// ReadPrivateKey reads a PEM private key; null when it is not one, or is encrypted (an
// empty passphrase callback refuses instead of prompting).
inline Key ReadPrivateKey(std::string_view pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  auto no_passphrase = [](char*, int, int, void*) { return 0; };
  return {bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr) : nullptr, EVP_PKEY_free};
}

}  // namespace sprout::efi::ossl
