// sprout-firstboot: runs on every node at every boot. `run` is the node's life
// (firstboot/run.h): load state, resolve settings, apply the node config, start the pod
// host, form or join. `status` and `config` show what it knows.
#include <cstdio>
#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "firstboot/certs.h"
#include "firstboot/clock.h"
#include "firstboot/dns.h"
#include "firstboot/run.h"
#include "firstboot/tpm.h"
#include "firstboot/update.h"
#include "firstboot/workloads.h"
#include "formationd/state_file.h"
#include "formationd/transport.h"
#include "nodeconfig/sources.h"
#include "pki/pki.h"
#include "util/fs.h"
#include "util/text.h"

namespace {

// ShowConfig prints the node's merged settings and where each came from; the secret's
// bytes are never shown.
int ShowConfig() {
  auto loaded = sprout::LoadNodeConfig();
  sprout::NodeConfig shown = loaded.config;
  shown.cluster_secret.reset();
  shown.worker_secret.reset();
  std::string text = sprout::RenderNodeConfig(shown);
  for (const auto& line : sprout::Split(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    std::string key = line.substr(0, line.find('='));
    std::cout << line << "  (" << loaded.config.origin[key] << ")\n";
  }
  if (loaded.config.cluster_secret) {
    std::cout << "cluster-secret=(" << loaded.config.cluster_secret->size() << " bytes)  ("
              << loaded.config.origin["cluster-secret"] << ")\n";
  }
  if (loaded.config.worker_secret) {
    std::cout << "worker-secret=(set)  (" << loaded.config.origin["worker-secret"] << ")\n";
  }
  for (const auto& p : loaded.problems) std::cout << "problem: " << p << "\n";
  return 0;
}

// ClusterCa is the cluster CA as this node knows it, for `status`: a control-plane node's
// own ca.crt, or the one a worker was handed, and a worker's pin.
struct ClusterCa {
  std::string hash;        // pki::SpkiSha256 of the CA file; "" none
  std::string file;        // the file it was read from
  bool worker = false;     // the worker's copy (<state>/worker/ca.crt)
  std::string pin;         // a worker's ca-cert-hash; "" none
  std::string pin_source;  // where the pin came from
};

ClusterCa ReadClusterCa(const sprout::settings::RunFlags& flags) {
  ClusterCa out;
  const std::filesystem::path control_plane = std::filesystem::path(flags.pki_dir) / "ca.crt";
  const std::filesystem::path worker = flags.state_dir / "worker" / "ca.crt";
  std::error_code ec;
  out.worker = !std::filesystem::exists(control_plane, ec) &&
               (std::filesystem::exists(worker, ec) || std::filesystem::exists(flags.state_dir / "worker", ec));
  out.file = (out.worker ? worker : control_plane).string();
  if (auto text = sprout::ReadFile(out.file)) {
    if (auto hash = sprout::pki::SpkiSha256(*text)) out.hash = *hash;
  }
  auto resolved = sprout::firstboot::ResolveQuietly(flags);
  if (resolved.settings.role == "worker") {
    out.worker = true;
    out.pin = resolved.settings.formation.ca_cert_hash;
    out.pin_source = resolved.settings.formation.ca_cert_hash_source;
  }
  return out;
}

// ClusterCaLines is what `status` prints about the cluster CA: its hash, which workers
// pin, and on a worker whether it is pinned.
std::string ClusterCaLines(const ClusterCa& ca) {
  std::string out;
  if (!ca.worker) {
    if (ca.hash.empty()) return "";
    return "cluster CA: " + ca.hash + " (" + ca.file + "; workers pin it: sprout personalize IMAGE --role worker " +
           "--ca-cert-hash " + ca.hash + ", derived already when they are personalized with the cluster secret " +
           "of a cluster formed by this version)\n";
  }
  if (!ca.hash.empty()) out += "cluster CA: " + ca.hash + " (" + ca.file + ")\n";
  if (ca.pin.empty()) {
    out +=
        "cluster CA pin: none: this worker trusts the first CA a join endpoint hands it; pin it with sprout "
        "personalize IMAGE --role worker --ca-cert-hash HASH (the hash `sprout-firstboot status` prints on a "
        "control-plane node)\n";
  } else {
    out += "cluster CA pin: " + ca.pin + " (" + ca.pin_source + ")" +
           (ca.hash.empty() || ca.hash == ca.pin ? std::string() : "; the CA held is NOT the pinned one") + "\n";
  }
  return out;
}

int Status(const sprout::settings::RunFlags& flags, bool json) {
  const std::filesystem::path& state_dir = flags.state_dir;
  auto state = sprout::LoadNodeState(state_dir);
  if (!state) {
    std::cerr << "sprout-firstboot: " << state.error() << "\n";
    return 1;
  }
  // The node agent's view of the Kubernetes side, on kubelet nodes (firstboot/node_agent.h).
  auto kube_text = sprout::ReadFile(state_dir / "kubernetes.json");
  nlohmann::ordered_json kube;
  if (kube_text) kube = nlohmann::ordered_json::parse(*kube_text, nullptr, false);
  if (json) {
    auto j = nlohmann::ordered_json::parse(sprout::NodeStateJson(*state), nullptr, false);
    auto dns_text = sprout::ReadFile(state_dir / "dns.json");
    if (dns_text && j.is_object()) {
      auto d = nlohmann::ordered_json::parse(*dns_text, nullptr, false);
      if (!d.is_discarded()) j["dns"] = d;
    }
    // The workloads applier's last pass (firstboot/workloads.h), on control-plane nodes.
    auto workloads_text = sprout::ReadFile(state_dir / "workloads.json");
    if (workloads_text && j.is_object()) {
      auto w = nlohmann::ordered_json::parse(*workloads_text, nullptr, false);
      if (!w.is_discarded()) j["workloads"] = w;
    }
    const ClusterCa ca = ReadClusterCa(flags);
    if (j.is_object() && (!ca.hash.empty() || ca.worker)) {
      j["clusterCA"] = {{"hash", ca.hash}, {"file", ca.file}};
      if (ca.worker) j["clusterCA"]["pin"] = ca.pin;
    }
    if (!kube.is_discarded() && kube.is_object() && j.is_object()) {
      j["kubernetes"] = kube;
    }
    if (j.is_object()) {
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << sprout::NodeStateJson(*state);
    }
    return 0;
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s.empty() ? std::string("-") : s;
  };
  std::cout << "phase: " << state->phase << "\nboots: " << state->boots << "\n";
  if (!state->name.empty()) std::cout << "node: " << state->name << " (" << state->address << ")\n";
  if (state->expected > 0) {
    std::cout << "control-plane peers up: " << state->up_peers << " (+ this node) of " << state->expected << "\n";
  }
  std::cout << "peers seen: " << join(state->peers_up) << "\n";
  if (!state->warning.empty()) std::cout << "warning: " << state->warning << "\n";
  if (auto line = sprout::firstboot::StateLine(); !line.empty()) std::cout << "state: " << line << "\n";
  if (auto line = sprout::firstboot::TpmLine(); !line.empty()) std::cout << "tpm: " << line << "\n";
  if (!state->cluster_token.empty()) {
    std::cout << "cluster: " << state->cluster_token << ", founder " << state->founder
              << "\nfounding members: " << join(state->members) << " (etcd member list: the full membership)\n";
  }
  std::cout << ClusterCaLines(ReadClusterCa(flags));
  std::cout << sprout::firstboot::BackupStatusLines(state_dir);
  std::cout << sprout::firstboot::SlotStatusText(state_dir);
  std::cout << sprout::firstboot::DnsStatusLines(state_dir);
  if (!kube.is_discarded() && kube.is_object()) {
    std::cout << "kubernetes:\n  apiserver: " << kube.value("apiserver", "?")
              << "\n  node: " << kube.value("node", "?");
    if (kube.contains("podCIDR")) std::cout << ", pod subnet " << kube.value("podCIDR", "");
    if (kube.contains("nodes")) std::cout << " (" << kube["nodes"].get<int>() << " nodes in the cluster)";
    std::vector<std::string> pods;
    if (kube.contains("staticPods")) pods = kube["staticPods"].get<std::vector<std::string>>();
    std::cout << "\n  static pods: " << join(pods) << "\n";
    if (kube.contains("dns")) std::cout << "  dns: " << kube.value("dns", "") << "\n";
    if (!kube.value("problem", "").empty()) std::cout << "  waiting: " << kube.value("problem", "") << "\n";
  }
  std::cout << sprout::firstboot::WorkloadsStatusLines(state_dir);
  return 0;
}

// Backup runs `backup now` or `backup list` with the node's resolved settings.
int Backup(const sprout::settings::RunFlags& flags, const sprout::firstboot::BackupFlags& backup,
           const std::string& sub) {
  if (sub != "now" && sub != "list") {
    std::cerr << "sprout-firstboot: backup needs 'now' or 'list' (got '" << sub << "')\n";
    return 2;
  }
  auto resolved = sprout::firstboot::ResolveQuietly(flags);
  if (!resolved.ok()) {
    for (const auto& e : resolved.errors) std::cerr << "sprout-firstboot: " << sprout::settings::Describe(e) << "\n";
    return 2;
  }
  auto b = sprout::firstboot::WithSettings(backup, resolved.settings);
  if (sub == "list") return sprout::firstboot::BackupList(resolved.settings, b);
  if (!resolved.settings.idle_reason.empty()) {
    std::cerr << "sprout-firstboot: backup: this node is not configured: " << resolved.settings.idle_reason << "\n";
    return 1;
  }
  return sprout::firstboot::BackupNow(resolved.settings, b);
}

}  // namespace

namespace {

// NodeArgs are the flags of the commands that act on this node's settings and state.
struct NodeArgs {
  sprout::settings::RunFlags flags;
  sprout::firstboot::BackupFlags backup;
  std::string subcommand;  // backup: now | list
  bool json = false;       // status --json
};

// Command is one row of sprout-firstboot's command table: --help lists it, and Main runs
// the row named by the first argument (run without one). A command either parses its
// own flags (own_main: update, dns) or takes the node's flags (with_flags).
struct Command {
  const char* name;
  const char* synopsis;
  const char* summary;
  int (*own_main)(int argc, char** argv);
  int (*with_flags)(const NodeArgs& n);
};

const Command kCommands[] = {
    {"run", "run [flags]", "form or join the cluster, then keep it (the systemd unit runs this)", nullptr,
     [](const NodeArgs& n) { return sprout::firstboot::Run(n.flags, n.backup); }},
    {"status", "status [--json]",
     "phase, peers, the state and its TPM, cluster and its CA's hash, backups, slots, DNS, Kubernetes, workloads",
     nullptr, [](const NodeArgs& n) { return Status(n.flags, n.json); }},
    {"config", "config", "the node's merged settings and where each came from (never the secret)", nullptr,
     [](const NodeArgs&) { return ShowConfig(); }},
    {"backup", "backup now|list", "take an etcd backup now, or list this cluster's bundles", nullptr,
     [](const NodeArgs& n) { return Backup(n.flags, n.backup, n.subcommand); }},
    {"update", "update COMMAND ...", "A/B updates of this node (sprout-firstboot update --help)",
     sprout::firstboot::UpdateMain, nullptr},
    {"certs", "certs [--renew]", "the node's certificates: lifetimes, renewal (sprout-firstboot certs --help)",
     sprout::firstboot::CertsMain, nullptr},
    {"dns", "dns [flags]", "the cluster DNS controller (sprout-firstboot dns --help)", sprout::firstboot::DnsMain,
     nullptr},
    {"workloads", "workloads [--apply-once]",
     "the site's workloads in the image: their state, or one pass now (sprout-firstboot workloads --help)",
     sprout::firstboot::WorkloadsMain, nullptr},
    {"clock", "clock", "in a VM, check the TSC's rate against another clock; use that clock if it is off",
     sprout::firstboot::ClockMain, nullptr},
};

// Intro is the top of --help: what the program is and its commands, from the table.
std::string Intro() {
  std::string out = "Runs on every sprout node at boot: discovers peers and forms or joins the cluster.\n\nCommands:\n";
  for (const auto& c : kCommands) {
    std::string line = std::string("  sprout-firstboot ") + c.synopsis;
    line.append(line.size() < 40 ? 40 - line.size() : 1, ' ');
    out += line + c.summary + "\n";
  }
  return out;
}

const Command* Find(const std::string& name) {
  for (const auto& c : kCommands) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

int Main(int argc, char** argv) {
  if (argc > 1) {
    const Command* own = Find(argv[1]);
    if (own && own->own_main) return own->own_main(argc - 1, argv + 1);
  }
  cxxopts::Options options("sprout-firstboot", Intro());
  options.add_options()("state-dir", "where the node keeps its state",
                        cxxopts::value<std::string>()->default_value("/var/lib/sprout"))(
      "command", "one of the commands above", cxxopts::value<std::string>()->default_value("run"))(
      "subcommand", "backup: now | list", cxxopts::value<std::string>()->default_value(""))(
      "name", "node name (default: configured hostname, else the host name)", cxxopts::value<std::string>())(
      "listen", "this node's IPv4 address (default: sprout.address)", cxxopts::value<std::string>())(
      "peers",
      "static peer addresses, comma-separated (default: sprout.peers); the list is the electorate: only listed "
      "nodes vote, a node not on it is a spare and joins as a learner",
      cxxopts::value<std::string>())("expected",
                                     "expected control-plane count (default: number of peers incl. this node, else 3)",
                                     cxxopts::value<int>()->default_value("0"))(
      "max-control-planes",
      "without --peers: the most control-plane nodes that may power on at once (default: the Shoot's "
      "controlPlane.maximum); a founding needs a majority of it, and one cluster is guaranteed only while at most "
      "this many take part. With neither --peers nor a maximum this node refuses to found (it still joins a cluster "
      "others found); `status` says so",
      cxxopts::value<int>()->default_value("0"))(
      "secret-file", "file holding the cluster secret (default: sprout.cluster-secret)", cxxopts::value<std::string>())(
      "worker-secret-file", "worker: file holding the worker secret (default: sprout.worker-secret)",
      cxxopts::value<std::string>())(
      "ca-cert-hash",
      "worker: the cluster CA's pin, sha256:HEX (default: sprout.ca-cert-hash, else derived from a cluster "
      "secret given to the worker); a join endpoint handing out another CA is refused. Without one the worker "
      "trusts the first CA it is handed, and warns",
      cxxopts::value<std::string>())(
      "cluster-name", "cluster identity (default: the Shoot's name from the cluster file, else sprout)",
      cxxopts::value<std::string>())("cluster-file", "the image's cluster record (Shoot fields and component images)",
                                     cxxopts::value<std::string>()->default_value("/usr/share/sprout/cluster.json"))(
      "etcd-launch",
      "how etcd runs: auto (a static pod when the image has its template and image), process, "
      "static-pod",
      cxxopts::value<std::string>()->default_value("auto"))("etcd-bin", "etcd executable",
                                                            cxxopts::value<std::string>()->default_value("etcd"))(
      "etcd-data-dir", "etcd data directory (default: <state-dir>/etcd)", cxxopts::value<std::string>())(
      "role", "control-plane | worker (default: sprout.role, else control-plane)", cxxopts::value<std::string>())(
      "pki-dir", "cluster PKI in kubeadm's layout (the node's /etc is read-only: point it under /var)",
      cxxopts::value<std::string>()->default_value("/etc/kubernetes/pki"))(
      "group", "formation multicast group (empty: unicast to peers only)",
      cxxopts::value<std::string>()->default_value(sprout::formation::kDefaultGroup))(
      "port", "formation UDP port",
      cxxopts::value<int>()->default_value(std::to_string(sprout::formation::kDefaultPort)))(
      "templates",
      "the static-pod templates of the control plane (kube-apiserver, kube-controller-manager, kube-scheduler)",
      cxxopts::value<std::string>()->default_value(sprout::settings::kStaticPodTemplates.string()))(
      "manifests-dir", "where the control plane's static pods are written for the pod host",
      cxxopts::value<std::string>()->default_value("/etc/kubernetes/manifests"))(
      "audit-log-dir", "where the control plane's kube-apiserver writes its audit log (rotated)",
      cxxopts::value<std::string>()->default_value("/var/log/kubernetes/audit"))(
      "apply-system",
      "run: apply the node config to this host (hostname, static address, SSH key); the systemd unit "
      "passes it, tests leave the host alone")(
      "backup-dir",
      "backups: where bundles go: a folder, or an NFS share as nfs://HOST/PATH[?uid=N&gid=N] (default: "
      "sprout.backup-dir, else the profile's backup.dir)",
      cxxopts::value<std::string>())("backup-keep",
                                     "backups: how many good bundles retention keeps (default: the profile's, else 7)",
                                     cxxopts::value<int>())(
      "backup-interval",
      "run: seconds between scheduled backups, taken by the etcd leader (0: none; default: the profile's)",
      cxxopts::value<long>())("scheduled",
                              "backup now: take the current slot's scheduled bundle (slots of --backup-interval)")(
      "restore-from",
      "run: a backup bundle (a path or nfs://HOST/PATH/NAME; default: sprout.restore-from); as a founding member "
      "with no etcd data, form the cluster from it",
      cxxopts::value<std::string>())("etcdctl", "backups: the etcdctl used for the test restore",
                                     cxxopts::value<std::string>()->default_value("etcdctl"))(
      "json", "status: print JSON")("h,help", "show this help");
  options.parse_positional({"command", "subcommand"});
  options.positional_help("[COMMAND] [backup: now|list]");
  cxxopts::ParseResult args;
  try {
    args = options.parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "sprout-firstboot: " << e.what() << "\n" << options.help();
    return 2;
  }
  if (args.count("help")) {
    std::cout << options.help();
    return 0;
  }
  std::string command = args["command"].as<std::string>();
  const Command* c = Find(command);
  if (!c) {
    std::string names;
    for (const auto& k : kCommands) names += (names.empty() ? "" : ", ") + std::string(k.name);
    std::cerr << "sprout-firstboot: unknown command '" << command << "'; the commands are " << names
              << " (sprout-firstboot --help)\n";
    return 2;
  }
  if (!c->with_flags) {
    std::cerr << "sprout-firstboot: " << command << " comes first and takes its own flags: sprout-firstboot " << command
              << " --help\n";
    return 2;
  }
  auto str = [&](const char* key) { return args.count(key) ? args[key].as<std::string>() : std::string(); };
  NodeArgs n;
  sprout::settings::RunFlags& s = n.flags;
  s.state_dir = args["state-dir"].as<std::string>();
  s.name = str("name");
  s.listen = str("listen");
  s.peers = str("peers");
  s.expected = args["expected"].as<int>();
  s.electorate = args["max-control-planes"].as<int>();
  s.secret_file = str("secret-file");
  s.worker_secret_file = str("worker-secret-file");
  s.ca_cert_hash = str("ca-cert-hash");
  s.cluster_name = str("cluster-name");
  s.cluster_file = args["cluster-file"].as<std::string>();
  s.etcd_launch = args["etcd-launch"].as<std::string>();
  s.etcd_bin = args["etcd-bin"].as<std::string>();
  s.etcd_data_dir = str("etcd-data-dir");
  s.pki_dir = args["pki-dir"].as<std::string>();
  s.role = str("role");
  s.group = args["group"].as<std::string>();
  s.port = args["port"].as<int>();
  s.templates_dir = args["templates"].as<std::string>();
  s.manifests_dir = args["manifests-dir"].as<std::string>();
  s.audit_log_dir = args["audit-log-dir"].as<std::string>();
  s.apply_system = args.count("apply-system") > 0;
  s.backup_dir = str("backup-dir");
  if (args.count("backup-interval")) s.backup_interval = args["backup-interval"].as<long>();
  if (args.count("backup-keep")) s.backup_keep = args["backup-keep"].as<int>();
  s.restore_from = str("restore-from");
  // The rest of the backup flags comes from the resolved settings (WithSettings).
  n.backup.etcdctl = args["etcdctl"].as<std::string>();
  n.backup.scheduled = args.count("scheduled") > 0;
  n.subcommand = args["subcommand"].as<std::string>();
  n.json = args.count("json") > 0;
  return c->with_flags(n);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    // Anything unexpected still ends with a message, never an abort.
    std::fprintf(stderr, "%s: %s\n", "sprout-firstboot", e.what());
    return 1;
  }
}
