#include "firstboot/kube_agent.h"

#include <syslog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include "formation/join.h"
#include "formationd/etcd.h"
#include "kube/api.h"
#include "kube/bootstrap.h"
#include "kube/certs.h"
#include "kube/coredns.h"
#include "kube/csr_approval.h"
#include "kube/node_list.h"
#include "staticpod/kubelet.h"
#include "util/fs.h"
#include "util/json_field.h"
#include "util/links.h"
#include "util/process.h"
#include "util/text.h"

namespace sprout::firstboot {

namespace fs = std::filesystem;

namespace {

// Round is one pass; it returns what went wrong, or "" when all is in shape.
class Agent {
 public:
  Agent(const NodeAgentOptions& o, const AgentLog& log) : o_(o), log_(log) { LoadRouteMemory(); }

  // Report is what `sprout-firstboot status` shows of the Kubernetes side, as of the last
  // round (kubernetes.json in the state folder, written only when it changes).
  nlohmann::ordered_json report;

  std::string Round() {
    report = nlohmann::ordered_json::object();
    report["apiserver"] = "unknown";
    report["node"] = "not registered";
    report["staticPods"] = StaticPods();
    if (!o_.control_plane) {
      if (auto s = StartWorkerKubelet(); !s.empty()) return s;
    }
    const fs::path admin_file = o_.kubernetes_dir / "admin.conf";
    const bool admin = o_.control_plane && fs::exists(admin_file);
    auto text = ReadFile(admin ? admin_file : o_.kubernetes_dir / "kubelet.conf");
    if (!text) return "no kubeconfig yet: " + text.error();
    auto config = kube::ParseKubeconfig(*text);
    if (!config) return config.error();
    if (admin) {
      if (auto s = CreateBootstrap(*config); !s.empty()) return s;
      // A DNS problem holds up nothing else of the node; the report and the log say it.
      if (auto s = CreateCoreDns(*config); !s.empty()) {
        report["dns"] = "CoreDNS: " + s;
        if (s != dns_problem_) log_(LOG_WARNING, "cluster DNS: " + s);
        dns_problem_ = s;
      } else {
        dns_problem_.clear();
      }
    }
    if (o_.control_plane) {
      auto ready = kube::ApiRequest(*config, "GET", "/readyz");
      report["apiserver"] = !ready                 ? ready.error()
                            : ready->status == 200 ? "ready (/readyz ok)"
                                                   : "not ready (/readyz HTTP " + std::to_string(ready->status) + ")";
    }
    auto got = kube::ApiRequest(*config, "GET", "/api/v1/nodes");
    if (!got) return got.error();
    if (got->status != 200) return "listing the nodes answered HTTP " + std::to_string(got->status);
    if (!o_.control_plane) report["apiserver"] = "answering at " + config->server;
    auto nodes = kube::ParseNodeList(got->body);
    if (!nodes) return nodes.error();
    const kube::NodeView* self = nullptr;
    for (const auto& n : *nodes) {
      if (n.name == o_.node_name) self = &n;
    }
    if (self == nullptr) return "node " + o_.node_name + " is not registered yet";
    report["node"] = self->ready ? "registered, Ready" : "registered, not Ready";
    report["podCIDR"] = self->pod_cidr;
    report["nodes"] = nodes->size();
    if (admin && kube::NeedsControlPlaneLabel(*self, o_.master_label)) {
      auto patched = kube::ApiRequest(*config, "PATCH", "/api/v1/nodes/" + o_.node_name,
                                      kube::ControlPlaneLabelPatch(o_.master_label), "application/merge-patch+json");
      if (!patched) return patched.error();
      if (patched->status != 200) return "labelling the node answered HTTP " + std::to_string(patched->status);
      log_(LOG_INFO, "node " + o_.node_name + " labelled node-role.kubernetes.io/control-plane");
    }
    if (admin) {
      SpreadCoreDns(*config, *nodes);
      // A request the approver cannot decide now holds up nothing else of the node.
      if (auto s = ApproveCsrs(*config, *nodes); !s.empty()) {
        report["certificateRequests"] = s;
        if (s != csr_problem_) log_(LOG_WARNING, "certificate requests: " + s);
        csr_problem_ = s;
      } else {
        csr_problem_.clear();
      }
    }
    if (self->pod_cidr.empty()) return "node " + o_.node_name + " has no pod subnet yet";
    if (auto s = WriteCni(self->pod_cidr); !s.empty()) return s;
    if (auto s = StartKubeProxy(); !s.empty()) return s;
    RouteServices();  // a failure is reported (serviceRoute in kubernetes.json) and retried; it holds up nothing
    if (!o_.routes) return "";
    if (auto s = ReadFormationRecord(); !s.empty()) return s;
    auto plan = kube::PeerRoutes(o_.node_name, *nodes, o_.networks, known_, memory_);
    KeepRouteMemory(plan.memory);
    return Routes(plan);
  }

