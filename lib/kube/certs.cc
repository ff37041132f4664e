#include "kube/certs.h"

#include <arpa/inet.h>

#include <cstdint>

#include "nodeconfig/nodeconfig.h"
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

Result<std::vector<pki::PkiFile>> ControlPlaneFiles(const pki::ClusterCAs& cas, const ControlPlaneNode& node) {
  if (node.name.empty()) return Fail("the node has no name; the kubelet's certificate needs one");
  if (node.ips.empty()) return Fail("node " + node.name + " has no address for the apiserver to advertise");
  auto names = ApiServerNames(node);
  if (!names) return Fail(names.error());
  std::vector<pki::PkiFile> out;

  pki::CertRequest serving;
  serving.common_name = "kube-apiserver";
  serving.dns_names = names->first;
  serving.ips = names->second;
  serving.server = true;
  auto apiserver = pki::Issue(cas.kubernetes_ca, serving);
  if (!apiserver) return Fail(apiserver.error());
  AddPair(out, "pki/apiserver", *apiserver);

  pki::CertRequest kubelet_client;
  kubelet_client.common_name = "kube-apiserver-kubelet-client";
  kubelet_client.organizations = {"system:masters"};
  kubelet_client.client = true;
  auto kc = pki::Issue(cas.kubernetes_ca, kubelet_client);
  if (!kc) return Fail(kc.error());
  AddPair(out, "pki/apiserver-kubelet-client", *kc);

  pki::CertRequest proxy;
  proxy.common_name = "front-proxy-client";
  proxy.client = true;
  auto fp = pki::Issue(cas.front_proxy_ca, proxy);
  if (!fp) return Fail(fp.error());
  AddPair(out, "pki/front-proxy-client", *fp);

  struct User {
    const char* file;
    std::string cn;
    std::vector<std::string> orgs;
  };
  const std::vector<User> users = {
      {"admin.conf", "kubernetes-admin", {"system:masters"}},
      {"controller-manager.conf", "system:kube-controller-manager", {}},
      {"scheduler.conf", "system:kube-scheduler", {}},
      {"kubelet.conf", "system:node:" + node.name, {"system:nodes"}},
  };
  for (const auto& u : users) {
    pki::CertRequest r;
    r.common_name = u.cn;
    r.organizations = u.orgs;
    r.client = true;
    auto ck = pki::Issue(cas.kubernetes_ca, r);
    if (!ck) return Fail(ck.error());
    Kubeconfig k{node.cluster_name,
                 ApiServerURL(node.ips.front()),
                 cas.kubernetes_ca.cert_pem,
                 u.cn,
                 ck->cert_pem,
                 ck->key_pem,
                 ""};
    out.push_back({u.file, RenderKubeconfig(k), kKeyMode});
  }
  return out;
}

pki::PkiFile BootstrapKubeconfig(const std::string& ca_pem, const std::string& server, const std::string& token,
                                 const std::string& cluster_name) {
  Kubeconfig k{cluster_name, server, ca_pem, "tls-bootstrap-token-user", "", "", token};
  return {"bootstrap-kubelet.conf", RenderKubeconfig(k), kKeyMode};
}

}  // namespace sprout::kube
