#include "kube/certs.h"

#include <arpa/inet.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "kube/apiserver_config.h"
#include "util/text.h"

namespace sprout::kube {

namespace {

constexpr auto kKeyMode = std::filesystem::perms(0600);
constexpr auto kCertMode = std::filesystem::perms(0644);

void AddPair(std::vector<pki::PkiFile>& out, const std::string& base, const pki::CertKey& ck) {
  out.push_back({base + ".crt", ck.cert_pem, kCertMode});
  out.push_back({base + ".key", ck.key_pem, kKeyMode});
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  for (const auto& x : v) {
    if (x == s) return true;
  }
  return false;
}

}  // namespace

Result<std::string> FirstServiceIP(const std::string& cidr) {
  const auto slash = cidr.find('/');
  if (slash == std::string::npos) return Fail("service CIDR '" + cidr + "' has no prefix length (like 10.96.0.0/12)");
  const std::string base = cidr.substr(0, slash);
  int bits = -1;
  try {
    bits = std::stoi(cidr.substr(slash + 1));
  } catch (const std::exception&) {
    bits = -1;
  }
  in_addr a{};
  if (::inet_pton(AF_INET, base.c_str(), &a) != 1) {
    return Fail("service CIDR '" + cidr + "' is not an IPv4 network (IPv6 services are not supported yet)");
  }
  if (bits < 8 || bits > 30) return Fail("service CIDR '" + cidr + "' needs a prefix length of 8 to 30");
  std::uint32_t host = ntohl(a.s_addr);
  const std::uint32_t mask = bits == 0 ? 0 : ~std::uint32_t{0} << (32 - bits);
  if ((host & ~mask) != 0) return Fail("service CIDR '" + cidr + "' has host bits set; use its network address");
  host += 1;
  in_addr first{htonl(host)};
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &first, text, sizeof text);
  return std::string(text);
}

Result<std::pair<std::vector<std::string>, std::vector<std::string>>> ApiServerNames(const ControlPlaneNode& node) {
  auto service_ip = FirstServiceIP(node.services_cidr);
  if (!service_ip) return Fail(service_ip.error());
  std::vector<std::string> dns = {node.name,
                                  "localhost",
                                  "kubernetes",
                                  "kubernetes.default",
                                  "kubernetes.default.svc",
                                  "kubernetes.default.svc." + node.dns_domain};
  std::vector<std::string> ips = {*service_ip};
  for (const auto& ip : node.ips) {
    if (!Contains(ips, ip)) ips.push_back(ip);
  }
  if (!Contains(ips, "127.0.0.1")) ips.emplace_back("127.0.0.1");
  return std::make_pair(dns, ips);
}

std::string ApiServerURL(const std::string& ip) {
  const bool v6 = ip.find(':') != std::string::npos;
  return "https://" + (v6 ? "[" + ip + "]" : ip) + ":6443";
}

std::string RenderKubeconfig(const Kubeconfig& k) {
  std::string out;
  out += "apiVersion: v1\nkind: Config\n";
  out += "clusters:\n- name: " + k.cluster_name + "\n  cluster:\n";
  out += "    certificate-authority-data: " + Base64Encode(k.ca_pem) + "\n";
  out += "    server: " + k.server + "\n";
  out += "contexts:\n- name: " + k.user + "@" + k.cluster_name + "\n  context:\n";
  out += "    cluster: " + k.cluster_name + "\n    user: " + k.user + "\n";
  out += "current-context: " + k.user + "@" + k.cluster_name + "\n";
  out += "preferences: {}\n";
  out += "users:\n- name: " + k.user + "\n  user:\n";
  if (!k.token.empty()) {
    out += "    token: " + k.token + "\n";
  } else {
    out += "    client-certificate-data: " + Base64Encode(k.cert_pem) + "\n";
    out += "    client-key-data: " + Base64Encode(k.key_pem) + "\n";
  }
  return out;
}