 private:
  const NodeAgentOptions& o_;
  const AgentLog& log_;
  std::set<std::string> routed_;                         // "CIDR via IP" installed before (for the log's wording)
  std::set<std::string> refused_;                        // skipped routes and Service-route problems already logged
  bool bootstrap_done_ = false;                          // bindings made, the base token's Secret gone
  bool coredns_done_ = false;                            // the CoreDNS objects exist
  std::string dns_problem_;                              // the last CoreDNS problem logged
  std::string csr_problem_;                              // the last certificate-request problem logged
  std::set<std::string> csr_decided_;                    // requests this agent approved or denied (logged once)
  std::chrono::steady_clock::time_point last_spread_{};  // the last CoreDNS pod moved
  std::chrono::steady_clock::time_point last_spread_check_{};  // the last list of the CoreDNS pods
  std::int64_t secrets_window_ = 0;                            // the window whose worker-token Secrets exist
  bool kubelet_started_ = false;
  std::string written_token_;  // the token bootstrap-kubelet.conf was written with
  bool proxy_started_ = false;
  bool services_routed_ = false;
  kube::KnownAddresses known_;                        // formation's record: etcd members' names and addresses
  bool known_read_ = false;                           // known_ was read from etcd in this run
  std::chrono::steady_clock::time_point known_at_{};  // when it was last read
  kube::RouteMemory memory_;                          // each Node's first address (pod-routes.json)
  std::string memory_written_;                        // pod-routes.json as last written or read

  // RouteMemoryFile keeps memory_ across restarts.
  fs::path RouteMemoryFile() const { return o_.state_dir / "pod-routes.json"; }

  // LoadRouteMemory reads pod-routes.json once, at start. A file that cannot be read is
  // logged and replaced by the next write; the Nodes are then seen afresh (formation's
  // record still binds the control-plane nodes).
  void LoadRouteMemory() {
    std::error_code ec;
    if (!o_.routes || !fs::exists(RouteMemoryFile(), ec)) return;
    auto text = ReadFile(RouteMemoryFile());
    auto memory = text ? kube::ParseRouteMemory(*text) : Result<kube::RouteMemory>(Fail(text.error()));
    if (!memory) {
      log_(LOG_WARNING, "pod network: " + RouteMemoryFile().string() + " is not used (" + memory.error() +
                            "); every Node's address is taken as first seen now");
      return;
    }
    memory_ = *memory;
    memory_written_ = *text;
  }

  // KeepRouteMemory logs what the plan remembered or changed and writes pod-routes.json
  // when it changed. A failed write is logged; the memory of this run still holds.
  void KeepRouteMemory(const kube::RouteMemory& next) {
    for (const auto& [name, ip] : next.first_seen) {
      auto old = memory_.first_seen.find(name);
      if (old == memory_.first_seen.end()) {
        log_(LOG_INFO, "pod network: node " + name + " first seen at " + ip);
      } else if (old->second != ip) {
        log_(LOG_WARNING, "pod network: node " + name + " moved from " + old->second + " to " + ip +
                              ", which formation's record (the etcd member list) names");
      }
    }
    memory_ = next;
    const std::string text = kube::RenderRouteMemory(memory_);
    if (text == memory_written_) return;
    if (auto w = WriteFileAtomic(RouteMemoryFile(), text, fs::perms(0600)); !w) {
      if (refused_.insert(w.error()).second) log_(LOG_WARNING, "pod network: " + w.error());
      return;
    }
    memory_written_ = text;
  }

