// sprout-firstboot: runs on every node at every boot. It loads its state and the
// node's configuration, then runs formation (lib/formation/daemon.h): discover peers,
// elect the founder, start etcd. With no cluster secret it stays up idle.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <cxxopts.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "formation/daemon.h"
#include "node/cluster.h"
#include "node/state.h"
#include "nodeconfig/apply.h"
#include "nodeconfig/sources.h"
#include "staticpod/etcd_pod.h"
#include "util/fs.h"
#include "util/text.h"

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

// WaitForLocalAddress polls the interfaces until one carries ip, or the time is up.
bool WaitForLocalAddress(const std::string& ip, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    struct ifaddrs* list = nullptr;
    bool found = false;
    if (::getifaddrs(&list) == 0) {
      for (auto* a = list; a != nullptr && !found; a = a->ifa_next) {
        if (a->ifa_addr == nullptr) continue;
        char text[INET6_ADDRSTRLEN] = {};
        const void* raw = nullptr;
        if (a->ifa_addr->sa_family == AF_INET) {
          raw = &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr;
        } else if (a->ifa_addr->sa_family == AF_INET6) {
          raw = &reinterpret_cast<const sockaddr_in6*>(a->ifa_addr)->sin6_addr;
        }
        if (raw && ::inet_ntop(a->ifa_addr->sa_family, raw, text, sizeof text) && ip == text) found = true;
      }
      ::freeifaddrs(list);
    }
    if (found) return true;
    if (std::chrono::steady_clock::now() >= deadline || g_stop) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// ApplyHostname makes a configured hostname the node's name now and at the next boot
// (the initrd binds <state>/hostname over /etc/hostname).
void ApplyHostname(const std::string& name, const std::string& state_dir) {
  auto current = sprout::ReadFile(std::filesystem::path(state_dir) / "hostname");
  if (current && *current == name + "\n") return;
  if (auto s = sprout::WriteFileAtomic(std::filesystem::path(state_dir) / "hostname", name + "\n"); !s) {
    Log(LOG_WARNING, "config", s.error());
  }
  if (::sethostname(name.c_str(), name.size()) != 0) {
    Log(LOG_WARNING, "config", "cannot set the hostname to " + name + ": " + std::strerror(errno));
  } else {
    Log(LOG_INFO, "config", "hostname set to " + name);
  }
}

// Settings is what the command line says; unset values come from the node config.
struct Settings {
  std::string state_dir;
  std::string name;
  std::string listen;
  std::string peers;
  int expected = 0;
  std::string secret_file;
  std::string cluster_name;
  std::string etcd_bin;
  std::string etcd_data_dir;
  std::string pki_dir;
  std::string role;
  std::string cluster_file;
  std::string etcd_launch;
  std::string group;
  int port = 0;
};

// StripPrefix drops a "/24" from an address with prefix length.
std::string StripPrefix(const std::string& a) { return a.substr(0, a.find('/')); }

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(StripPrefix(s.substr(start, end - start)));
    start = end + 1;
  }
  return out;
}

