#include "pki/csr.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <limits>
#include <memory>

#include "util/sha256.h"

namespace sprout::pki {

namespace {

template <auto F>
struct Free {
  template <typename T>
  void operator()(T* p) const {
    F(p);
  }
};

std::string Drain(const std::string& what) {
  std::string out = what;
  unsigned long e = 0;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += std::string(": ") + buf;
  }
  return out;
}

void FreeExtensions(STACK_OF(X509_EXTENSION) * s) { sk_X509_EXTENSION_pop_free(s, X509_EXTENSION_free); }

std::string Text(const ASN1_STRING* s) {
  return {reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)), static_cast<std::size_t>(ASN1_STRING_length(s))};
}

}  // namespace

Result<CsrInfo> ParseCsr(const std::string& pem) {
  ERR_clear_error();
  if (pem.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) return Fail("the request is too large");
  std::unique_ptr<BIO, Free<BIO_free>> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return Fail(Drain("cannot read the request"));
  std::unique_ptr<X509_REQ, Free<X509_REQ_free>> req(PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr));
  if (!req) return Fail(Drain("the certificate signing request does not parse"));
  CsrInfo out;
  const X509_NAME* name = X509_REQ_get_subject_name(req.get());
  for (int i = 0; name != nullptr && i < X509_NAME_entry_count(name); ++i) {
    const X509_NAME_ENTRY* e = X509_NAME_get_entry(name, i);
    const int nid = OBJ_obj2nid(X509_NAME_ENTRY_get_object(e));
    const std::string text = Text(X509_NAME_ENTRY_get_data(e));
    if (nid == NID_commonName) {
      out.common_name = text;
      ++out.common_names;
    }
    if (nid == NID_organizationName) out.organizations.push_back(text);
  }
  std::unique_ptr<STACK_OF(X509_EXTENSION), Free<FreeExtensions>> exts(X509_REQ_get_extensions(req.get()));
  if (exts) {
    std::unique_ptr<GENERAL_NAMES, Free<GENERAL_NAMES_free>> names(
        static_cast<GENERAL_NAMES*>(X509V3_get_d2i(exts.get(), NID_subject_alt_name, nullptr, nullptr)));
    for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
      const GENERAL_NAME* n = sk_GENERAL_NAME_value(names.get(), i);
      if (n->type == GEN_DNS) {
        out.dns_names.push_back(Text(n->d.dNSName));
      } else if (n->type == GEN_IPADD) {
        const unsigned char* d = ASN1_STRING_get0_data(n->d.iPAddress);
        const int len = ASN1_STRING_length(n->d.iPAddress);
        char buf[INET6_ADDRSTRLEN] = {};
        if ((len == 4 && ::inet_ntop(AF_INET, d, buf, sizeof buf) != nullptr) ||
            (len == 16 && ::inet_ntop(AF_INET6, d, buf, sizeof buf) != nullptr)) {
          out.ips.emplace_back(buf);
        } else {
          ++out.other_names;  // an address of neither length names nothing
        }
      } else {
        ++out.other_names;
      }
    }
  }
  EVP_PKEY* key = X509_REQ_get0_pubkey(req.get());
  if (key == nullptr) return Fail(Drain("the certificate signing request has no public key"));
  unsigned char* der = nullptr;
  const int len = i2d_PUBKEY(key, &der);
  if (len <= 0) return Fail(Drain("the request's public key cannot be encoded"));
  out.key_sha256 =
      "sha256:" + Sha256Hex(std::string_view(reinterpret_cast<const char*>(der), static_cast<std::size_t>(len)));
  OPENSSL_free(der);
  out.signature_ok = X509_REQ_verify(req.get(), key) == 1;
  ERR_clear_error();
  return out;
}

}  // namespace sprout::pki