  // ReadFormationRecord reads, on a control-plane node, the etcd member list from the
  // local member every 30 s: the names and addresses the pod routes hold the Nodes to
  // (kube::KnownAddresses). Until it was read once no route is planned (the apiserver
  // answering means etcd does); a later failure keeps the list read before. A worker
  // has no such record and cannot read etcd.
  std::string ReadFormationRecord() {
    if (!o_.control_plane) return "";
    const auto now = std::chrono::steady_clock::now();
    if (known_read_ && now - known_at_ < std::chrono::seconds(30)) return "";
    formation::EtcdApi etcd(formation::ClientUrlFor(formation::PeerUrl(o_.node_ip)),
                            formation::ClientTlsFor(o_.pki_dir.string()));
    auto members = etcd.ListMembers();
    if (!members) {
      if (!known_read_) {
        return "pod routes wait for etcd's member list (formation's record of the nodes): " + members.error();
      }
      known_at_ = now;  // try again in 30 s; the list read before still holds
      return "";
    }
    known_ = formation::MemberAddresses(*members);
    known_read_ = true;
    known_at_ = now;
    return "";
  }

  // RouteServices puts networking.services on the link that holds this node's address,
  // once, so that the node's own processes (the apiserver calling a webhook) reach
  // ClusterIPs where there is no default route (kube::ServiceRoute says why).
  void RouteServices() {
    if (services_routed_ || !o_.routes) return;
    auto cidr = kube::ServiceRoute(o_.networks);
    if (!cidr) return;
    std::string problem;
    auto link = LinkWithAddress(o_.node_ip);
    if (!link) {
      problem = "no network link holds this node's address '" + o_.node_ip + "' to route " + *cidr + " on";
    } else {
      const std::string route = *cidr + " dev " + *link;
      auto run = Run({{"ip", "route", "replace", *cidr, "dev", *link}});
      if (!run) {
        problem = run.error();
      } else if (run->exit_code != 0) {
        problem = "ip route replace " + route + " failed: " + run->output;
      } else {
        services_routed_ = true;
        log_(LOG_INFO, "Service network: route " + route + " (this node's own processes reach ClusterIPs)");
        return;
      }
    }
    report["serviceRoute"] = problem;
    if (refused_.insert(problem).second) log_(LOG_WARNING, "Service network: " + problem);
  }

  // StartKubeProxy starts kube-proxy once the node has its kubelet.conf and pod network
  // (at first boot its unit was skipped for want of the kubeconfig; later boots start
  // it at once, and this start is then a no-op). Images without kube-proxy skip it.
  std::string StartKubeProxy() {
    if (proxy_started_ || o_.kube_proxy_unit.empty() || !fs::exists(o_.kube_proxy_unit)) return "";
    auto run = Run({{"systemctl", "start", "--no-block", o_.kube_proxy_unit.filename().string()}});
    if (!run || run->exit_code != 0) return "systemctl start " + o_.kube_proxy_unit.filename().string() + " failed";
    proxy_started_ = true;
    log_(LOG_INFO, "kube-proxy started (Service ClusterIPs)");
    return "";
  }

  // StartWorkerKubelet gives a worker's kubelet what TLS bootstrapping needs, once
  // formation saved the worker's credentials, and starts it. Its kubelet.conf (written
  // by the kubelet itself once its certificate is signed) ends the step.
  std::string StartWorkerKubelet() {
    if (fs::exists(o_.kubernetes_dir / "kubelet.conf")) return "";
    const fs::path worker = o_.state_dir / "worker";
    auto token = ReadFile(worker / "bootstrap-token");
    if (!token) return "waiting for formation to hand this worker its credentials";
    // Formation replaces a worker token that expired before the kubelet used it; the
    // kubelet then starts again with the new one.
    if (kubelet_started_ && *token == written_token_) return "";
    auto ca = ReadFile(worker / "ca.crt");
    auto endpoints = ReadFile(worker / "api-endpoints");
    if (!ca || !endpoints) return "the worker credentials in " + worker.string() + " are incomplete";
    const std::string server = std::string(Trim(endpoints->substr(0, endpoints->find('\n'))));
    if (server.empty()) return worker.string() + "/api-endpoints names no API server";
    std::error_code ec;
    fs::create_directories(o_.kubernetes_dir / "pki", ec);
    auto conf = kube::BootstrapKubeconfig(*ca, server, std::string(Trim(*token)), o_.cluster_name);
    for (const auto& [file, text, mode] :
         {std::tuple{o_.kubernetes_dir / "pki" / "ca.crt", *ca, fs::perms(0644)},
          std::tuple{o_.kubernetes_dir / "bootstrap-kubelet.conf", conf.content, fs::perms(0600)},
          std::tuple{o_.kubernetes_dir / "kubelet.env", KubeletEnv(o_.node_name, o_.node_ip, false),
                     fs::perms(0644)}}) {
      if (auto s = WriteFileAtomic(file, text, mode); !s) return s.error();
    }
    const char* verb = kubelet_started_ ? "restart" : "start";
    auto run = Run({{"systemctl", verb, "--no-block", "kubelet.service"}});
    if (!run || run->exit_code != 0) return std::string("systemctl ") + verb + " kubelet.service failed";
    kubelet_started_ = true;
    written_token_ = *token;
    log_(LOG_INFO, "worker: bootstrap-kubelet.conf written for " + server + "; kubelet started (TLS bootstrap)");
    return "";
  }