int Run(const Settings& settings) {
  const std::string& state_dir = settings.state_dir;
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  auto state = sprout::LoadNodeState(state_dir);
  if (!state) {
    Log(LOG_ERR, "error", state.error());
    sd_notifyf(0, "STATUS=error: %s", state.error().c_str());
    return 1;
  }
  state->boots += 1;

  // Per-node settings given at flashing or boot time; a broken source is skipped.
  auto loaded = sprout::LoadNodeConfig();
  for (const auto& problem : loaded.problems) Log(LOG_WARNING, "config", "ignoring a bad config source: " + problem);
  for (const auto& [key, origin] : loaded.config.origin) Log(LOG_INFO, "config", key + " set by the " + origin);
  if (loaded.config.hostname) ApplyHostname(*loaded.config.hostname, state_dir);
  // The static address and the SSH key; only on a real node (tests pass --state-dir).
  if (state_dir == "/var/lib/sprout") {
    auto applied = sprout::ApplyNodeConfig(loaded.config);
    for (const auto& done : applied.done) Log(LOG_INFO, "config", done);
    for (const auto& problem : applied.problems) Log(LOG_WARNING, "config", problem);
  }
  if (auto s = sprout::SaveNodeState(state_dir, *state); !s) {
    Log(LOG_ERR, "error", s.error());
    return 1;
  }
  Log(LOG_INFO, state->phase, "started (boot " + std::to_string(state->boots) + ", phase " + state->phase + ")");

  // idle records that formation is off (for `status`) and waits for the stop signal.
  auto idle = [&](const std::string& reason) {
    state->phase = "disabled";
    if (auto s = sprout::SaveNodeState(state_dir, *state); !s) Log(LOG_WARNING, "error", s.error());
    return sprout::formation::RunIdle(reason, &g_stop);
  };

  // Formation settings: flags win over the node config.
  namespace f = sprout::formation;
  f::DaemonOptions o;
  o.state_dir = state_dir;
  std::string secret;
  if (!settings.secret_file.empty()) {
    auto text = sprout::ReadFile(settings.secret_file);
    if (!text) {
      Log(LOG_ERR, "error", text.error());
      return 1;
    }
    secret = *text;
    while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  } else if (loaded.config.cluster_secret) {
    secret = *loaded.config.cluster_secret;
  }
  if (secret.empty()) return idle("no cluster secret configured");
  o.secret = secret;
  o.listen = !settings.listen.empty() ? settings.listen : StripPrefix(loaded.config.address.value_or(""));
  if (o.listen.empty()) return idle("no node address configured (sprout.address or --listen)");
  o.name = settings.name;
  if (o.name.empty() && loaded.config.hostname) o.name = *loaded.config.hostname;
  if (o.name.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0) o.name = host;
  }
  if (!settings.peers.empty()) {
    o.peers = SplitCommas(settings.peers);
  } else if (loaded.config.peers) {
    for (const auto& p : *loaded.config.peers) o.peers.push_back(StripPrefix(p));
  }
  // The image's cluster record: the Shoot's name and control-plane count, and images.
  sprout::ClusterRecord record;
  if (auto text = sprout::ReadFile(settings.cluster_file)) {
    if (auto r = sprout::ParseClusterRecord(*text)) {
      record = *r;
    } else {
      Log(LOG_WARNING, "config", settings.cluster_file + ": " + r.error());
    }
  }
  if (settings.expected > 0) {
    o.expected = settings.expected;
  } else if (!o.peers.empty()) {
    std::set<std::string> all(o.peers.begin(), o.peers.end());
    all.insert(o.listen);
    o.expected = static_cast<int>(all.size());
  } else if (record.expected_control_planes > 0) {
    o.expected = record.expected_control_planes;
  }
  std::string role = !settings.role.empty() ? settings.role : loaded.config.role.value_or("control-plane");
  if (role != "control-plane" && role != "worker") {
    Log(LOG_ERR, "error", "role '" + role + "' is neither 'control-plane' nor 'worker'; fix --role or sprout.role");
    return 2;
  }
  o.control_plane = role != "worker";
  o.cluster_name =
      !settings.cluster_name.empty() ? settings.cluster_name : (!record.name.empty() ? record.name : "sprout");
  o.etcd_bin = settings.etcd_bin;
  o.etcd_data_dir = !settings.etcd_data_dir.empty() ? std::filesystem::path(settings.etcd_data_dir)
                                                    : std::filesystem::path(state_dir) / "etcd";
  o.pki_dir = settings.pki_dir;
  o.group = settings.group;
  if (settings.port <= 0 || settings.port > 65535) {
    Log(LOG_ERR, "error", "--port must be 1-65535");
    return 2;
  }
  o.port = static_cast<std::uint16_t>(settings.port);
  // etcd runs as a static pod (podman-kube@) when the image carries the etcd template
  // and a preloaded etcd image, else as a child process (tests, development hosts).
  const std::filesystem::path templates = "/usr/share/sprout/staticpods";
  const bool pod_possible = record.images.count("etcd") != 0 && sprout::ReadFile(templates / "etcd.yaml").ok();
  if (settings.etcd_launch == "static-pod" || (settings.etcd_launch == "auto" && pod_possible)) {
    if (!pod_possible) {
      Log(LOG_ERR, "error",
          "--etcd-launch=static-pod needs " + (templates / "etcd.yaml").string() + " and an etcd image in " +
              settings.cluster_file);
      return 2;
    }
    o.make_launcher = [record, cluster = o.cluster_name, templates] {
      sprout::StaticPodEtcdLauncher::Paths paths;
      paths.templates = templates;
      return std::make_unique<sprout::StaticPodEtcdLauncher>(paths, record.images, cluster);
    };
    Log(LOG_INFO, "config", "etcd runs as a static pod from " + record.images.at("etcd"));
  } else if (settings.etcd_launch != "auto" && settings.etcd_launch != "process") {
    Log(LOG_ERR, "error", "--etcd-launch must be auto, process or static-pod");
    return 2;
  }
  // A static address was just handed to systemd-networkd, which applies it a moment
  // later; joining the multicast group before then fails, so wait for it (bounded).
  sd_notifyf(0, "STATUS=waiting for address %s", o.listen.c_str());
  if (!WaitForLocalAddress(o.listen, std::chrono::seconds(30))) {
    return idle("address " + o.listen + " is not on any interface after 30 s");
  }
  return f::RunDaemon(o, &g_stop);
}

