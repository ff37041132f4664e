#include "pki/pki.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <ctime>
#include <limits>
#include <memory>
#include <optional>

#include "pki/csr.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/text.h"

namespace sprout::pki {

namespace {

template <auto F>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    F(p);
  }
};
using PKey = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509_free>>;
using Bio = std::unique_ptr<BIO, Deleter<BIO_free>>;
using Ext = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION_free>>;
using Names = std::unique_ptr<GENERAL_NAMES, Deleter<GENERAL_NAMES_free>>;

// OpenSslError drains OpenSSL's error queue into one message.
std::string OpenSslError(const std::string& what) {
  std::string out = what;
  unsigned long e = 0;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += std::string(": ") + buf;
  }
  return out;
}

PKey NewKey() { return PKey(EVP_EC_gen("P-256")); }

std::string BioText(BIO* b) {
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

Result<std::string> PrivatePem(EVP_PKEY* key) {
  Bio b(BIO_new(BIO_s_mem()));
  if (!b || PEM_write_bio_PrivateKey(b.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Fail(OpenSslError("cannot encode a private key"));
  }
  return BioText(b.get());
}

Result<std::string> CertPem(X509* cert) {
  Bio b(BIO_new(BIO_s_mem()));
  if (!b || PEM_write_bio_X509(b.get(), cert) != 1) return Fail(OpenSslError("cannot encode a certificate"));
  return BioText(b.get());
}

Cert ReadCert(const std::string& pem) {
  Bio b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Cert(b ? PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr) : nullptr);
}

PKey ReadKey(const std::string& pem) {
  Bio b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return PKey(b ? PEM_read_bio_PrivateKey(b.get(), nullptr, nullptr, nullptr) : nullptr);
}

// AddExt adds one extension given in openssl's config syntax.
bool AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  Ext ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  return ext && X509_add_ext(cert, ext.get(), -1) == 1;
}

// NewCert fills version, a random 127-bit serial, validity and subject of a new cert.
Cert NewCert(const std::string& cn, const std::vector<std::string>& orgs, std::int64_t seconds, EVP_PKEY* key) {
  Cert cert(X509_new());
  if (!cert) return nullptr;
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return nullptr;
  serial[0] &= 0x7f;  // positive
  std::unique_ptr<BIGNUM, Deleter<BN_free>> bn(BN_bin2bn(serial, sizeof serial, nullptr));
  if (!bn || BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert.get())) == nullptr) return nullptr;
  X509_NAME* name = X509_get_subject_name(cert.get());
  for (const auto& o : orgs) {
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(o.c_str()), -1, -1, 0);
  }
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  const long backdate = static_cast<long>(std::min<std::int64_t>(300, seconds / 10));
  if (X509_set_version(cert.get(), 2) != 1 || X509_gmtime_adj(X509_getm_notBefore(cert.get()), -backdate) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(seconds)) == nullptr ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return nullptr;
  }
  return cert;
}

std::string Join(const std::vector<std::string>& v, const std::string& prefix) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + prefix + s;
  return out;
}

}  // namespace