  // CreateBootstrap creates kubeadm's bootstrap RBAC once, deletes the Secret earlier
  // versions made for the base token (which must authenticate nothing), and creates the
  // Secrets of the worker tokens of this window and the next whenever the window
  // changes. An object that exists already (409), or is gone already (404), is fine.
  std::string CreateBootstrap(const kube::Kubeconfig& admin) {
    auto token = ReadFile(o_.state_dir / "bootstrap-token");
    if (!token) return "no bootstrap token in " + (o_.state_dir / "bootstrap-token").string();
    const std::string base(Trim(*token));
    const std::int64_t now =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    const std::int64_t window = formation::WorkerTokenWindow(now);
    if (bootstrap_done_ && window == secrets_window_) return "";
    std::vector<kube::ApiObject> objects;
    if (!bootstrap_done_) objects = kube::BootstrapBindings();
    auto secrets = kube::WorkerTokenSecrets(base, now);
    if (!secrets) return secrets.error();
    for (auto& s : *secrets) objects.push_back(std::move(s));
    for (const auto& obj : objects) {
      auto r = kube::ApiRequest(admin, "POST", obj.path, obj.json);
      if (!r) return r.error();
      if (r->status != 201 && r->status != 409) {
        return "creating " + obj.name + " answered HTTP " + std::to_string(r->status);
      }
      if (r->status == 201) log_(LOG_INFO, "created " + obj.name);
    }
    if (!bootstrap_done_) {
      auto path = kube::BaseTokenSecretPath(base);
      if (!path) return path.error();
      auto r = kube::ApiRequest(admin, "DELETE", *path);
      if (!r) return r.error();
      if (r->status != 200 && r->status != 202 && r->status != 404) {
        return "deleting the base token's Secret " + *path + " answered HTTP " + std::to_string(r->status);
      }
      if (r->status != 404) log_(LOG_INFO, "deleted the base token's Secret (it had no expiry): " + *path);
      for (const auto& revoked : kube::RevokedBindingPaths()) {
        auto d = kube::ApiRequest(admin, "DELETE", revoked);
        if (!d) return d.error();
        if (d->status != 200 && d->status != 202 && d->status != 404) {
          return "deleting " + revoked + " answered HTTP " + std::to_string(d->status);
        }
        if (d->status != 404) {
          log_(LOG_INFO, "deleted " + revoked +
                             ": the controller-manager approved any node name for a bootstrap "
                             "token; sprout's approver decides now");
        }
      }
    }
    bootstrap_done_ = true;
    secrets_window_ = window;
    return "";
  }