// ShowConfig prints the node's merged settings and where each came from; the secret's
// bytes are never shown.
int ShowConfig() {
  auto loaded = sprout::LoadNodeConfig();
  sprout::NodeConfig shown = loaded.config;
  shown.cluster_secret.reset();
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
  for (const auto& p : loaded.problems) std::cout << "problem: " << p << "\n";
  return 0;
}

int Status(const std::string& state_dir, bool json) {
  auto state = sprout::LoadNodeState(state_dir);
  if (!state) {
    std::cerr << "sprout-firstboot: " << state.error() << "\n";
    return 1;
  }
  if (json) {
    std::cout << sprout::NodeStateJson(*state);
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
  if (!state->cluster_token.empty()) {
    std::cout << "cluster: " << state->cluster_token << ", founder " << state->founder
              << "\nfounding members: " << join(state->members) << " (etcd member list: the full membership)\n";
  }
  return 0;
}

}  // namespace

namespace {

int Main(int argc, char** argv) {
  cxxopts::Options options("sprout-firstboot",
                           "Runs on every sprout node at boot: discovers peers and forms or joins the cluster.\n");
  options.add_options()("state-dir", "where the node keeps its state",
                        cxxopts::value<std::string>()->default_value("/var/lib/sprout"))(
      "command", "run | status", cxxopts::value<std::string>()->default_value("run"))(
      "name", "node name (default: configured hostname, else the host name)", cxxopts::value<std::string>())(
      "listen", "this node's IPv4 address (default: sprout.address)", cxxopts::value<std::string>())(
      "peers", "static peer addresses, comma-separated (default: sprout.peers)", cxxopts::value<std::string>())(
      "expected", "expected control-plane count (default: number of peers incl. this node, else 3)",
      cxxopts::value<int>()->default_value("0"))(
      "secret-file", "file holding the cluster secret (default: sprout.cluster_secret)", cxxopts::value<std::string>())(
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
      "json", "status: print JSON")("h,help", "show this help");
  options.parse_positional({"command"});
  options.positional_help("[run|status|config]");
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
  auto str = [&](const char* key) { return args.count(key) ? args[key].as<std::string>() : std::string(); };
  std::string command = args["command"].as<std::string>();
  Settings s;
  s.state_dir = args["state-dir"].as<std::string>();
  s.name = str("name");
  s.listen = str("listen");
  s.peers = str("peers");
  s.expected = args["expected"].as<int>();
  s.secret_file = str("secret-file");
  s.cluster_name = str("cluster-name");
  s.cluster_file = args["cluster-file"].as<std::string>();
  s.etcd_launch = args["etcd-launch"].as<std::string>();
  s.etcd_bin = args["etcd-bin"].as<std::string>();
  s.etcd_data_dir = str("etcd-data-dir");
  s.pki_dir = args["pki-dir"].as<std::string>();
  s.role = str("role");
  s.group = args["group"].as<std::string>();
  s.port = args["port"].as<int>();
  if (command == "run") return Run(s);
  if (command == "status") return Status(s.state_dir, args.count("json") > 0);
  if (command == "config") return ShowConfig();
  std::cerr << "sprout-firstboot: unknown command '" << command << "'; use 'run' or 'status'\n";
  return 2;
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
