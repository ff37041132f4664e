#include "util/sign.h"

#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
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

// WritePair writes a new key's private half (mode 0600) and its public half or
// certificate (0644), each PEM written by its function into a memory buffer; neither
// file may exist, and a failure leaves neither.
template <typename WritePrivate, typename WritePublic>
Status WritePair(const std::filesystem::path& private_pem, const std::filesystem::path& public_pem,
                 WritePrivate write_private, WritePublic write_public) {
  Bio priv(BIO_new(BIO_s_mem()), BIO_free);
  Bio pub(BIO_new(BIO_s_mem()), BIO_free);
  if (!priv || !pub || write_private(priv.get()) != 1 || write_public(pub.get()) != 1) {
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

// WritePrivateKey writes key as PKCS#8 PEM, unencrypted.
int WritePrivateKey(BIO* bio, EVP_PKEY* key) {
  return PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
}

}  // namespace

Status GenerateEd25519(const std::filesystem::path& private_pem, const std::filesystem::path& public_pem) {
  Key key(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"), EVP_PKEY_free);
  if (!key) return Fail("cannot make an Ed25519 key: " + OpenSslError());
  return WritePair(
      private_pem, public_pem, [&](BIO* b) { return WritePrivateKey(b, key.get()); },
      [&](BIO* b) { return PEM_write_bio_PUBKEY(b, key.get()); });
}

Status GenerateSecureBootKey(const std::filesystem::path& private_pem, const std::filesystem::path& cert_pem,
                             const std::string& common_name) {
  Key key(EVP_RSA_gen(2048), EVP_PKEY_free);
  if (!key) return Fail("cannot make an RSA key: " + OpenSslError());
  std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), X509_free);
  std::unique_ptr<BIGNUM, decltype(&BN_free)> serial(BN_new(), BN_free);
  if (!cert || !serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return Fail("cannot make a certificate: " + OpenSslError());
  }
  constexpr long kThirtyYears = 30L * 365 * 24 * 3600;
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_set_version(cert.get(), 2) != 1 || X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), kThirtyYears) == nullptr ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(common_name.c_str()),
                                 -1, -1, 0) != 1 ||
      X509_set_issuer_name(cert.get(), name) != 1 || X509_set_pubkey(cert.get(), key.get()) != 1 ||
      X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) {
    return Fail("cannot make a certificate: " + OpenSslError());
  }
  return WritePair(
      private_pem, cert_pem, [&](BIO* b) { return WritePrivateKey(b, key.get()); },
      [&](BIO* b) { return PEM_write_bio_X509(b, cert.get()); });
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