namespace {

// SelfSignedCA makes a CA certificate for key.
Result<CertKey> SelfSignedCA(const std::string& common_name, EVP_PKEY* key, int days) {
  Cert cert = NewCert(common_name, {}, static_cast<std::int64_t>(days) * 86400, key);
  if (!cert || X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1 ||
      !AddExt(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE") ||
      !AddExt(cert.get(), cert.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment,keyCertSign") ||
      !AddExt(cert.get(), cert.get(), NID_subject_key_identifier, "hash") ||
      X509_sign(cert.get(), key, EVP_sha256()) == 0) {
    return Fail(OpenSslError("cannot make the CA " + common_name));
  }
  auto c = CertPem(cert.get());
  if (!c) return Fail(c.error());
  auto k = PrivatePem(key);
  if (!k) return Fail(k.error());
  return CertKey{*c, *k};
}

}  // namespace

Result<CertKey> MakeCA(const std::string& common_name, int days) {
  PKey key = NewKey();
  if (!key) return Fail(OpenSslError("cannot make a P-256 key"));
  return SelfSignedCA(common_name, key.get(), days);
}

Result<CertKey> MakeCAWithKey(const std::string& common_name, const std::string& key_pem, int days) {
  PKey key = ReadKey(key_pem);
  if (!key) return Fail(OpenSslError("the key for the CA " + common_name + " does not parse"));
  return SelfSignedCA(common_name, key.get(), days);
}

Result<KeyPair> MakeKeyPair() {
  PKey key = NewKey();
  if (!key) return Fail(OpenSslError("cannot make a P-256 key"));
  auto k = PrivatePem(key.get());
  if (!k) return Fail(k.error());
  Bio b(BIO_new(BIO_s_mem()));
  if (!b || PEM_write_bio_PUBKEY(b.get(), key.get()) != 1) return Fail(OpenSslError("cannot encode a public key"));
  return KeyPair{*k, BioText(b.get())};
}

namespace {

using Bn = std::unique_ptr<BIGNUM, Deleter<BN_clear_free>>;

// kPkiHkdfSalt separates DeriveKeyPair's HKDF from every other use of the same secret.
constexpr std::string_view kPkiHkdfSalt = "sprout pki v1";
// kDerivedKeyBytes is the HKDF output reduced to a scalar: 256 bits of the order plus 128.
constexpr std::size_t kDerivedKeyBytes = 48;

// Okm is kDerivedKeyBytes of HKDF-SHA256 of seed, kPkiHkdfSalt and label.
Result<std::string> Okm(std::string_view seed, std::string_view label) {
  std::unique_ptr<EVP_KDF, Deleter<EVP_KDF_free>> kdf(EVP_KDF_fetch(nullptr, "HKDF", nullptr));
  std::unique_ptr<EVP_KDF_CTX, Deleter<EVP_KDF_CTX_free>> ctx(kdf ? EVP_KDF_CTX_new(kdf.get()) : nullptr);
  if (!ctx) return Fail(OpenSslError("cannot set up HKDF"));
  // OSSL_PARAM wants non-const pointers although it only reads these buffers.
  std::string digest = "SHA256";
  std::string key(seed);
  std::string salt(kPkiHkdfSalt);
  std::string info(label);
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest.data(), 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, key.data(), key.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, salt.data(), salt.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info.data(), info.size()),
      OSSL_PARAM_construct_end(),
  };
  std::string out(kDerivedKeyBytes, '\0');
  const int rc = EVP_KDF_derive(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), out.size(), params);
  OPENSSL_cleanse(key.data(), key.size());
  if (rc != 1) return Fail(OpenSslError("HKDF-SHA256 failed"));
  return out;
}

}  // namespace

Result<KeyPair> DeriveKeyPair(std::string_view seed, std::string_view label) {
  if (seed.empty()) return Fail("cannot derive a key from an empty secret");
  auto okm = Okm(seed, label);
  if (!okm) return Fail(okm.error());
  std::unique_ptr<EC_GROUP, Deleter<EC_GROUP_free>> group(EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1));
  std::unique_ptr<BN_CTX, Deleter<BN_CTX_free>> bn_ctx(BN_CTX_new());
  Bn c(BN_bin2bn(reinterpret_cast<const unsigned char*>(okm->data()), static_cast<int>(okm->size()), nullptr));
  OPENSSL_cleanse(okm->data(), okm->size());
  Bn order_minus_one(group ? BN_dup(EC_GROUP_get0_order(group.get())) : nullptr);
  Bn d(BN_secure_new());
  if (!group || !bn_ctx || !c || !order_minus_one || !d || BN_sub_word(order_minus_one.get(), 1) != 1 ||
      BN_nnmod(d.get(), c.get(), order_minus_one.get(), bn_ctx.get()) != 1 || BN_add_word(d.get(), 1) != 1) {
    return Fail(OpenSslError("cannot reduce the derived key"));
  }
  // The public point d*G, uncompressed, as EVP_PKEY_fromdata wants it beside d.
  std::unique_ptr<EC_POINT, Deleter<EC_POINT_free>> point(EC_POINT_new(group.get()));
  if (!point || EC_POINT_mul(group.get(), point.get(), d.get(), nullptr, nullptr, bn_ctx.get()) != 1) {
    return Fail(OpenSslError("cannot compute the derived public key"));
  }
  unsigned char pub[65];
  const std::size_t pub_len =
      EC_POINT_point2oct(group.get(), point.get(), POINT_CONVERSION_UNCOMPRESSED, pub, sizeof pub, bn_ctx.get());
  std::unique_ptr<OSSL_PARAM_BLD, Deleter<OSSL_PARAM_BLD_free>> bld(OSSL_PARAM_BLD_new());
  if (pub_len != sizeof pub || !bld ||
      OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) != 1 ||
      OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_PRIV_KEY, d.get()) != 1 ||
      OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, pub, pub_len) != 1) {
    return Fail(OpenSslError("cannot describe the derived key"));
  }
  std::unique_ptr<OSSL_PARAM, Deleter<OSSL_PARAM_free>> params(OSSL_PARAM_BLD_to_param(bld.get()));
  std::unique_ptr<EVP_PKEY_CTX, Deleter<EVP_PKEY_CTX_free>> pctx(EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr));
  EVP_PKEY* raw = nullptr;
  if (!params || !pctx || EVP_PKEY_fromdata_init(pctx.get()) != 1 ||
      EVP_PKEY_fromdata(pctx.get(), &raw, EVP_PKEY_KEYPAIR, params.get()) != 1) {
    return Fail(OpenSslError("cannot build the derived key"));
  }
  PKey key(raw);
  auto k = PrivatePem(key.get());
  if (!k) return Fail(k.error());
  Bio b(BIO_new(BIO_s_mem()));
  if (!b || PEM_write_bio_PUBKEY(b.get(), key.get()) != 1) return Fail(OpenSslError("cannot encode a public key"));
  return KeyPair{*k, BioText(b.get())};
}