  // ApproveCsrs decides the kubelets' certificate signing requests (kube/csr_approval.h):
  // a bootstrap token's node client request only for a new name or the key the name was
  // first approved for, a serving request only from the node itself for its own name and
  // addresses. A new name goes into kube-system/sprout-node-identities before its
  // approval, with the record's resourceVersion, so two control-plane nodes deciding at
  // once cannot give one name to two keys (the loser gets 409 and decides again next
  // round). Until formation's record was read (the control-plane names) nothing is
  // decided. Each decision is logged once.
  std::string ApproveCsrs(const kube::Kubeconfig& admin, const std::vector<kube::NodeView>& nodes) {
    if (auto s = ReadFormationRecord(); !s.empty() || !known_read_) return "";  // the routes' step reports it
    auto listed = kube::ApiRequest(admin, "GET", "/apis/certificates.k8s.io/v1/certificatesigningrequests");
    if (!listed) return listed.error();
    if (listed->status != 200) {
      return "listing the certificate signing requests answered HTTP " + std::to_string(listed->status);
    }
    auto csrs = kube::ParseCsrList(listed->body);
    if (!csrs) return csrs.error();
    kube::ApprovalFacts facts;
    facts.now =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    for (const auto& n : nodes) facts.nodes.insert(n.name);
    for (const auto& [name, address] : known_) facts.control_plane.insert(name);
    facts.known = known_;
    facts.node_network = o_.networks.nodes;
    bool record_read = false;
    std::vector<std::string> problems;
    for (const auto& csr : *csrs) {
      if (csr.decided || (csr.signer != kube::kClientKubeletSigner && csr.signer != kube::kKubeletServingSigner)) {
        continue;
      }
      if (!record_read) {
        auto got = kube::ApiRequest(admin, "GET", kube::kIdentityRecordPath);
        if (!got) return got.error();
        if (got->status == 200) {
          auto record = kube::ParseIdentityRecord(got->body);
          if (!record) return record.error();
          facts.record = std::move(*record);
        } else if (got->status != 404) {
          return "reading kube-system/sprout-node-identities answered HTTP " + std::to_string(got->status);
        }
        // This node founded the cluster again from a backup (run.cc wrote restored-at):
        // the record says so, once, before any decision (kube::IdentityRecord).
        if (auto at = ReadFile(o_.state_dir / "restored-at")) {
          const std::string t(Trim(*at));
          const std::int64_t restored =
              !t.empty() && t.size() < 13 &&
                      std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })
                  ? std::stoll(t)
                  : 0;
          if (restored > facts.record.restored_at) {
            kube::IdentityRecord next = facts.record;
            next.restored_at = restored;
            const bool create = !facts.record.exists;
            auto w = kube::ApiRequest(admin, create ? "POST" : "PUT",
                                      create ? "/api/v1/namespaces/kube-system/configmaps" : kube::kIdentityRecordPath,
                                      kube::IdentityRecordBody(next));
            if (!w) return w.error();
            if (w->status == 409) return "";  // changed meanwhile: next round
            if (w->status != 200 && w->status != 201) {
              return "writing kube-system/sprout-node-identities answered HTTP " + std::to_string(w->status);
            }
            auto written = kube::ParseIdentityRecord(w->body);
            if (!written) return written.error();
            facts.record = std::move(*written);
            log_(LOG_INFO, "node names: the cluster was restored from a backup at " + t +
                               "; a worker name not heard from since may be bound to a new key, once");
          }
        }
        auto leases = kube::ApiRequest(admin, "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases");
        if (!leases) return leases.error();
        if (leases->status != 200) {
          return "listing kube-node-lease answered HTTP " + std::to_string(leases->status);
        }
        auto renewed = kube::ParseLeaseRenewals(leases->body);
        if (!renewed) return renewed.error();
        facts.lease_renewed = std::move(*renewed);
        record_read = true;
      }
      const auto decision = kube::DecideCsr(csr, facts);
      if (decision.kind == kube::CsrDecision::kLeave) continue;
      if (decision.record) {
        kube::IdentityRecord next = facts.record;
        next.key_of[decision.record->first] = decision.record->second;
        next.bound_at[decision.record->first] = facts.now;
        const bool create = !facts.record.exists;
        auto w = kube::ApiRequest(admin, create ? "POST" : "PUT",
                                  create ? "/api/v1/namespaces/kube-system/configmaps" : kube::kIdentityRecordPath,
                                  kube::IdentityRecordBody(next));
        if (!w) return w.error();
        if (w->status == 409) return "";  // another control-plane node changed the record: decide again next round
        if (w->status != 200 && w->status != 201) {
          return "writing kube-system/sprout-node-identities answered HTTP " + std::to_string(w->status);
        }
        auto written = kube::ParseIdentityRecord(w->body);
        if (!written) return written.error();
        facts.record = std::move(*written);
      }
      const bool approve = decision.kind == kube::CsrDecision::kApprove;
      auto body = kube::ApprovalBody(csr.json, approve, decision.reason);
      if (!body) return body.error();
      auto put = kube::ApiRequest(
          admin, "PUT", "/apis/certificates.k8s.io/v1/certificatesigningrequests/" + csr.name + "/approval", *body);
      if (!put) return put.error();
      if (put->status == 409) continue;  // decided meanwhile (another control-plane node)
      if (put->status != 200) {
        problems.push_back((approve ? "approving " : "denying ") + csr.name + " answered HTTP " +
                           std::to_string(put->status));
        continue;
      }
      if (csr_decided_.insert(csr.name).second) {
        log_(approve ? LOG_INFO : LOG_WARNING, std::string("certificate request ") + csr.name + " from " +
                                                   csr.username + (approve ? " approved: " : " DENIED: ") +
                                                   decision.reason);
      }
    }
    return Join(problems, "; ");
  }

