#include "firstboot/node_agent.h"

#include <syslog.h>

#include <chrono>
#include <set>
#include <thread>

#include "kube/api.h"
#include "kube/nodes.h"
#include "util/fs.h"
#include "util/process.h"

namespace sprout::firstboot {

namespace fs = std::filesystem;

namespace {

// Round is one pass; it returns what went wrong, or "" when all is in shape.
class Agent {
 public:
  Agent(const NodeAgentOptions& o, const AgentLog& log) : o_(o), log_(log) {}

  std::string Round() {
    const bool admin = o_.control_plane && fs::exists(o_.admin_kubeconfig);
    auto text = ReadFile(admin ? o_.admin_kubeconfig : o_.kubelet_kubeconfig);
    if (!text) return "no kubeconfig yet: " + text.error();
    auto config = kube::ParseKubeconfig(*text);
    if (!config) return config.error();
    auto got = kube::ApiRequest(*config, "GET", "/api/v1/nodes");
    if (!got) return got.error();
    if (got->status != 200) return "listing the nodes answered HTTP " + std::to_string(got->status);
    auto nodes = kube::ParseNodeList(got->body);
    if (!nodes) return nodes.error();
    const kube::NodeView* self = nullptr;
    for (const auto& n : *nodes) {
      if (n.name == o_.node_name) self = &n;
    }
    if (self == nullptr) return "node " + o_.node_name + " is not registered yet";
    if (admin && kube::NeedsControlPlaneLabel(*self)) {
      auto patched = kube::ApiRequest(*config, "PATCH", "/api/v1/nodes/" + o_.node_name, kube::ControlPlaneLabelPatch(),
                                      "application/merge-patch+json");
      if (!patched) return patched.error();
      if (patched->status != 200) return "labelling the node answered HTTP " + std::to_string(patched->status);
      log_(LOG_INFO, "node " + o_.node_name + " labelled node-role.kubernetes.io/control-plane");
    }
    if (self->pod_cidr.empty()) return "node " + o_.node_name + " has no pod subnet yet";
    if (auto s = WriteCni(self->pod_cidr); !s.empty()) return s;
    if (o_.routes) return Routes(kube::PeerRoutes(o_.node_name, *nodes));
    return "";
  }

 private:
  const NodeAgentOptions& o_;
  const AgentLog& log_;
  std::set<std::string> routed_;  // "CIDR via IP" already programmed

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

  std::string Routes(const std::vector<kube::PodRoute>& routes) {
    for (const auto& r : routes) {
      const std::string key = r.cidr + " via " + r.via;
      if (routed_.count(key) != 0) continue;
      auto run = Run({{"ip", "route", "replace", r.cidr, "via", r.via}});
      if (!run) return run.error();
      if (run->exit_code != 0) return "ip route replace " + key + " failed: " + run->output;
      routed_.insert(key);
      log_(LOG_INFO, "pod network: route " + key);
    }
    return "";
  }
};

}  // namespace

void RunNodeAgent(const NodeAgentOptions& options, const volatile std::sig_atomic_t* stop, const AgentLog& log) {
  Agent agent(options, log);
  std::string last;
  while (*stop == 0) {
    const std::string problem = agent.Round();
    if (problem != last) {
      if (!problem.empty()) log(LOG_INFO, "kubernetes: " + problem + " (checking again)");
      last = problem;
    }
    // Quick rounds until all is in shape, then a slower watch for new nodes and subnets.
    const auto pause = problem.empty() ? std::chrono::seconds(15) : std::chrono::seconds(3);
    for (auto waited = std::chrono::seconds(0); waited < pause && *stop == 0; waited += std::chrono::seconds(1)) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
}

}  // namespace sprout::firstboot