Result<std::string> SpkiSha256(std::string_view pem) {
  if (pem.size() > (1U << 20)) return Fail("not a certificate: more than 1 MiB");
  // Exactly one PEM block: whoever trusts the hash of the first certificate of a bundle
  // would also trust whatever follows it.
  std::size_t blocks = 0;
  for (std::size_t at = pem.find("-----BEGIN "); at != std::string_view::npos; at = pem.find("-----BEGIN ", at + 1)) {
    ++blocks;
  }
  if (blocks != 1) return Fail("not one certificate: " + std::to_string(blocks) + " PEM blocks");
  const std::string text(pem);
  // A certificate's own encoding of its key (kubeadm hashes RawSubjectPublicKeyInfo), or
  // a bare public key's.
  unsigned char* der = nullptr;
  int len = -1;
  Bio b(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  if (text.find("-----BEGIN CERTIFICATE-----") != std::string::npos) {
    Cert cert(b ? PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr) : nullptr);
    if (!cert) return Fail(OpenSslError("the certificate does not parse"));
    len = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(cert.get()), &der);
  } else {
    PKey key(b ? PEM_read_bio_PUBKEY(b.get(), nullptr, nullptr, nullptr) : nullptr);
    if (!key) return Fail(OpenSslError("neither a certificate nor a public key (PEM)"));
    len = i2d_PUBKEY(key.get(), &der);
  }
  // Nothing but line ends may follow the block.
  const std::string rest = BioText(b.get());
  if (!std::all_of(rest.begin(), rest.end(), [](char c) { return c == '\n' || c == '\r' || c == ' '; })) {
    OPENSSL_free(der);
    return Fail("not one certificate: text follows it");
  }
  if (len <= 0 || der == nullptr) return Fail(OpenSslError("cannot encode the public key"));
  Sha256 h;
  h.Update(der, static_cast<std::size_t>(len));
  OPENSSL_free(der);
  return "sha256:" + h.HexDigest();
}