  // CreateCoreDns creates the CoreDNS objects once (docs/dns.md); one that exists already
  // (another control-plane node made it, or a site changed it) is kept as it is. The
  // answer to a create that lost the race is not always 409: the kube-dns Service's
  // address is taken first (422), so any refusal is followed by a read of the object.
  // Each round after, the report says how many of the Deployment's replicas are ready.
  std::string CreateCoreDns(const kube::Kubeconfig& admin) {
    if (o_.coredns.empty()) return "";
    if (!coredns_done_) {
      for (const auto& obj : o_.coredns) {
        auto r = kube::ApiRequest(admin, "POST", obj.path, obj.json);
        if (!r) return r.error();
        if (r->status == 201) log_(LOG_INFO, "cluster DNS: created " + obj.name);
        if (r->status == 201 || r->status == 409) continue;
        const auto name = nlohmann::json::parse(obj.json)["metadata"]["name"].get<std::string>();
        auto have = kube::ApiRequest(admin, "GET", obj.path + "/" + name);
        if (have && have->status == 200) continue;
        return "creating " + obj.name + " answered HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 300);
      }
      coredns_done_ = true;
    }
    auto got = kube::ApiRequest(admin, "GET", "/apis/apps/v1/namespaces/kube-system/deployments/coredns");
    if (got && got->status == 200) {
      auto j = nlohmann::json::parse(got->body, nullptr, false);
      if (j.is_object()) {
        const auto none = nlohmann::json::object();
        const auto ready = JsonUnsigned(j.contains("status") ? j["status"] : none, "readyReplicas").value_or(0);
        const auto want = JsonUnsigned(j.contains("spec") ? j["spec"] : none, "replicas").value_or(0);
        report["dns"] = "CoreDNS: " + std::to_string(ready) + " of " + std::to_string(want) +
                        " replicas ready behind kube-system/kube-dns";
      }
    } else {
      report["dns"] = "CoreDNS: the Deployment kube-system/coredns cannot be read (" +
                      (got ? "HTTP " + std::to_string(got->status) : got.error()) + ")";
    }
    return "";
  }

  // SpreadCoreDns moves a CoreDNS pod off a node that runs both, once another node may
  // take one (kube::CoreDnsPodToMove), at most once a minute; it lists the pods at most
  // every 20 s, not every round. A failure is logged and tried again then; it holds up
  // nothing.
  void SpreadCoreDns(const kube::Kubeconfig& admin, const std::vector<kube::NodeView>& nodes) {
    if (o_.coredns.empty() || !coredns_done_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_spread_ < std::chrono::seconds(60) || now - last_spread_check_ < std::chrono::seconds(20)) return;
    last_spread_check_ = now;
    auto got = kube::ApiRequest(admin, "GET", "/api/v1/namespaces/kube-system/pods?labelSelector=k8s-app%3Dkube-dns");
    if (!got || got->status != 200) return;
    auto pods = kube::ParseDnsPods(got->body);
    if (!pods) return;
    const std::string move = kube::CoreDnsPodToMove(*pods, nodes);
    if (move.empty()) return;
    last_spread_ = now;
    std::string from;
    for (const auto& p : *pods) {
      if (p.name == move) from = p.node;
    }
    auto r = kube::ApiRequest(admin, "DELETE", "/api/v1/namespaces/kube-system/pods/" + move);
    if (!r || (r->status != 200 && r->status != 404)) {
      log_(LOG_WARNING, "cluster DNS: deleting the CoreDNS pod " + move +
                            " to spread the replicas failed: " + (r ? "HTTP " + std::to_string(r->status) : r.error()));
      return;
    }
    log_(LOG_INFO, "cluster DNS: " + from + " ran every CoreDNS replica; deleted " + move +
                       " so that its replacement goes to a node that runs none");
  }

