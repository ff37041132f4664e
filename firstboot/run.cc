#include "firstboot/run.h"

#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "firstboot/certs.h"
#include "firstboot/kube_agent.h"
#include "firstboot/tpm.h"
#include "firstboot/workloads.h"
#include "formationd/daemon.h"
#include "formationd/state_file.h"
#include "kube/api.h"
#include "kube/controlplane.h"
#include "kube/coredns.h"
#include "nodeconfig/apply.h"
#include "nodeconfig/sources.h"
#include "settings/cluster.h"
#include "staticpod/etcd_pod.h"
#include "staticpod/kubelet.h"
#include "util/fs.h"
#include "util/links.h"

namespace sprout::firstboot {
namespace {

volatile std::sig_atomic_t g_stop = 0;

void OnSignal(int) { g_stop = 1; }

// Log writes a structured journal entry when running under systemd, else a plain line.
void Log(int priority, const std::string& phase, const std::string& message) {
  if (std::getenv("JOURNAL_STREAM") || std::getenv("INVOCATION_ID")) {
    sd_journal_send("MESSAGE=sprout-firstboot: %s", message.c_str(), "PRIORITY=%d", priority, "SPROUT_PHASE=%s",
                    phase.c_str(), "SYSLOG_IDENTIFIER=sprout-firstboot", nullptr);
  } else {
    std::fprintf(stderr, "sprout-firstboot: %s\n", message.c_str());
  }
}

// Failed logs why the run ends and shows it as the unit's status; returns code.
int Failed(const std::string& message, int code) {
  Log(LOG_ERR, "error", message);
  sd_notifyf(0, "STATUS=error: %s", message.c_str());
  return code;
}

// Inputs is everything settings resolution needs, read from the host beforehand.
struct Inputs {
  NodeConfig config;
  ClusterRecord record;
  settings::HostFacts facts;
};

// LoadState reads what the node remembers; this start counts as one more boot. A
// corrupt state.json (a status report, not the formation state) is moved aside to
// state.json.corrupt and the node starts with a fresh report rather than not at all.
Result<NodeState> LoadState(const std::filesystem::path& state_dir) {
  auto state = LoadNodeState(state_dir);
  if (!state && std::filesystem::exists(state_dir / "state.json")) {
    std::error_code ec;
    std::filesystem::rename(state_dir / "state.json", state_dir / "state.json.corrupt", ec);
    if (ec) return state;
    Log(LOG_WARNING, "config", state.error() + "; moved it to state.json.corrupt and started a fresh one");
    state = NodeState{};
  }
  if (state) state->boots += 1;
  return state;
}

// ReadInputs reads the node config sources (a broken source is skipped), the image's
// cluster record, the secret file and the host name.
Inputs ReadInputs(const settings::RunFlags& flags, bool log = true) {
  Inputs in;
  auto loaded = LoadNodeConfig();
  for (const auto& problem : loaded.problems) {
    if (log) Log(LOG_WARNING, "config", "ignoring a bad config source: " + problem);
  }
  for (const auto& [key, origin] : loaded.config.origin) {
    if (log) Log(LOG_INFO, "config", key + " set by the " + origin);
  }
  in.config = loaded.config;
  if (auto text = ReadFile(flags.cluster_file)) {
    if (auto r = ParseClusterRecord(*text)) {
      in.record = *r;
    } else {
      if (log) Log(LOG_WARNING, "config", flags.cluster_file.string() + ": " + r.error());
    }
  }
  if (!flags.secret_file.empty()) {
    if (auto text = ReadFile(flags.secret_file)) {
      in.facts.secret_file_text = *text;
    } else {
      in.facts.secret_file_error = text.error();
    }
  }
  if (!flags.worker_secret_file.empty()) {
    if (auto text = ReadFile(flags.worker_secret_file)) {
      in.facts.worker_secret_file_text = *text;
    } else {
      in.facts.worker_secret_file_error = text.error();
    }
  }
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) in.facts.host_name = host;
  in.facts.etcd_template = ReadFile(settings::kStaticPodTemplates / "etcd.yaml").ok();
  return in;
}

// ApplyHostname makes a configured hostname the node's name now and at the next boot
// (the initrd binds <state>/hostname over /etc/hostname).
void ApplyHostname(const std::string& name, const std::filesystem::path& state_dir) {
  auto current = ReadFile(state_dir / "hostname");
  if (current && *current == name + "\n") return;
  if (auto s = WriteFileAtomic(state_dir / "hostname", name + "\n"); !s) Log(LOG_WARNING, "config", s.error());
  if (::sethostname(name.c_str(), name.size()) != 0) {
    Log(LOG_WARNING, "config", "cannot set the hostname to " + name + ": " + std::strerror(errno));
  } else {
    Log(LOG_INFO, "config", "hostname set to " + name);
  }
}

// ApplyToSystem puts the node config onto this host: the hostname, the static address
// (systemd-networkd) and the SSH key. Only with --apply-system: a test's node shares
// its host with others and must leave it alone.
void ApplyToSystem(const NodeConfig& config, const std::filesystem::path& state_dir) {
  if (config.hostname) ApplyHostname(*config.hostname, state_dir);
  auto applied = ApplyNodeConfig(config);
  for (const auto& done : applied.done) Log(LOG_INFO, "config", done);
  for (const auto& problem : applied.problems) Log(LOG_WARNING, "config", problem);
}

// SaveStart records this boot in state.json and says so.
bool SaveStart(const std::filesystem::path& state_dir, const NodeState& state) {
  if (auto s = SaveNodeState(state_dir, state); !s) {
    Log(LOG_ERR, "error", s.error());
    return false;
  }
  Log(LOG_INFO, state.phase, "started (boot " + std::to_string(state.boots) + ", phase " + state.phase + ")");
  return true;
}

// SettingErrors ends the run on settings that cannot be used, naming every one.
int SettingErrors(const std::vector<settings::SettingError>& errors) {
  std::string all;
  for (const auto& e : errors) all += (all.empty() ? "" : "; ") + settings::Describe(e);
  for (const auto& e : errors) Log(LOG_ERR, "error", settings::Describe(e));
  sd_notifyf(0, "STATUS=error: %s", all.c_str());
  return 2;
}

// Idle records that formation is off (for `status`) and waits for the stop signal.
int Idle(const std::filesystem::path& state_dir, NodeState state, const std::string& reason) {
  state.phase = "disabled";
  if (auto s = SaveNodeState(state_dir, state); !s) Log(LOG_WARNING, "error", s.error());
  return formation::RunIdle(reason, &g_stop);
}

// ControlPlanePathsFor places the control plane's files: kubeadm's layout around the
// PKI folder formation fills, the templates and manifest folder from the flags.
kube::ControlPlanePaths ControlPlanePathsFor(const settings::RunFlags& flags, const formation::DaemonOptions& o) {
  kube::ControlPlanePaths paths;
  paths.pki_dir = o.pki_dir;
  paths.kubernetes_dir = o.pki_dir.parent_path();
  paths.templates = flags.templates_dir;
  paths.manifests = flags.manifests_dir;
  paths.audit_log_dir = flags.audit_log_dir;
  return paths;
}

std::int64_t CertValidity(const ClusterRecord& record) {
  return record.cert_validity_seconds > 0 ? record.cert_validity_seconds : pki::kDefaultLeafValiditySeconds;
}

kube::ControlPlaneNode ControlPlaneNodeFor(const formation::DaemonOptions& o, const ClusterRecord& record) {
  return kube::ControlPlaneNode{o.name,         {o.listen},      record.services_cidr,
                                o.cluster_name, "cluster.local", CertValidity(record)};
}

// StartCertRenewal starts, once per run, the thread that renews this control-plane
// node's certificates while it runs (firstboot/certs.h): the Kubernetes ones when the
// image has a control plane, etcd's always.
void StartCertRenewal(const kube::ControlPlanePaths& paths, const formation::DaemonOptions& o,
                      const ClusterRecord& record, bool kubernetes) {
  static std::once_flag once;
  std::call_once(once, [&] {
    CertsOptions c;
    c.paths = paths;
    c.node = ControlPlaneNodeFor(o, record);
    c.etcd = pki::NodeIdentity{o.name, {o.listen}, CertValidity(record)};
    c.kubernetes = kubernetes;
    // podman runs the static pods of a 1.20 image without a kubelet: nothing to restart
    // through containerd there; its components read the files at their next start.
    c.restart = record.pod_host == "kubelet";
    std::thread([c] {
      RunCertRenewal(c, &g_stop, [](int priority, const std::string& m) { Log(priority, "certificates", m); });
    }).detach();
  });
}

// KubeletPrepare is what a control-plane node's kubelet needs before it can run etcd:
// its kubeconfig (with the other control-plane files, kept when still good) and its
// per-node arguments (kubelet.env: the node's name and address, the control-plane
// taint), written beside the kubeconfigs.
std::function<Status()> KubeletPrepare(const settings::RunFlags& flags, const settings::NodeSettings& settings,
                                       const ClusterRecord& record) {
  return [flags, o = settings.formation, record]() -> Status {
    const auto paths = ControlPlanePathsFor(flags, o);
    auto issued = kube::WriteControlPlaneFiles(paths, ControlPlaneNodeFor(o, record));
    if (!issued) return Fail(issued.error());
    for (const auto& f : *issued) Log(LOG_INFO, "control-plane", "issued " + f);
    const std::string env = KubeletEnv(o.name, o.listen, o.control_plane);
    auto have = ReadFile(paths.kubernetes_dir / "kubelet.env");
    if (have && *have == env) return Ok{};
    return WriteFileAtomic(paths.kubernetes_dir / "kubelet.env", env);
  };
}

// PodHost says how etcd runs: as a static pod under the kubelet or podman-kube@ when the
// image carries its template and image, else as a child of this service (empty: the
// daemon's default).
std::function<std::unique_ptr<formation::EtcdLauncher>()> PodHost(const settings::RunFlags& flags,
                                                                  const settings::NodeSettings& settings,
                                                                  const ClusterRecord& record) {
  if (settings.etcd_launch != settings::EtcdLaunch::kStaticPod) return {};
  const bool kubelet = record.pod_host == "kubelet";
  Log(LOG_INFO, "config",
      "etcd runs as a static pod under " + std::string(kubelet ? "the kubelet" : "podman") + " from " +
          record.images.at("etcd"));
  auto prepare = kubelet ? KubeletPrepare(flags, settings, record) : std::function<Status()>{};
  return [images = record.images, cluster = settings.formation.cluster_name, manifests = flags.manifests_dir, kubelet,
          prepare] {
    StaticPodEtcdLauncher::Paths paths;
    paths.templates = settings::kStaticPodTemplates;
    paths.manifests = manifests;
    using Host = StaticPodEtcdLauncher::Host;
    return std::make_unique<StaticPodEtcdLauncher>(paths, images, cluster, kubelet ? Host::kKubelet : Host::kPodman,
                                                   prepare);
  };
}

// WaitForAnApiserver polls /readyz of each endpoint but self, with the admin
// kubeconfig's credentials, every 5 s, until one answers ok (it returns it), the
// stagger limit passes or the service stops (it returns "").
std::string WaitForAnApiserver(const std::filesystem::path& admin_conf, const std::vector<std::string>& endpoints,
                               const std::string& self) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kube::kApiserverStaggerLimitSeconds);
  while (!g_stop && std::chrono::steady_clock::now() < deadline) {
    auto text = ReadFile(admin_conf);  // written before etcd started; read again if not yet
    auto admin = kube::ParseKubeconfig(text ? *text : "");
    for (const auto& e : endpoints) {
      if (!admin || e == self) continue;
      auto k = *admin;
      k.server = e;
      auto r = kube::ApiRequest(k, "GET", "/readyz", "", "application/json", 10);
      if (r && r->status == 200) return e;
    }
    for (int i = 0; i < 50 && !g_stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return "";
}

// ControlPlane is the step a control-plane node runs once it is a voting etcd member:
// write the Kubernetes certificates and kubeconfigs and render the static pods of
// kube-apiserver, kube-controller-manager and kube-scheduler (lib/kube). An image
// without the Kubernetes components (no kube-apiserver in its cluster record) runs
// etcd only, and says so.
std::function<void(const formation::MemberInfo&)> ControlPlane(const settings::RunFlags& flags,
                                                               const settings::NodeSettings& settings,
                                                               const ClusterRecord& record) {
  if (!settings.formation.control_plane) return {};
  if (record.images.count("kube-apiserver") == 0) {
    Log(LOG_INFO, "config", "the image carries no Kubernetes control plane (no kube-apiserver image); etcd only");
    return [flags, o = settings.formation, record](const formation::MemberInfo&) {
      StartCertRenewal(ControlPlanePathsFor(flags, o), o, record, false);
    };
  }
  return [flags, o = settings.formation, record](const formation::MemberInfo& member) {
    const auto paths = ControlPlanePathsFor(flags, o);
    StaticPodInput pods;
    pods.node_name = o.name;
    pods.node_ip = o.listen;
    pods.cluster_name = o.cluster_name;
    pods.kubernetes_version = record.kubernetes_version;
    pods.pods_cidr = record.pods_cidr;
    pods.services_cidr = record.services_cidr;
    pods.etcd_members = {{o.name, o.listen}};  // the apiserver talks to its own node's etcd
    pods.images = record.images;
    pods.pki_dir = paths.pki_dir.string();
    pods.kubernetes_dir = paths.kubernetes_dir.string();
    pods.audit_log_dir = paths.audit_log_dir.string();
    auto write = [paths, node = ControlPlaneNodeFor(o, record), pods] {
      auto written = kube::WriteControlPlane(paths, node, pods);
      if (!written) {
        Log(LOG_ERR, "control-plane", "the control plane cannot start: " + written.error());
        return;
      }
      std::string issued;
      for (const auto& f : written->issued) issued += (issued.empty() ? "" : ", ") + f;
      std::string changed;
      for (const auto& m : written->manifests) changed += (changed.empty() ? "" : ", ") + m;
      Log(LOG_INFO, "control-plane",
          "control plane written to " + paths.manifests.string() + " (issued: " + (issued.empty() ? "none" : issued) +
              "; static pods changed: " + (changed.empty() ? "none" : changed) + ")");
    };
    StartCertRenewal(paths, o, record, true);
    std::error_code ec;
    const bool rendered_before = std::filesystem::exists(paths.manifests / "kube-apiserver.yaml", ec);
    if (kube::DecideApiserverStart(member.founder, rendered_before) == kube::ApiserverStart::kNow) return write();
    Log(LOG_INFO, "control-plane",
        "the founder's apiserver sets the cluster up first; this node starts its own once one answers /readyz (at "
        "most " +
            std::to_string(kube::kApiserverStaggerLimitSeconds / 60) + " minutes)");
    std::thread([write, admin = paths.kubernetes_dir / "admin.conf", endpoints = member.credentials.api_endpoints,
                 self = formation::ApiUrlOfHost(o.listen)] {
      const std::string ready = WaitForAnApiserver(admin, endpoints, self);
      if (g_stop) return;
      Log(LOG_INFO, "control-plane",
          ready.empty() ? "no other apiserver answered /readyz in time; starting this node's anyway"
                        : ready + " is ready; starting this node's apiserver");
      write();
    }).detach();
  };
}

// NodeAgent starts the node agent (firstboot/node_agent.h) on a kubelet node; on others
// it returns an empty thread.
std::thread NodeAgent(const settings::NodeSettings& settings, const ClusterRecord& record) {
  if (record.pod_host != "kubelet") return {};
  NodeAgentOptions o;
  o.node_name = settings.formation.name;
  o.node_ip = settings.formation.listen;
  o.cluster_name = settings.formation.cluster_name;
  o.control_plane = settings.formation.control_plane;
  o.kubernetes_dir = settings.formation.pki_dir.parent_path();
  o.pki_dir = settings.formation.pki_dir;
  o.state_dir = settings.formation.state_dir;
  o.networks = kube::PodNetworks{record.pods_cidr, record.nodes_cidr, record.services_cidr};
  o.master_label = kube::WantsMasterLabel(record.kubernetes_version);
  if (o.control_plane && record.images.count("coredns")) {
    std::string problem;
    if (auto in = kube::CoreDnsInputFor(record.images, record.services_cidr, record.pods_cidr); !in) {
      problem = in.error();
    } else if (auto objects = kube::CoreDnsObjects(*in); !objects) {
      problem = objects.error();
    } else {
      o.coredns = *objects;
    }
    if (!problem.empty()) Log(LOG_ERR, "kubernetes", "cluster DNS: no CoreDNS objects: " + problem);
  }
  return std::thread([o] {
    RunNodeAgent(o, &g_stop, [](int priority, const std::string& message) { Log(priority, "kubernetes", message); });
  });
}

// WorkloadsApplier starts the applier of the image's workloads (firstboot/workloads.h) on
// a control-plane node of an image with a Kubernetes control plane and a workloads index;
// on others it returns an empty thread. It runs beside the node agent and holds up
// nothing: it waits for the apiserver on its own.
std::thread WorkloadsApplier(const settings::NodeSettings& settings, const ClusterRecord& record) {
  WorkloadsOptions o;
  if (!settings.formation.control_plane || record.images.count("kube-apiserver") == 0 || !HasWorkloads(o)) return {};
  o.kubeconfig = settings.formation.pki_dir.parent_path() / "admin.conf";
  o.state_dir = settings.formation.state_dir;
  o.node_name = settings.formation.name;
  Log(LOG_INFO, "workloads",
      "the image carries workloads (" + (o.dir / "index.json").string() +
          "); this node applies them once its apiserver answers, one node at a time");
  return std::thread([o] {
    RunWorkloads(o, &g_stop, [](int priority, const std::string& message) { Log(priority, "workloads", message); });
  });
}

// WaitForLocalAddress polls the interfaces until one carries ip, or the time is up.
bool WaitForLocalAddress(const std::string& ip, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (LinkWithAddress(ip)) return true;
    if (std::chrono::steady_clock::now() >= deadline || g_stop) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// FormOrJoin runs formation until stopped: discover the peers, found or join etcd, and
// report (READY, STATUS, state.json). A static address was just handed to
// systemd-networkd, which applies it a moment later; joining the multicast group before
// then fails, so it first waits for the address (bounded).
int FormOrJoin(const settings::NodeSettings& settings, const NodeState& state) {
  const auto& o = settings.formation;
  sd_notifyf(0, "STATUS=waiting for address %s", o.listen.c_str());
  if (!WaitForLocalAddress(o.listen, std::chrono::seconds(30))) {
    return Idle(o.state_dir, state, "address " + o.listen + " is not on any interface after 30 s");
  }
  return formation::RunDaemon(o, &g_stop);
}

}  // namespace

settings::Resolved ResolveQuietly(const settings::RunFlags& flags) {
  const Inputs in = ReadInputs(flags, false);
  return settings::ResolveSettings(flags, in.config, in.record, in.facts);
}

int Run(const settings::RunFlags& flags, const BackupFlags& backup_flags) {
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  // 1. Load state: what this node remembers; this start is one more boot.
  auto state = LoadState(flags.state_dir);
  if (!state) return Failed(state.error(), 1);
  // 2. Resolve settings: flag > node config > cluster record > default (lib/node/settings.h).
  const Inputs in = ReadInputs(flags);
  auto resolved = settings::ResolveSettings(flags, in.config, in.record, in.facts);
  // 3. Apply the node config to this host, only when told to (the unit passes --apply-system).
  if (flags.apply_system) ApplyToSystem(in.config, flags.state_dir);
  if (!SaveStart(flags.state_dir, *state)) return 1;
  // 3a. A node whose state the TPM unlocked resets the TPM's dictionary-attack counter,
  // which every unclean shutdown raises: power cuts in a row must not lock it out.
  ResetTpmLockout([](int priority, const std::string& message) { Log(priority, "tpm", message); });
  if (!resolved.ok()) return SettingErrors(resolved.errors);
  settings::NodeSettings& settings = resolved.settings;
  if (!settings.idle_reason.empty()) return Idle(flags.state_dir, *state, settings.idle_reason);
  const BackupFlags backup = WithSettings(backup_flags, settings);
  // 4. Start the pod host: etcd runs on it as a static pod, or as a child process.
  settings.formation.make_launcher = PodHost(flags, settings, in.record);
  // 5. Once a voting member: the Kubernetes control plane's files and static pods.
  settings.formation.on_member = ControlPlane(flags, settings, in.record);
  // 6. On a kubelet node: keep the node's Kubernetes side in shape (label, pod network).
  std::thread agent = NodeAgent(settings, in.record);
  // 6a. On a control-plane node of an image with workloads: apply them, one node at a time.
  std::thread workloads = WorkloadsApplier(settings, in.record);
  // 7. Restore from a backup, when told to and this node has no etcd data yet: the bundle
  // must open and check out before anything starts.
  std::error_code ec;
  if (!backup.restore_from.empty() && settings.role == "control-plane" &&
      !std::filesystem::exists(settings.formation.etcd_data_dir / "member", ec)) {
    auto plan = PrepareRestore(settings, backup);
    if (!plan) {
      g_stop = 1;
      if (agent.joinable()) agent.join();
      if (workloads.joinable()) workloads.join();
      return Failed("restore-from " + backup.restore_from + " refused, starting nothing: " + plan.error(), 1);
    }
    Log(LOG_INFO, "restore",
        "restore-from " + backup.restore_from + ": the bundle opened and checked out; a founding member forms from it");
    // For the certificate approver (kube/csr_approval.h): worker names bound before now,
    // whose nodes are not heard from again, may be bound to new keys once.
    const auto now =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (auto w = WriteFileAtomic(settings.formation.state_dir / "restored-at", std::to_string(now) + "\n"); !w) {
      Log(LOG_WARNING, "restore",
          "cannot write " + (settings.formation.state_dir / "restored-at").string() + ": " + w.error());
    }
    settings.formation.restore = std::move(*plan);
  }
  // 8. On a control-plane node with a backup folder: scheduled backups, taken by the etcd
  // leader and copied to the other members; every control-plane node keeps such copies.
  if (settings.role == "control-plane")
    settings.formation.store_backup_copy = BackupCopyStoreFor(settings, backup.keep);
  std::thread backups = StartBackupScheduler(settings, backup, &g_stop);
  // 9. Form or join, then report until stopped.
  const int code = FormOrJoin(settings, *state);
  g_stop = 1;
  if (agent.joinable()) agent.join();
  if (workloads.joinable()) workloads.join();
  if (backups.joinable()) backups.join();
  return code;
}

}  // namespace sprout::firstboot