bool ValidSpkiSha256(std::string_view hash) {
  constexpr std::string_view kPrefix = "sha256:";
  if (hash.size() != kPrefix.size() + 64 || !hash.starts_with(kPrefix)) return false;
  return std::all_of(hash.begin() + kPrefix.size(), hash.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

Result<std::string> ClusterCaCertHash(std::string_view cluster_secret) {
  auto key = DeriveKeyPair(cluster_secret, kKubernetesCaKeyLabel);
  if (!key) return Fail(key.error());
  OPENSSL_cleanse(key->private_pem.data(), key->private_pem.size());
  return SpkiSha256(key->public_pem);
}

namespace {

// KubernetesCA is the Kubernetes CA with the key derived from cluster_secret (random
// without one). Only this CA's key is derived: it is the one workers are handed and must
// check; the others never leave the control plane.
Result<CertKey> KubernetesCA(std::string_view cluster_secret) {
  if (cluster_secret.empty()) return MakeCA("kubernetes");
  auto key = DeriveKeyPair(cluster_secret, kKubernetesCaKeyLabel);
  if (!key) return Fail(key.error());
  auto ca = MakeCAWithKey("kubernetes", key->private_pem);
  OPENSSL_cleanse(key->private_pem.data(), key->private_pem.size());
  return ca;
}

}  // namespace

Result<ClusterCAs> MakeClusterCAs(std::string_view cluster_secret) {
  auto etcd = MakeCA("etcd-ca");
  if (!etcd) return Fail(etcd.error());
  auto kube = KubernetesCA(cluster_secret);
  if (!kube) return Fail(kube.error());
  auto proxy = MakeCA("front-proxy-ca");
  if (!proxy) return Fail(proxy.error());
  auto sa = MakeKeyPair();
  if (!sa) return Fail(sa.error());
  auto key = MakeEncryptionKey();
  if (!key) return Fail(key.error());
  return ClusterCAs{*etcd, *kube, *proxy, *sa, *key};
}

Result<std::string> RandomBytes(std::size_t n) {
  std::string raw(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(raw.size())) != 1) {
    return Fail(OpenSslError("no randomness"));
  }
  return raw;
}

Result<std::string> MakeEncryptionKey() {
  std::string raw(32, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(raw.size())) != 1) {
    return Fail(OpenSslError("no randomness for the encryption key"));
  }
  std::string key = Base64Encode(raw);
  OPENSSL_cleanse(raw.data(), raw.size());
  return key;
}

bool ValidEncryptionKey(const std::string& key) {
  auto raw = Base64Decode(key);
  const bool ok = raw && raw->size() == 32;
  if (raw) OPENSSL_cleanse(raw->data(), raw->size());
  return ok;
}

