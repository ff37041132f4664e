#include "util/sign.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace sprout {

namespace {

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

Result<std::string> BioText(const Bio& bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  if (n < 0 || data == nullptr) return Fail("cannot read a PEM buffer: " + OpenSslError());
  return std::string(data, static_cast<std::size_t>(n));
}

// WriteNew creates path (never replacing a file) with mode and writes text into it.
Status WriteNew(const std::filesystem::path& path, const std::string& text, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    return Fail("cannot create " + path.string() + ": " + std::strerror(errno) +
                (errno == EEXIST ? "; remove it or choose another prefix" : ""));
  }
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return Fail("cannot write " + path.string() + ": " + std::strerror(err));
    }
    done += static_cast<std::size_t>(n);
  }
  // fchmod: the umask may have taken bits away that a public key should have.
  if (::fchmod(fd, mode) != 0 || ::close(fd) != 0) return Fail("cannot finish " + path.string());
  return Ok{};
}

}  // namespace

Status GenerateEd25519(const std::filesystem::path& private_pem, const std::filesystem::path& public_pem) {
  Key key(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"), EVP_PKEY_free);
  if (!key) return Fail("cannot make an Ed25519 key: " + OpenSslError());
  Bio priv(BIO_new(BIO_s_mem()), BIO_free);
  Bio pub(BIO_new(BIO_s_mem()), BIO_free);
  if (!priv || !pub || PEM_write_bio_PrivateKey(priv.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1 ||
      PEM_write_bio_PUBKEY(pub.get(), key.get()) != 1) {
    return Fail("cannot write the key as PEM: " + OpenSslError());
  }
  auto priv_text = BioText(priv);
  if (!priv_text) return Fail(priv_text.error());
  auto pub_text = BioText(pub);
  if (!pub_text) return Fail(pub_text.error());
  if (auto s = WriteNew(private_pem, *priv_text, 0600); !s) return s;
  if (auto s = WriteNew(public_pem, *pub_text, 0644); !s) {
    ::unlink(private_pem.c_str());
    return s;
  }
  return Ok{};
}

Result<std::string> SignEd25519(std::string_view private_pem, std::string_view message) {
  Bio bio(BIO_new_mem_buf(private_pem.data(), static_cast<int>(private_pem.size())), BIO_free);
  Key key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr, EVP_PKEY_free);
  if (!key) return Fail("not a PEM private key: " + OpenSslError());
  if (EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_ED25519) {
    return Fail("the key is not Ed25519; make one with `sprout keygen -o PREFIX`");
  }
  MdCtx ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  std::string sig(64, '\0');
  std::size_t len = sig.size();
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1) {
    return Fail("cannot sign: " + OpenSslError());
  }
  sig.resize(len);
  return sig;
}

Result<std::string> PublicKeyOf(std::string_view private_pem) {
  Bio bio(BIO_new_mem_buf(private_pem.data(), static_cast<int>(private_pem.size())), BIO_free);
  Key key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr, EVP_PKEY_free);
  if (!key) return Fail("not a PEM private key: " + OpenSslError());
  if (EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_ED25519) {
    return Fail("the key is not Ed25519; make one with `sprout keygen -o PREFIX`");
  }
  Bio pub(BIO_new(BIO_s_mem()), BIO_free);
  if (!pub || PEM_write_bio_PUBKEY(pub.get(), key.get()) != 1)
    return Fail("cannot write the public key: " + OpenSslError());
  return BioText(pub);
}

Status VerifyEd25519(std::string_view public_pem, std::string_view message, std::string_view signature) {
  Bio bio(BIO_new_mem_buf(public_pem.data(), static_cast<int>(public_pem.size())), BIO_free);
  Key key(bio ? PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr) : nullptr, EVP_PKEY_free);
  if (!key) return Fail("not a PEM public key: " + OpenSslError());
  if (EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_ED25519) return Fail("the public key is not Ed25519");
  MdCtx ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) {
    return Fail("cannot start verifying: " + OpenSslError());
  }
  int ok = EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                            reinterpret_cast<const unsigned char*>(message.data()), message.size());
  ERR_clear_error();
  if (ok != 1) return Fail("the signature does not match (wrong key, or the signed file changed)");
  return Ok{};
}

}  // namespace sprout
