// The cluster PKI: the founder's CAs (etcd, Kubernetes, front proxy), the
// service-account key pair, and each node's etcd certificates, in kubeadm's file
// layout. Keys are ECDSA P-256. Everything here works on PEM strings in plain structs;
// WritePkiFiles is the one function that touches the disk. See docs/formation.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace sprout::pki {

// CertKey is a certificate and its private key, both PEM.
struct CertKey {
  std::string cert_pem;  // X.509 certificate
  std::string key_pem;   // PKCS#8 private key
};

// KeyPair is a bare key pair (the service-account signing key), both PEM.
struct KeyPair {
  std::string private_pem;  // PKCS#8 private key
  std::string public_pem;   // SubjectPublicKeyInfo
};

// ClusterCAs is what the founder makes once and control-plane joiners receive.
struct ClusterCAs {
  CertKey etcd_ca;          // signs etcd server, peer and client certificates
  CertKey kubernetes_ca;    // signs the Kubernetes component certificates
  CertKey front_proxy_ca;   // signs the front-proxy client certificate
  KeyPair service_account;  // signs service-account tokens
  // The key the apiservers encrypt Secrets in etcd with (aescbc): 32 random bytes,
  // base64. Empty only in a cluster founded before sprout made one (its Secrets stay
  // in the clear; docs/control-plane.md).
  std::string encryption_key;
};

// kEncryptionKeyFile is the encryption key's file in the PKI layout (0600).
inline constexpr const char* kEncryptionKeyFile = "encryption.key";

// RandomBytes is n bytes from OpenSSL's random generator (for a new cluster secret).
Result<std::string> RandomBytes(std::size_t n);

// MakeEncryptionKey makes a fresh encryption key: 32 random bytes, base64.
Result<std::string> MakeEncryptionKey();
// ValidEncryptionKey is true when key is base64 of exactly 32 bytes.
bool ValidEncryptionKey(const std::string& key);

// kDefaultLeafValiditySeconds is a leaf certificate's lifetime unless the profile's
// certificates.validity says otherwise: one year, as kubeadm's.
inline constexpr std::int64_t kDefaultLeafValiditySeconds = 365LL * 86400;

// CertRequest is one leaf certificate to issue.
struct CertRequest {
  std::string common_name;                 // subject CN
  std::vector<std::string> organizations;  // subject O entries
  std::vector<std::string> dns_names;      // DNS SANs
  std::vector<std::string> ips;            // IP SANs (IPv4 or IPv6 text)
  bool server = false;                     // extendedKeyUsage serverAuth
  bool client = false;                     // extendedKeyUsage clientAuth
  // Lifetime from now. notBefore is set a tenth of it (at most 5 minutes) in the past,
  // for clocks a little behind the issuer's.
  std::int64_t validity_seconds = kDefaultLeafValiditySeconds;
};

// PkiFile is one file of the layout: path relative to the PKI dir, content, mode.
struct PkiFile {
  std::string path;             // "etcd/ca.crt"
  std::string content;          // PEM
  std::filesystem::perms mode;  // 0600 for keys, 0644 otherwise
};

// MakeCA makes a self-signed CA certificate valid for days, with a fresh key.
Result<CertKey> MakeCA(const std::string& common_name, int days = 3650);
// MakeCAWithKey makes a self-signed CA certificate valid for days for the private key
// key_pem (PKCS#8 PEM); everything but the key is as MakeCA's (a random serial).
Result<CertKey> MakeCAWithKey(const std::string& common_name, const std::string& key_pem, int days = 3650);
// MakeKeyPair makes a fresh key pair.
Result<KeyPair> MakeKeyPair();
// MakeClusterCAs makes all CAs, the service-account key pair and the encryption key
// (the founder, once). The Kubernetes CA's key is DeriveKeyPair(cluster_secret,
// kKubernetesCaKeyLabel), so whoever holds the cluster secret knows the CA's hash before
// the cluster exists (ClusterCaCertHash: what a worker pins); every other key is random.
// An empty cluster_secret makes every key random (tests).
Result<ClusterCAs> MakeClusterCAs(std::string_view cluster_secret = {});

// kKubernetesCaKeyLabel is the HKDF label of the Kubernetes CA's key. Changing it changes
// every new cluster's CA hash, and a worker pinned to the old one refuses the new cluster:
// it is versioned, never edited.
inline constexpr std::string_view kKubernetesCaKeyLabel = "sprout kubernetes ca key v1";

// DeriveKeyPair is the P-256 key pair of seed and label, the same on every machine: the
// private scalar is OKM mod (n - 1) + 1, where OKM is 48 bytes of HKDF-SHA256 (key seed,
// salt "sprout pki v1", info label) read big-endian and n is the group order (the 128
// extra bits make the bias of the reduction negligible, as FIPS 186-5 A.2.1 does). An
// empty seed is refused.
Result<KeyPair> DeriveKeyPair(std::string_view seed, std::string_view label);