Result<CertKey> Issue(const CertKey& ca, const CertRequest& r) {
  Cert ca_cert = ReadCert(ca.cert_pem);
  PKey ca_key = ReadKey(ca.key_pem);
  if (!ca_cert || !ca_key) return Fail(OpenSslError("the CA for " + r.common_name + " does not parse"));
  if (X509_check_private_key(ca_cert.get(), ca_key.get()) != 1) {
    return Fail("the CA key does not match the CA certificate (" + r.common_name + ")");
  }
  PKey key = NewKey();
  if (!key) return Fail(OpenSslError("cannot make a P-256 key"));
  Cert cert = NewCert(r.common_name, r.organizations, r.validity_seconds, key.get());
  std::string eku;
  if (r.server) eku = "serverAuth";
  if (r.client) eku += std::string(eku.empty() ? "" : ",") + "clientAuth";
  std::string san = Join(r.dns_names, "DNS:");
  std::string ips = Join(r.ips, "IP:");
  if (!ips.empty()) san += (san.empty() ? "" : ",") + ips;
  bool ok = cert && X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get())) == 1 &&
            AddExt(cert.get(), ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE") &&
            AddExt(cert.get(), ca_cert.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment") &&
            AddExt(cert.get(), ca_cert.get(), NID_authority_key_identifier, "keyid:always") &&
            (eku.empty() || AddExt(cert.get(), ca_cert.get(), NID_ext_key_usage, eku)) &&
            (san.empty() || AddExt(cert.get(), ca_cert.get(), NID_subject_alt_name, san)) &&
            X509_sign(cert.get(), ca_key.get(), EVP_sha256()) != 0;
  if (!ok) return Fail(OpenSslError("cannot issue the certificate " + r.common_name));
  auto c = CertPem(cert.get());
  if (!c) return Fail(c.error());
  auto k = PrivatePem(key.get());
  if (!k) return Fail(k.error());
  return CertKey{*c, *k};
}

std::vector<std::pair<std::string, CertRequest>> EtcdNodeRequests(const NodeIdentity& node) {
  CertRequest serving;
  serving.validity_seconds = node.validity_seconds;
  serving.common_name = node.name;
  serving.dns_names = {node.name, "localhost"};
  serving.ips = node.ips;
  for (const char* loop : {"127.0.0.1", "::1"}) {
    if (std::find(serving.ips.begin(), serving.ips.end(), loop) == serving.ips.end()) serving.ips.emplace_back(loop);
  }
  serving.server = true;
  serving.client = true;
  CertRequest health;
  health.common_name = "kube-etcd-healthcheck-client";
  health.client = true;
  health.validity_seconds = node.validity_seconds;
  CertRequest apiserver;
  apiserver.common_name = "kube-apiserver-etcd-client";
  apiserver.client = true;
  apiserver.validity_seconds = node.validity_seconds;
  return {{"etcd/server", serving},
          {"etcd/peer", serving},
          {"etcd/healthcheck-client", health},
          {"apiserver-etcd-client", apiserver}};
}

namespace {

constexpr auto kKeyMode = std::filesystem::perms(0600);
constexpr auto kCertMode = std::filesystem::perms(0644);

void AddPair(std::vector<PkiFile>& out, const std::string& base, const CertKey& ck) {
  out.push_back({base + ".crt", ck.cert_pem, kCertMode});
  out.push_back({base + ".key", ck.key_pem, kKeyMode});
}

}  // namespace

std::vector<PkiFile> CAFiles(const ClusterCAs& cas) {
  std::vector<PkiFile> out;
  if (!cas.encryption_key.empty()) out.push_back({kEncryptionKeyFile, cas.encryption_key + "\n", kKeyMode});
  AddPair(out, "ca", cas.kubernetes_ca);
  AddPair(out, "etcd/ca", cas.etcd_ca);
  AddPair(out, "front-proxy-ca", cas.front_proxy_ca);
  out.push_back({"sa.key", cas.service_account.private_pem, kKeyMode});
  out.push_back({"sa.pub", cas.service_account.public_pem, kCertMode});
  return out;
}

Result<std::vector<PkiFile>> NodeFiles(const ClusterCAs& cas, const NodeIdentity& node) {
  return UpdateNodeFiles(cas, node, {}, 0);
}

Result<std::vector<PkiFile>> UpdateNodeFiles(const ClusterCAs& cas, const NodeIdentity& node,
                                             const std::map<std::string, std::string>& existing, std::int64_t now) {
  auto get = [&](const std::string& k) {
    auto it = existing.find(k);
    return it == existing.end() ? std::string() : it->second;
  };
  std::vector<PkiFile> out;
  for (const auto& [path, request] : EtcdNodeRequests(node)) {
    if (CanKeep(get(path + ".crt"), get(path + ".key"), cas.etcd_ca.cert_pem, request, now)) continue;
    auto ck = Issue(cas.etcd_ca, request);
    if (!ck) return Fail(ck.error());
    AddPair(out, path, *ck);
  }
  return out;
}

Result<ClusterCAs> LoadCAs(const std::filesystem::path& dir) {
  ClusterCAs out;
  struct Slot {
    const char* path;
    std::string* into;
  };
  const Slot slots[] = {{"ca.crt", &out.kubernetes_ca.cert_pem},
                        {"ca.key", &out.kubernetes_ca.key_pem},
                        {"etcd/ca.crt", &out.etcd_ca.cert_pem},
                        {"etcd/ca.key", &out.etcd_ca.key_pem},
                        {"front-proxy-ca.crt", &out.front_proxy_ca.cert_pem},
                        {"front-proxy-ca.key", &out.front_proxy_ca.key_pem},
                        {"sa.key", &out.service_account.private_pem},
                        {"sa.pub", &out.service_account.public_pem}};
  for (const auto& s : slots) {
    auto text = ReadFile(dir / s.path);
    if (!text) return Fail(text.error());
    *s.into = *text;
  }
  std::error_code ec;
  if (std::filesystem::exists(dir / kEncryptionKeyFile, ec)) {
    auto text = ReadFile(dir / kEncryptionKeyFile);
    if (!text) return Fail(text.error());
    std::string key = *text;
    while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
    if (!ValidEncryptionKey(key)) {
      return Fail((dir / kEncryptionKeyFile).string() +
                  " is not base64 of 32 bytes; restore it from a backup or another control-plane node (a new key "
                  "cannot read the Secrets the old one wrote)");
    }
    out.encryption_key = key;
  }
  // Named, because the fix is to restore that file (from a backup or another
  // control-plane node), never to make a new CA: the cluster trusts the old one.
  const std::pair<const char*, const CertKey*> pairs[] = {
      {"ca", &out.kubernetes_ca}, {"etcd/ca", &out.etcd_ca}, {"front-proxy-ca", &out.front_proxy_ca}};
  for (const auto& [base, ck] : pairs) {
    if (!KeyMatches(ck->cert_pem, ck->key_pem)) {
      return Fail((dir / (std::string(base) + ".key")).string() + " does not match " +
                  (dir / (std::string(base) + ".crt")).string());
    }
  }
  return out;
}

Status WritePkiFiles(const std::filesystem::path& dir, const std::vector<PkiFile>& files) {
  for (const auto& f : files) {
    auto path = dir / f.path;
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) return Fail("cannot create " + path.parent_path().string() + ": " + ec.message());
    if (auto s = WriteFileAtomic(path, f.content, f.mode); !s) return s;
  }
  return Ok{};
}

