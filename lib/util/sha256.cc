#include "util/sha256.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

#include <fstream>
#include <memory>
#include <vector>

#include "util/text.h"

namespace sprout {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr); }

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256::Update(const void* data, std::size_t size) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, size);
}

std::array<std::uint8_t, 32> Sha256::Digest() {
  std::array<std::uint8_t, 32> out{};
  unsigned int len = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), out.data(), &len);
  return out;
}

std::string Sha256::HexDigest() {
  auto d = Digest();
  return Hex(d.data(), d.size());
}

std::string Sha256Hex(std::string_view data) {
  Sha256 h;
  h.Update(data);
  return h.HexDigest();
}

Result<std::string> Sha256File(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail("cannot open " + path.string() + " to hash it");
  Sha256 h;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.Update(buf.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) return Fail("read error while hashing " + path.string());
  return h.HexDigest();
}

Result<std::array<std::uint8_t, 32>> HkdfSha256(std::string_view key, std::string_view salt, std::string_view info) {
  std::unique_ptr<EVP_KDF, decltype(&EVP_KDF_free)> kdf(EVP_KDF_fetch(nullptr, "HKDF", nullptr), EVP_KDF_free);
  if (!kdf) return Fail("OpenSSL has no HKDF implementation");
  std::unique_ptr<EVP_KDF_CTX, decltype(&EVP_KDF_CTX_free)> ctx(EVP_KDF_CTX_new(kdf.get()), EVP_KDF_CTX_free);
  if (!ctx) return Fail("cannot create an HKDF context");
  // OSSL_PARAM wants non-const pointers although it only reads these buffers.
  std::string digest = "SHA256";
  std::string key_bytes(key);
  std::string salt_bytes(salt);
  std::string info_bytes(info);
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest.data(), 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, key_bytes.data(), key_bytes.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, salt_bytes.data(), salt_bytes.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info_bytes.data(), info_bytes.size()),
      OSSL_PARAM_construct_end(),
  };
  std::array<std::uint8_t, 32> out{};
  int rc = EVP_KDF_derive(ctx.get(), out.data(), out.size(), params);
  OPENSSL_cleanse(key_bytes.data(), key_bytes.size());
  if (rc != 1) return Fail("HKDF-SHA256 key derivation failed");
  return out;
}

}  // namespace sprout