// SpkiSha256 is kubeadm's CA pin of a certificate or a public key (PEM): "sha256:" and
// the lower-case hex SHA-256 of its DER SubjectPublicKeyInfo, as
// `openssl x509 -pubkey -noout | openssl pkey -pubin -outform der | sha256sum` prints.
Result<std::string> SpkiSha256(std::string_view pem);
// ValidSpkiSha256 is true for "sha256:" and 64 lower-case hex digits.
bool ValidSpkiSha256(std::string_view hash);
// ClusterCaCertHash is the SpkiSha256 of the Kubernetes CA a founder with
// cluster_secret makes (MakeClusterCAs): what `sprout personalize --role worker` writes.
Result<std::string> ClusterCaCertHash(std::string_view cluster_secret);
// Issue signs a fresh key for request with ca.
Result<CertKey> Issue(const CertKey& ca, const CertRequest& request);

// NodeIdentity is what goes into a node's certificates.
struct NodeIdentity {
  std::string name;              // node name (DNS SAN and CN)
  std::vector<std::string> ips;  // node addresses (IP SANs)
  std::int64_t validity_seconds = kDefaultLeafValiditySeconds;
};

// EtcdNodeRequests are the four etcd-related leaf certificates of a node in kubeadm's
// terms: etcd/server and etcd/peer (CN and SANs: name, localhost, the node IPs,
// 127.0.0.1, ::1; server and client auth), etcd/healthcheck-client and
// apiserver-etcd-client (client auth only). Paths are without .crt/.key.
std::vector<std::pair<std::string, CertRequest>> EtcdNodeRequests(const NodeIdentity& node);

// CAFiles is the CA part of the layout: encryption.key first when there is one (so a
// founder stopped half-way leaves a trace of it; TracesOfEarlierFounding), then
// ca.crt/key, etcd/ca.crt/key, front-proxy-ca.crt/key, sa.key/pub.
std::vector<PkiFile> CAFiles(const ClusterCAs& cas);
// NodeFiles issues the node's etcd certificates and returns their files.
Result<std::vector<PkiFile>> NodeFiles(const ClusterCAs& cas, const NodeIdentity& node);
// UpdateNodeFiles is NodeFiles for a node that already holds some of them: existing maps
// a path ("etcd/server.crt") to its content. A pair that CanKeep at now is kept and not
// returned; the others are issued anew.
Result<std::vector<PkiFile>> UpdateNodeFiles(const ClusterCAs& cas, const NodeIdentity& node,
                                             const std::map<std::string, std::string>& existing, std::int64_t now);
// LoadCAs reads the CA part of the layout back from dir. encryption.key may be missing
// (a cluster founded before it existed); one that is there must be valid.
Result<ClusterCAs> LoadCAs(const std::filesystem::path& dir);
// WritePkiFiles writes files under dir, each atomically with its mode.
Status WritePkiFiles(const std::filesystem::path& dir, const std::vector<PkiFile>& files);

// VerifyIssued checks that cert_pem was signed by ca_cert_pem and is valid now.
Status VerifyIssued(const std::string& ca_cert_pem, const std::string& cert_pem);
// CertNames returns the DNS and IP SANs of cert_pem as "DNS:x" / "IP:y" strings.
Result<std::vector<std::string>> CertNames(const std::string& cert_pem);
// Subject is a certificate's subject as Kubernetes reads it: user (CN) and groups (O).
struct Subject {
  std::string common_name;
  std::vector<std::string> organizations;
};
// CertSubject returns the subject of cert_pem.
Result<Subject> CertSubject(const std::string& cert_pem);
// KeyMatches is true when key_pem is the private key of cert_pem.
bool KeyMatches(const std::string& cert_pem, const std::string& key_pem);

// Validity is a certificate's notBefore and notAfter, in seconds since the epoch (UTC).
struct Validity {
  std::int64_t not_before = 0;
  std::int64_t not_after = 0;
};
// CertValidity reads cert_pem's validity.
Result<Validity> CertValidity(const std::string& cert_pem);
// RenewalTime is when a certificate is renewed: two thirds into its lifetime.
std::int64_t RenewalTime(const Validity& v);
// CanKeep is true when an existing certificate and key may stay at now: issued by
// ca_cert_pem and valid, the key its own, request's subject and exactly its names, no
// longer-lived than request asks, and not yet at its RenewalTime.
bool CanKeep(const std::string& cert_pem, const std::string& key_pem, const std::string& ca_cert_pem,
             const CertRequest& request, std::int64_t now);

}  // namespace sprout::pki