Status VerifyIssued(const std::string& ca_cert_pem, const std::string& cert_pem) {
  Cert ca = ReadCert(ca_cert_pem);
  Cert cert = ReadCert(cert_pem);
  if (!ca || !cert) return Fail(OpenSslError("a certificate does not parse"));
  std::unique_ptr<X509_STORE, Deleter<X509_STORE_free>> store(X509_STORE_new());
  std::unique_ptr<X509_STORE_CTX, Deleter<X509_STORE_CTX_free>> ctx(X509_STORE_CTX_new());
  if (!store || !ctx || X509_STORE_add_cert(store.get(), ca.get()) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), nullptr) != 1) {
    return Fail(OpenSslError("cannot set up verification"));
  }
  if (X509_verify_cert(ctx.get()) != 1) {
    return Fail(std::string("certificate does not verify: ") +
                X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get())));
  }
  return Ok{};
}

Result<std::vector<std::string>> CertNames(const std::string& cert_pem) {
  Cert cert = ReadCert(cert_pem);
  if (!cert) return Fail(OpenSslError("the certificate does not parse"));
  std::vector<std::string> out;
  Names names(static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr)));
  if (!names) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names.get(), i);
    if (n->type == GEN_DNS) {
      const auto* s = n->d.dNSName;
      out.push_back("DNS:" + std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                         static_cast<std::size_t>(ASN1_STRING_length(s))));
    } else if (n->type == GEN_IPADD) {
      const auto* s = n->d.iPAddress;
      std::string ip;
      const unsigned char* d = ASN1_STRING_get0_data(s);
      int len = ASN1_STRING_length(s);
      char buf[INET6_ADDRSTRLEN] = {};
      if ((len == 4 && ::inet_ntop(AF_INET, d, buf, sizeof buf) != nullptr) ||
          (len == 16 && ::inet_ntop(AF_INET6, d, buf, sizeof buf) != nullptr)) {
        ip = buf;
      }
      out.push_back("IP:" + ip);
    }
  }
  return out;
}

Result<Subject> CertSubject(const std::string& cert_pem) {
  Cert cert = ReadCert(cert_pem);
  if (!cert) return Fail(OpenSslError("the certificate does not parse"));
  Subject out;
  const X509_NAME* name = X509_get_subject_name(cert.get());
  for (int i = 0; i < X509_NAME_entry_count(name); ++i) {
    const X509_NAME_ENTRY* e = X509_NAME_get_entry(name, i);
    const int nid = OBJ_obj2nid(X509_NAME_ENTRY_get_object(e));
    const ASN1_STRING* d = X509_NAME_ENTRY_get_data(e);
    std::string text(reinterpret_cast<const char*>(ASN1_STRING_get0_data(d)),
                     static_cast<std::size_t>(ASN1_STRING_length(d)));
    if (nid == NID_commonName) out.common_name = text;
    if (nid == NID_organizationName) out.organizations.push_back(text);
  }
  return out;
}

bool KeyMatches(const std::string& cert_pem, const std::string& key_pem) {
  Cert cert = ReadCert(cert_pem);
  PKey key = ReadKey(key_pem);
  ERR_clear_error();
  return cert && key && X509_check_private_key(cert.get(), key.get()) == 1;
}

namespace {

// Seconds renders an ASN1 time as seconds since the epoch; nullopt when it does not parse.
std::optional<std::int64_t> Seconds(const ASN1_TIME* t) {
  std::tm tm{};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return std::nullopt;
  return static_cast<std::int64_t>(timegm(&tm));
}

}  // namespace

Result<Validity> CertValidity(const std::string& cert_pem) {
  Cert cert = ReadCert(cert_pem);
  if (!cert) return Fail(OpenSslError("the certificate does not parse"));
  auto from = Seconds(X509_get0_notBefore(cert.get()));
  auto until = Seconds(X509_get0_notAfter(cert.get()));
  if (!from || !until) return Fail("the certificate's validity does not parse");
  return Validity{*from, *until};
}