  std::vector<std::string> StaticPods() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(o_.kubernetes_dir / "manifests", ec)) {
      if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string WriteCni(const std::string& pod_cidr) {
    const fs::path file = o_.cni_dir / "10-sprout.conflist";
    const std::string want = kube::CniConfList(pod_cidr);
    auto have = ReadFile(file);
    if (have && *have == want) return "";
    std::error_code ec;
    fs::create_directories(o_.cni_dir, ec);
    if (auto s = WriteFileAtomic(file, want); !s) return s.error();
    log_(LOG_INFO, "pod network: " + file.string() + " for pod subnet " + pod_cidr);
    return "";
  }

  // Routes installs the plan's routes that the kernel's table lacks, every round: a
  // route flushed by hand or lost with its link comes back within a round, and a Node
  // whose next hop changed is followed. Each route is tried whatever failed before it;
  // the failures are reported together.
  std::string Routes(const kube::PodRoutePlan& plan) {
    auto skipped = nlohmann::ordered_json::array();
    for (const auto& s : plan.skipped) {
      const std::string line = "node " + s.node + " podCIDR " + s.cidr + ": " + s.why;
      skipped.push_back(line);
      if (refused_.insert(line).second) log_(LOG_WARNING, "pod network: not routing " + line);
    }
    if (!skipped.empty()) report["skippedRoutes"] = skipped;
    if (plan.routes.empty()) return "";
    std::map<std::string, std::string> kernel;
    const bool v6 = std::any_of(plan.routes.begin(), plan.routes.end(),
                                [](const kube::PodRoute& r) { return r.cidr.find(':') != std::string::npos; });
    for (const char* family : {"-4", "-6"}) {
      if (family[1] == '6' && !v6) continue;  // a node may run with IPv6 off; ask only when a route needs it
      auto shown = Run({{"ip", family, "route", "show"}});
      if (!shown) return shown.error();
      if (shown->exit_code != 0) return std::string("ip ") + family + " route show failed: " + shown->output;
      kernel.merge(kube::KernelRoutes(shown->output));
    }
    std::vector<std::string> failed;
    for (const auto& r : kube::MissingRoutes(plan.routes, kernel)) {
      const std::string key = r.cidr + " via " + r.via;
      auto run = Run({{"ip", "route", "replace", r.cidr, "via", r.via}});
      if (!run || run->exit_code != 0) {
        failed.push_back("ip route replace " + key + " failed: " + (run ? run->output : run.error()));
        continue;
      }
      const bool again = routed_.count(key) != 0;
      routed_.insert(key);
      log_(LOG_INFO, "pod network: route " + key + (again ? " again (it was gone from the kernel's table)" : ""));
    }
    return Join(failed, "; ");
  }
};

}  // namespace

void RunNodeAgent(const NodeAgentOptions& options, const volatile std::sig_atomic_t* stop, const AgentLog& log) {
  Agent agent(options, log);
  std::string last;
  std::string written;
  int same = 0;  // rounds in a row that ended on the same problem
  while (*stop == 0) {
    // A problem is compared without the times in it, so a retry that fails the same
    // way is neither logged again nor rewritten to kubernetes.json.
    const std::string problem = WithoutTimings(agent.Round());
    agent.report["problem"] = problem;
    const std::string text = agent.report.dump(2) + "\n";
    if (text != written && WriteFileAtomic(options.state_dir / "kubernetes.json", text)) written = text;
    if (problem == last) {
      ++same;
    } else {
      if (!problem.empty()) log(LOG_INFO, "kubernetes: " + problem + " (checking again)");
      last = problem;
      same = 0;
    }
    // Quick rounds until all is in shape, then a slower watch for new nodes and subnets;
    // a problem that stays for a minute (an apiserver still starting) is checked every
    // 10 s, which spares a slow node's CPU.
    const auto pause = problem.empty() ? std::chrono::seconds(15)
                       : same < 20     ? std::chrono::seconds(3)
                                       : std::chrono::seconds(10);
    for (auto waited = std::chrono::seconds(0); waited < pause && *stop == 0; waited += std::chrono::seconds(1)) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
}

}  // namespace sprout::firstboot
