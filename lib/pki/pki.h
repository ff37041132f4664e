// The cluster PKI: the founder's CAs (etcd, Kubernetes, front proxy), the
// service-account key pair, and each node's etcd certificates, in kubeadm's file
// layout. Keys are ECDSA P-256. Everything here works on PEM strings in plain structs;
// WritePkiFiles is the one function that touches the disk. See docs/formation.md.
#pragma once

#include <filesystem>
#include <string>
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

// CertRequest is one leaf certificate to issue.
struct CertRequest {
  std::string common_name;                 // subject CN
  std::vector<std::string> organizations;  // subject O entries
  std::vector<std::string> dns_names;      // DNS SANs
  std::vector<std::string> ips;            // IP SANs (IPv4 or IPv6 text)
  bool server = false;                     // extendedKeyUsage serverAuth
  bool client = false;                     // extendedKeyUsage clientAuth
  int days = 365;                          // validity
};

// PkiFile is one file of the layout: path relative to the PKI dir, content, mode.
struct PkiFile {
  std::string path;             // "etcd/ca.crt"
  std::string content;          // PEM
  std::filesystem::perms mode;  // 0600 for keys, 0644 otherwise
};

// MakeCA makes a self-signed CA certificate valid for days, with a fresh key.
Result<CertKey> MakeCA(const std::string& common_name, int days = 3650);
// MakeKeyPair makes a fresh key pair.
Result<KeyPair> MakeKeyPair();
// MakeClusterCAs makes all CAs, the service-account key pair and the encryption key
// (the founder, once).
Result<ClusterCAs> MakeClusterCAs();
// Issue signs a fresh key for request with ca.
Result<CertKey> Issue(const CertKey& ca, const CertRequest& request);

// NodeIdentity is what goes into a node's certificates.
struct NodeIdentity {
  std::string name;              // node name (DNS SAN and CN)
  std::vector<std::string> ips;  // node addresses (IP SANs)
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

}  // namespace sprout::pki