namespace {

// Wanted is one certificate of the node: a key pair under pki/, or a kubeconfig.
struct Wanted {
  std::string path;  // "pki/apiserver" (then .crt/.key) or "admin.conf"
  bool front_proxy = false;
  pki::CertRequest request;
  bool kubeconfig = false;
};

Result<std::vector<Wanted>> Wants(const ControlPlaneNode& node) {
  if (node.name.empty()) return Fail("the node has no name; the kubelet's certificate needs one");
  if (node.ips.empty()) return Fail("node " + node.name + " has no address for the apiserver to advertise");
  auto names = ApiServerNames(node);
  if (!names) return Fail(names.error());
  std::vector<Wanted> out;
  pki::CertRequest serving;
  serving.common_name = "kube-apiserver";
  serving.dns_names = names->first;
  serving.ips = names->second;
  serving.server = true;
  out.push_back({"pki/apiserver", false, serving, false});
  pki::CertRequest kubelet_client;
  kubelet_client.common_name = "kube-apiserver-kubelet-client";
  kubelet_client.organizations = {"system:masters"};
  kubelet_client.client = true;
  out.push_back({"pki/apiserver-kubelet-client", false, kubelet_client, false});
  pki::CertRequest proxy;
  proxy.common_name = "front-proxy-client";
  proxy.client = true;
  out.push_back({"pki/front-proxy-client", true, proxy, false});
  const std::vector<std::tuple<std::string, std::string, std::vector<std::string>>> users = {
      {"admin.conf", "kubernetes-admin", {"system:masters"}},
      {"controller-manager.conf", "system:kube-controller-manager", {}},
      {"scheduler.conf", "system:kube-scheduler", {}},
      {"kubelet.conf", "system:node:" + node.name, {"system:nodes"}},
  };
  for (const auto& [file, cn, orgs] : users) {
    pki::CertRequest r;
    r.common_name = cn;
    r.organizations = orgs;
    r.client = true;
    out.push_back({file, false, r, true});
  }
  return out;
}

// KubeconfigStillGood checks an existing kubeconfig's server, CA and client certificate.
bool KubeconfigStillGood(const std::string& text, const std::string& server, const std::string& ca,
                         const pki::CertRequest& r, std::int64_t now) {
  try {
    YAML::Node y = YAML::Load(text);
    const auto cluster = y["clusters"][0]["cluster"];
    const auto user = y["users"][0]["user"];
    if (!cluster || !user || cluster["server"].as<std::string>("") != server) return false;
    if (Base64Decode(cluster["certificate-authority-data"].as<std::string>("")).value_or("") != ca) return false;
    return pki::CanKeep(Base64Decode(user["client-certificate-data"].as<std::string>("")).value_or(""),
                        Base64Decode(user["client-key-data"].as<std::string>("")).value_or(""), ca, r, now);
  } catch (const YAML::Exception&) {
    return false;
  }
}

std::string Get(const std::map<std::string, std::string>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? std::string() : it->second;
}

}  // namespace

Result<std::vector<pki::PkiFile>> UpdateControlPlaneFiles(const pki::ClusterCAs& cas, const ControlPlaneNode& node,
                                                          const std::map<std::string, std::string>& existing,
                                                          std::int64_t now) {
  auto wants = Wants(node);
  if (!wants) return Fail(wants.error());
  const std::string server = ApiServerURL(node.ips.front());
  std::vector<pki::PkiFile> out;
  for (auto& w : *wants) {
    const pki::CertKey& ca = w.front_proxy ? cas.front_proxy_ca : cas.kubernetes_ca;
    w.request.validity_seconds = node.cert_validity_seconds;
    if (w.kubeconfig) {
      if (KubeconfigStillGood(Get(existing, w.path), server, ca.cert_pem, w.request, now)) continue;
    } else if (pki::CanKeep(Get(existing, w.path + ".crt"), Get(existing, w.path + ".key"), ca.cert_pem, w.request,
                            now)) {
      continue;
    }
    auto ck = pki::Issue(ca, w.request);
    if (!ck) return Fail(ck.error());
    if (w.kubeconfig) {
      Kubeconfig k{node.cluster_name, server, ca.cert_pem, w.request.common_name, ck->cert_pem, ck->key_pem, ""};
      out.push_back({w.path, RenderKubeconfig(k), kKeyMode});
    } else {
      AddPair(out, w.path, *ck);
    }
  }
  // The apiserver's encryption configuration (from the cluster's key) and audit
  // policy: rewritten only when their text changes, so a reboot writes nothing.
  const pki::PkiFile configs[] = {{kEncryptionConfigPath, EncryptionConfigYaml(cas.encryption_key), kKeyMode},
                                  {kAuditPolicyPath, AuditPolicyYaml(), kCertMode}};
  for (const auto& f : configs) {
    if (Get(existing, f.path) != f.content) out.push_back(f);
  }
  return out;
}

Result<std::vector<pki::PkiFile>> ControlPlaneFiles(const pki::ClusterCAs& cas, const ControlPlaneNode& node) {
  return UpdateControlPlaneFiles(cas, node, {}, 0);
}

std::vector<std::string> ControlPlaneFilePaths() {
  // The paths do not depend on the node; any valid one lists them.
  std::vector<std::string> out;
  auto wants = Wants({"node", {"127.0.0.1"}, "10.96.0.0/12"});
  if (!wants) return out;
  for (const auto& w : *wants) {
    if (w.kubeconfig) {
      out.push_back(w.path);
    } else {
      out.push_back(w.path + ".crt");
      out.push_back(w.path + ".key");
    }
  }
  out.emplace_back(kEncryptionConfigPath);
  out.emplace_back(kAuditPolicyPath);
  return out;
}

pki::PkiFile BootstrapKubeconfig(const std::string& ca_pem, const std::string& server, const std::string& token,
                                 const std::string& cluster_name) {
  Kubeconfig k{cluster_name, server, ca_pem, "tls-bootstrap-token-user", "", "", token};
  return {"bootstrap-kubelet.conf", RenderKubeconfig(k), kKeyMode};
}

}  // namespace sprout::kube
