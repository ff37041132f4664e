// The Kubernetes side of a node's PKI: the control-plane certificates and every
// kubeconfig, in kubeadm's names, paths and subjects, issued from the cluster CAs that
// formation made (lib/pki). Pure over plain structs; the caller writes the files with
// pki::WritePkiFiles. See docs/control-plane.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "pki/pki.h"
#include "util/result.h"

namespace sprout::kube {

// ControlPlaneNode is what goes into one control-plane node's certificates.
struct ControlPlaneNode {
  std::string name;                         // node name (kubelet user, DNS SAN)
  std::vector<std::string> ips;             // node addresses (apiserver IP SANs)
  std::string services_cidr;                // the Shoot's networking.services
  std::string cluster_name = "kubernetes";  // the kubeconfigs' cluster name
  std::string dns_domain = "cluster.local";
  std::int64_t cert_validity_seconds = pki::kDefaultLeafValiditySeconds;  // each leaf's lifetime
};

// FirstServiceIP is the first usable address of an IPv4 service CIDR: the ClusterIP
// the apiserver gives the `kubernetes` Service ("10.96.0.0/12" -> "10.96.0.1").
Result<std::string> FirstServiceIP(const std::string& cidr);

// ApiServerNames are the apiserver serving certificate's SANs as "DNS:x" and "IP:y":
// the node name, localhost, kubernetes, kubernetes.default, kubernetes.default.svc,
// kubernetes.default.svc.<domain>, the first service IP, the node IPs and 127.0.0.1.
Result<std::pair<std::vector<std::string>, std::vector<std::string>>> ApiServerNames(const ControlPlaneNode& node);

// Kubeconfig is one kubeconfig file's content: a cluster, a user and a context.
struct Kubeconfig {
  std::string cluster_name;  // clusters[0].name and the context's cluster
  std::string server;        // https://ADDRESS:6443
  std::string ca_pem;        // certificate-authority-data
  std::string user;          // users[0].name
  std::string cert_pem;      // client-certificate-data (empty with a token)
  std::string key_pem;       // client-key-data (empty with a token)
  std::string token;         // a bearer token instead of a certificate
};

// RenderKubeconfig renders k as kubeconfig YAML with the PEMs embedded (base64).
std::string RenderKubeconfig(const Kubeconfig& k);

// ApiServerURL is "https://IP:6443" (brackets around an IPv6 address).
std::string ApiServerURL(const std::string& ip);

// ControlPlaneFiles issues what a control-plane node needs besides its etcd
// certificates, with paths relative to the Kubernetes folder (/etc/kubernetes):
//   pki/apiserver, pki/apiserver-kubelet-client (kubernetes CA),
//   pki/front-proxy-client (front-proxy CA),
//   admin.conf, controller-manager.conf, scheduler.conf, kubelet.conf (each with a
//   client certificate of its own: kubernetes-admin in system:masters,
//   system:kube-controller-manager, system:kube-scheduler, system:node:NAME in
//   system:nodes), all pointing at this node's apiserver;
//   pki/encryption-config.yaml (the apiserver's EncryptionConfiguration with the
//   cluster's encryption key) and audit-policy.yaml (kube/apiserver_config.h).
// Keys, kubeconfigs and the encryption configuration are 0600, certificates and the
// audit policy 0644.
Result<std::vector<pki::PkiFile>> ControlPlaneFiles(const pki::ClusterCAs& cas, const ControlPlaneNode& node);

// UpdateControlPlaneFiles is ControlPlaneFiles for a node that may already hold some
// of them: existing maps a path (as above) to the file's content. A certificate or
// kubeconfig that is still good at now (issued by today's CA and valid, its key its own,
// the same subject and exactly the wanted names and server, and not yet two thirds into
// its lifetime: pki::CanKeep) is kept and not returned; everything else is issued anew; the encryption configuration
// and audit policy are returned only when their text differs. So a reboot re-keys nothing, and a changed address
// re-issues the apiserver certificate and the kubeconfigs only.
Result<std::vector<pki::PkiFile>> UpdateControlPlaneFiles(const pki::ClusterCAs& cas, const ControlPlaneNode& node,
                                                          const std::map<std::string, std::string>& existing,
                                                          std::int64_t now);

// ControlPlaneFilePaths lists every path ControlPlaneFiles can return.
std::vector<std::string> ControlPlaneFilePaths();

// BootstrapKubeconfig is a worker's bootstrap-kubelet.conf: the bootstrap token as
// user tls-bootstrap-token-user, against server, trusting ca_pem (mode 0600).
pki::PkiFile BootstrapKubeconfig(const std::string& ca_pem, const std::string& server, const std::string& token,
                                 const std::string& cluster_name);

}  // namespace sprout::kube