std::int64_t RenewalTime(const Validity& v) { return v.not_before + (v.not_after - v.not_before) / 3 * 2; }

bool CanKeep(const std::string& cert_pem, const std::string& key_pem, const std::string& ca_cert_pem,
             const CertRequest& request, std::int64_t now) {
  if (cert_pem.empty() || key_pem.empty() || !VerifyIssued(ca_cert_pem, cert_pem) || !KeyMatches(cert_pem, key_pem)) {
    return false;
  }
  auto validity = CertValidity(cert_pem);
  if (!validity || now >= RenewalTime(*validity)) return false;
  // A lifetime longer than the request's (with its backdating, and a second of slack) is
  // renewed too, so a shorter certificates.validity takes effect at the next check.
  const std::int64_t backdate = std::min<std::int64_t>(300, request.validity_seconds / 10);
  if (validity->not_after - validity->not_before > request.validity_seconds + backdate + 1) return false;
  auto subject = CertSubject(cert_pem);
  auto names = CertNames(cert_pem);
  if (!subject || !names || subject->common_name != request.common_name ||
      subject->organizations != request.organizations) {
    return false;
  }
  std::vector<std::string> want;
  for (const auto& d : request.dns_names) want.push_back("DNS:" + d);
  for (const auto& ip : request.ips) want.push_back("IP:" + ip);
  std::sort(want.begin(), want.end());
  std::sort(names->begin(), names->end());
  return *names == want;
}

namespace {

void FreeExtensions(STACK_OF(X509_EXTENSION) * s) { sk_X509_EXTENSION_pop_free(s, X509_EXTENSION_free); }

std::string AsnText(const ASN1_STRING* s) {
  return {reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)), static_cast<std::size_t>(ASN1_STRING_length(s))};
}

}  // namespace

Result<CsrInfo> ParseCsr(const std::string& pem) {
  ERR_clear_error();
  if (pem.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) return Fail("the request is too large");
  std::unique_ptr<BIO, Deleter<BIO_free>> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return Fail(OpenSslError("cannot read the request"));
  std::unique_ptr<X509_REQ, Deleter<X509_REQ_free>> req(PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr));
  if (!req) return Fail(OpenSslError("the certificate signing request does not parse"));
  CsrInfo out;
  const X509_NAME* name = X509_REQ_get_subject_name(req.get());
  for (int i = 0; name != nullptr && i < X509_NAME_entry_count(name); ++i) {
    const X509_NAME_ENTRY* e = X509_NAME_get_entry(name, i);
    const int nid = OBJ_obj2nid(X509_NAME_ENTRY_get_object(e));
    const std::string text = AsnText(X509_NAME_ENTRY_get_data(e));
    if (nid == NID_commonName) {
      out.common_name = text;
      ++out.common_names;
    }
    if (nid == NID_organizationName) out.organizations.push_back(text);
  }
  std::unique_ptr<STACK_OF(X509_EXTENSION), Deleter<FreeExtensions>> exts(X509_REQ_get_extensions(req.get()));
  if (exts) {
    std::unique_ptr<GENERAL_NAMES, Deleter<GENERAL_NAMES_free>> names(
        static_cast<GENERAL_NAMES*>(X509V3_get_d2i(exts.get(), NID_subject_alt_name, nullptr, nullptr)));
    for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
      const GENERAL_NAME* n = sk_GENERAL_NAME_value(names.get(), i);
      if (n->type == GEN_DNS) {
        out.dns_names.push_back(AsnText(n->d.dNSName));
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
  if (key == nullptr) return Fail(OpenSslError("the certificate signing request has no public key"));
  unsigned char* der = nullptr;
  const int len = i2d_PUBKEY(key, &der);
  if (len <= 0) return Fail(OpenSslError("the request's public key cannot be encoded"));
  out.key_sha256 =
      "sha256:" + Sha256Hex(std::string_view(reinterpret_cast<const char*>(der), static_cast<std::size_t>(len)));
  OPENSSL_free(der);
  out.signature_ok = X509_REQ_verify(req.get(), key) == 1;
  ERR_clear_error();
  return out;
}

}  // namespace sprout::pki
