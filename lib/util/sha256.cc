#include "util/sha256.h"

#include <openssl/evp.h>

#include <fstream>
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

}  // namespace sprout
