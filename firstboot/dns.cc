#include "firstboot/dns.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <syslog.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <ctime>
#include <cxxopts.hpp>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "dns/query.h"
#include "dns/records.h"
#include "dns/zone.h"
#include "kube/api.h"
#include "kube/coredns.h"
#include "settings/cluster.h"
#include "util/fs.h"
#include "util/json_field.h"
#include "util/process.h"
#include "util/text.h"

namespace sprout::firstboot {

// What dns.json says of a kind whose watch runs (a problem's text otherwise).
constexpr std::string_view kWatching = "watching";

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::atomic<bool> g_dns_stop{false};

void OnDnsSignal(int) { g_dns_stop = true; }

void Log(int priority, const std::string& message) {
  if (std::getenv("JOURNAL_STREAM") || std::getenv("INVOCATION_ID")) {
    sd_journal_send("MESSAGE=sprout-firstboot dns: %s", message.c_str(), "PRIORITY=%d", priority,
                    "SYSLOG_IDENTIFIER=sprout-firstboot", nullptr);
  } else {
    std::fprintf(stderr, "sprout-firstboot dns: %s\n", message.c_str());
  }
}

// Sleep waits up to d, returning early when the controller is told to stop.
void Sleep(std::chrono::milliseconds d) {
  for (auto end = Clock::now() + d; Clock::now() < end && !g_dns_stop;) {
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
        std::chrono::milliseconds(100),
        std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()) + std::chrono::milliseconds(1)));
  }
}

// Ask sends one query to the server and reads the header of its answer (the health
// check): "" when it answered NOERROR with at least one record, else what went wrong.
std::string Ask(const dns::DnsConfig& c, const std::string& name) {
  static std::mt19937 random{std::random_device{}()};
  const auto id = static_cast<std::uint16_t>(random());
  const std::string query = dns::QueryPacket(id, name, 16);
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "no socket";
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(c.port));
  std::string problem;
  if (inet_pton(AF_INET, c.listen.c_str(), &to.sin_addr) != 1) {
    problem = "the listen address " + c.listen + " is not IPv4";
  } else if (sendto(fd, query.data(), query.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) < 0) {
    problem = std::string("cannot send to it: ") + std::strerror(errno);
  } else {
    pollfd p{fd, POLLIN, 0};
    std::string answer(1500, '\0');
    if (poll(&p, 1, 1000) != 1) {
      problem = "no answer within 1 s";
    } else {
      const ssize_t n = recv(fd, answer.data(), answer.size(), 0);
      if (n < 0) {
        problem = std::string("no answer: ") + std::strerror(errno);
      } else {
        answer.resize(static_cast<std::size_t>(n));
        auto h = dns::ParseAnswerHeader(answer, id);
        if (!h) {
          problem = h.error();
        } else if (h->rcode != 0 || h->answers == 0) {
          problem = "it answered rcode " + std::to_string(h->rcode) + " with " + std::to_string(h->answers) +
                    " records (its zones are not loaded)";
        }
      }
    }
  }
  close(fd);
  return problem;
}

// Controller holds the watched objects and what the writer last did; the watchers and
// the writer share it under mu.
class Controller {
 public:
  Controller(DnsOptions o, dns::DnsConfig c) : o_(std::move(o)), c_(std::move(c)) {}

  // Watch keeps kind's objects current: list, then watch from the list's version;
  // relists when the server says the version is gone, retries on any failure.
  void Watch(dns::Kind kind) {
    const std::string name = dns::KindName(kind);
    auto backoff = std::chrono::milliseconds(500);
    while (!g_dns_stop) {
      auto problem = ListAndWatch(kind);
      SetApi(name, problem);
      if (g_dns_stop) break;
      Sleep(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(10000));
      if (problem.empty()) backoff = std::chrono::milliseconds(500);
    }
  }

  // Write renders the zones whenever objects changed (debounced), and checks the
  // server every few seconds; it runs until the controller stops.
  void Write() {
    WriteInitialZones();
    std::uint64_t done = ~std::uint64_t{0};
    auto next_check = Clock::now();
    while (!g_dns_stop) {
      bool due = false;
      {
        // Wakes for a change once every kind has been listed, or after a second (the
        // health check, a reload to retry, the stop flag).
        std::unique_lock lock(mu_);
        due = changed_.wait_for(lock, std::chrono::seconds(1),
                                [&] { return (generation_ != done && synced_.size() == 3) || g_dns_stop; });
      }
      if (!pending_reload_.empty()) Reload({});
      if (due && !g_dns_stop) {
        Sleep(std::chrono::milliseconds(o_.debounce_ms));  // let a burst of events settle
        std::unique_lock lock(mu_);
        const std::uint64_t gen = generation_;
        const dns::Objects snapshot = objects_;
        lock.unlock();
        if (Render(snapshot)) {
          done = gen;
        } else {
          Sleep(std::chrono::seconds(1));  // a zone file could not be written: try again, not at once
        }
      }
      if (Clock::now() >= next_check) {
        Check();
        next_check = Clock::now() + std::chrono::seconds(5);
      }
    }
  }

 private:
  DnsOptions o_;
  dns::DnsConfig c_;
  std::mutex mu_;
  std::condition_variable changed_;
  dns::Objects objects_;
  std::uint64_t generation_ = 0;
  std::map<std::string, std::string> api_;  // kind -> "" (watching) or its problem
  std::map<std::string, bool> synced_;      // kind -> listed at least once
  bool own_pods_logged_ = false;            // said once that only this node's Pods are listed
  // The writer's own state (only its thread touches these).
  std::map<std::string, std::string> written_;  // zone -> text without its serial
  std::uint32_t serial_ = 0;
  std::size_t records_ = 0;
  std::vector<std::string> skipped_;
  std::string server_ = "not checked yet";
  std::string reload_problem_;
  std::set<std::string> pending_reload_;  // zones written but not yet reloaded
  std::string status_written_;

  // SetApi records a watch's state; a problem is logged when it changes, compared
  // without the times in it, so a retry that fails the same way logs nothing.
  void SetApi(const std::string& kind, const std::string& problem) {
    std::lock_guard lock(mu_);
    auto& have = api_[kind];
    if (WithoutTimings(have) != WithoutTimings(problem) && !problem.empty()) {
      Log(LOG_WARNING, kind + ": " + problem + " (retrying)");
    }
    have = problem;
  }

  void Changed(const std::function<void(dns::Objects&)>& change) {
    {
      std::lock_guard lock(mu_);
      change(objects_);
      ++generation_;
    }
    changed_.notify_all();
  }

  // ListAndWatch returns why it stopped ("" when the server ended a watch in order).
  std::string ListAndWatch(dns::Kind kind) {
    const std::string name = dns::KindName(kind);
    auto text = ReadFile(o_.kubeconfig);
    if (!text) return "waiting for " + o_.kubeconfig.string();
    auto k = kube::ParseKubeconfig(*text);
    if (!k) return k.error();
    // The newest API version the server serves (a 404 tries the next).
    std::string list_path;
    Result<kube::ApiResponse> list = Fail("no API path");
    for (const auto& path : dns::ListPaths(kind)) {
      list_path = path;
      list = kube::ApiRequest(*k, "GET", path, "", "application/json", 60);
      if (!list) return list.error();
      if (list->status != 404) break;
    }
    // From Kubernetes 1.32 the node authorizer lets a node list only its own pods (a
    // spec.nodeName field selector). A node's server then has the pod records of the pods
    // on it, which are the ones that ask it (it answers only on its own node).
    if (kind == dns::Kind::kPod && list->status == 403) {
      char host[256] = {};
      if (::gethostname(host, sizeof host - 1) == 0 && host[0] != '\0') {
        list_path = dns::OwnPodsPath(host);
        list = kube::ApiRequest(*k, "GET", list_path, "", "application/json", 60);
        if (!list) return list.error();
        if (list->status == 200 && !own_pods_logged_) {
          own_pods_logged_ = true;
          Log(LOG_INFO,
              "the API lets this node list only its own Pods (the node authorizer of Kubernetes 1.32+): "
              "pod records are those of the pods on " +
                  std::string(host));
        }
      }
    }
    if (list->status != 200) {
      return "listing " + name + "s (" + list_path + ") answered HTTP " + std::to_string(list->status);
    }
    auto j = nlohmann::json::parse(list->body, nullptr, false);
    if (j.is_discarded()) return "the " + name + " list is not JSON";
    std::string version;
    if (j.is_object() && j.contains("metadata")) version = JsonString(j["metadata"], "resourceVersion").value_or("");
    std::string problem;
    Changed([&](dns::Objects& o) {
      if (auto s = dns::ReplaceAll(o, kind, j); !s) problem = s.error();
    });
    if (!problem.empty()) return problem;
    {
      std::lock_guard lock(mu_);
      synced_[name] = true;
    }
    SetApi(name, "");
    // Watch from that version until the server ends the watch, then go on from the
    // last version seen; a 410 (the version is too old) lists again.
    while (!g_dns_stop) {
      bool relist = false;
      std::string event_problem;
      auto on_line = [&](const std::string& line) {
        auto e = nlohmann::json::parse(line, nullptr, false);
        if (e.is_discarded() || !e.is_object()) {
          event_problem = "a watch event of " + name + "s is not JSON";
          return false;
        }
        const std::string type = JsonString(e, "type").value_or("");
        const nlohmann::json& obj = e.contains("object") ? e["object"] : e;
        if (type == "ERROR" || JsonString(e, "kind").value_or("") == "Status") {
          relist = true;  // 410 Gone, or any error the server sends in the stream
          return false;
        }
        if (obj.is_object() && obj.contains("metadata")) {
          version = JsonString(obj["metadata"], "resourceVersion").value_or(version);
        }
        if (type == "BOOKMARK") return true;
        std::string problem_here;
        Changed([&](dns::Objects& o) {
          if (auto s = dns::Apply(o, kind, obj, type == "DELETED"); !s) problem_here = s.error();
        });
        if (!problem_here.empty()) Log(LOG_WARNING, problem_here);
        return true;
      };
      const std::string path = list_path + (list_path.find('?') == std::string::npos ? "?" : "&") +
                               "watch=1&allowWatchBookmarks=true&timeoutSeconds=300&resourceVersion=" + version;
      auto status = kube::ApiStream(
          *k, path, on_line, [] { return !g_dns_stop; }, 330);
      if (!status) return status.error();
      if (!event_problem.empty()) return event_problem;
      if (relist) return "";
      if (*status != 200 && *status != 0) return "watching " + name + "s answered HTTP " + std::to_string(*status);
    }
    return "";
  }

  // WriteInitialZones gives knotd zones to serve from the first second of the very
  // first boot (no records yet: authoritative NXDOMAIN); zones already on disk (any
  // later boot) are left as they are, so the last known names answer at once.
  void WriteInitialZones() {
    const auto files = dns::ZoneFiles(c_, dns::ClusterRecords(dns::Objects{}, c_.domain).records,
                                      static_cast<std::uint32_t>(std::time(nullptr)));
    std::vector<std::string> wrote;
    std::error_code ec;
    fs::create_directories(o_.zones_dir, ec);
    for (const auto& [zone, text] : files) {
      const fs::path file = o_.zones_dir / (zone + ".zone");
      if (fs::exists(file, ec)) continue;
      if (auto s = WriteFileAtomic(file, text); !s) {
        Log(LOG_ERR, s.error());
        continue;
      }
      wrote.push_back(zone);
    }
    Reload(wrote);
  }

  // Render writes every zone whose records changed and has knotd reload those;
  // false when a zone file could not be written (the next round tries again).
  bool Render(const dns::Objects& objects) {
    const auto records = dns::ClusterRecords(objects, c_.domain);
    const auto unserialled = dns::ZoneFiles(c_, records.records, 0);
    std::vector<std::string> changed;
    for (const auto& [zone, text] : unserialled) {
      if (written_[zone] != text) changed.push_back(zone);
    }
    records_ = records.records.size();
    if (records.skipped != skipped_) {
      for (const auto& s : records.skipped) Log(LOG_WARNING, "left out of the zone: " + s);
      skipped_ = records.skipped;
    }
    if (changed.empty()) return true;
    serial_ = std::max<std::uint32_t>(serial_ + 1, static_cast<std::uint32_t>(std::time(nullptr)));
    const auto files = dns::ZoneFiles(c_, records.records, serial_);
    bool ok = true;
    std::vector<std::string> wrote;
    for (const auto& zone : changed) {
      if (auto s = WriteFileAtomic(o_.zones_dir / (zone + ".zone"), files.at(zone)); !s) {
        Log(LOG_ERR, s.error());
        ok = false;
        continue;
      }
      wrote.push_back(zone);
    }
    for (const auto& zone : wrote) written_[zone] = unserialled.at(zone);
    Reload(wrote);  // a failed reload is kept and retried every second
    return ok;
  }

  // Reload has knotd load zones, and any whose reload failed before (knotd not yet up:
  // its socket comes a while after it starts on a slow node); those are kept for the
  // next try, once a second.
  void Reload(const std::vector<std::string>& zones) {
    pending_reload_.insert(zones.begin(), zones.end());
    if (pending_reload_.empty()) return;
    Command cmd{{o_.knotc, "-s", (o_.run_dir / "knot.sock").string(), "zone-reload"}};
    for (const auto& z : pending_reload_) cmd.argv.push_back(z);
    auto run = Run(cmd);
    std::string problem;
    if (!run) {
      problem = run.error();
    } else if (run->exit_code != 0) {
      problem = "knotc zone-reload failed: " + std::string(Trim(run->output));
    }
    if (WithoutTimings(problem) != WithoutTimings(reload_problem_)) {
      if (!problem.empty()) Log(LOG_WARNING, problem + " (the zone files are written; retrying)");
      reload_problem_ = problem;
    }
    if (problem.empty()) pending_reload_.clear();
  }

  void Check() {
    const std::string problem = Ask(c_, "dns-version." + c_.domain + ".");
    const std::string now = problem.empty() ? "answering" : "not answering: " + problem;
    if (now != server_) Log(problem.empty() ? LOG_INFO : LOG_WARNING, "the server at " + c_.listen + " is " + now);
    server_ = now;
    nlohmann::ordered_json j;
    j["server"] = server_;
    j["listen"] = c_.listen;
    j["domain"] = c_.domain;
    {
      std::lock_guard lock(mu_);
      nlohmann::ordered_json api = nlohmann::ordered_json::object();
      for (const auto& [kind, p] : api_) api[kind] = p.empty() ? std::string(kWatching) : p;
      j["api"] = api;
      j["services"] = objects_.services.size();
      j["endpointSlices"] = objects_.slices.size();
      j["pods"] = objects_.pods.size();
    }
    j["records"] = records_;
    j["serial"] = serial_;
    j["leftOut"] = skipped_;
    if (!reload_problem_.empty()) j["reload"] = reload_problem_;
    const std::string text = j.dump(2) + "\n";
    if (text != status_written_ && WriteFileAtomic(o_.state_dir / "dns.json", text)) status_written_ = text;
  }
};

// PrintCoreDns prints the CoreDNS objects for the cluster record in file (--print-coredns).
int PrintCoreDns(const std::string& file) {
  std::string problem;
  std::string list;
  if (auto text = ReadFile(file); !text) {
    problem = text.error();
  } else if (auto record = ParseClusterRecord(*text); !record) {
    problem = record.error();
  } else if (auto in = kube::CoreDnsInputFor(record->images, record->services_cidr, record->pods_cidr); !in) {
    problem = in.error();
  } else if (auto out = kube::CoreDnsList(*in); !out) {
    problem = out.error();
  } else {
    list = *out;
  }
  if (!problem.empty()) {
    std::cerr << "sprout-firstboot dns: " << file << ": " << problem << "\n";
    return 2;
  }
  std::cout << list;
  return 0;
}

}  // namespace

int DnsMain(int argc, char** argv) {
  DnsOptions o;
  cxxopts::Options options(
      "sprout-firstboot dns",
      "The node's cluster DNS controller (docs/dns.md): watches Services, EndpointSlices and Pods\n"
      "through the API and keeps the zone files of the node's knotd current.\n");
  options.add_options()("config", "the cluster's DNS settings, baked by sprout build",
                        cxxopts::value<std::string>()->default_value(o.config.string()))(
      "kubeconfig", "credentials to read the API with (waited for until it exists)",
      cxxopts::value<std::string>()->default_value(o.kubeconfig.string()))(
      "zones-dir", "where knotd reads the zone files",
      cxxopts::value<std::string>()->default_value(o.zones_dir.string()))(
      "run-dir", "knotd's run folder (its control socket knot.sock)",
      cxxopts::value<std::string>()->default_value(o.run_dir.string()))(
      "state-dir", "where dns.json goes for `sprout-firstboot status`",
      cxxopts::value<std::string>()->default_value(o.state_dir.string()))(
      "knotc", "knotd's control program", cxxopts::value<std::string>()->default_value(o.knotc))(
      "print-knot-config",
      "print knotd's configuration for --config, --zones-dir and --run-dir, with its database "
      "in the folder given, and exit (the build bakes the same text)",
      cxxopts::value<std::string>())(
      "print-coredns",
      "on an image with CoreDNS: print the objects a control-plane node creates for it (a v1 List "
      "for `kubectl apply -f -`) from the cluster record given (/usr/share/sprout/cluster.json), and exit",
      cxxopts::value<std::string>())("h,help", "show this help");
  cxxopts::ParseResult args;
  try {
    args = options.parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "sprout-firstboot dns: " << e.what() << "\n" << options.help();
    return 2;
  }
  if (args.count("help")) {
    std::cout << options.help();
    return 0;
  }
  if (args.count("print-coredns")) return PrintCoreDns(args["print-coredns"].as<std::string>());
  o.config = args["config"].as<std::string>();
  o.kubeconfig = args["kubeconfig"].as<std::string>();
  o.zones_dir = args["zones-dir"].as<std::string>();
  o.run_dir = args["run-dir"].as<std::string>();
  o.state_dir = args["state-dir"].as<std::string>();
  o.knotc = args["knotc"].as<std::string>();
  auto text = ReadFile(o.config);
  if (!text) {
    std::cerr << "sprout-firstboot dns: " << text.error() << " (the image's DNS settings; sprout build writes them)\n";
    return 2;
  }
  auto config = dns::ParseDnsConfig(*text);
  if (!config) {
    std::cerr << "sprout-firstboot dns: " << o.config.string() << ": " << config.error() << "\n";
    return 2;
  }
  if (args.count("print-knot-config")) {
    std::cout << dns::KnotConfig(*config, o.zones_dir.string(), args["print-knot-config"].as<std::string>(),
                                 o.run_dir.string());
    return 0;
  }
  std::signal(SIGTERM, OnDnsSignal);
  std::signal(SIGINT, OnDnsSignal);
  Log(LOG_INFO, "serving " + config->domain + " and " + std::to_string(config->zones.size() - 1) +
                    " reverse zones at " + config->listen + ", from " + o.kubeconfig.string());
  Controller controller(o, *config);
  std::vector<std::thread> watchers;
  for (auto kind : {dns::Kind::kService, dns::Kind::kEndpointSlice, dns::Kind::kPod}) {
    watchers.emplace_back([&controller, kind] { controller.Watch(kind); });
  }
  controller.Write();
  for (auto& t : watchers) t.join();
  return 0;
}

std::string DnsStatusLines(const fs::path& state_dir) {
  auto text = ReadFile(state_dir / "dns.json");
  if (!text) return "";
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "dns: (dns.json is unreadable)\n";
  std::string out = "dns:\n  server: " + j.value("server", "?") + " (" + j.value("listen", "?") + ", " +
                    j.value("domain", "?") + ")\n";
  // Kinds in the same state share one entry ("EndpointSlice, Pod, Service watching"), so
  // an apiserver that is down reads once, not once a kind.
  std::vector<std::pair<std::string, std::string>> states;  // state, its kinds, in first-seen order
  if (j.contains("api") && j["api"].is_object()) {
    for (const auto& [kind, state] : j["api"].items()) {
      const std::string said = state.is_string() ? state.get<std::string>() : "?";
      auto it = std::find_if(states.begin(), states.end(), [&](const auto& s) { return s.first == said; });
      if (it == states.end()) {
        states.emplace_back(said, kind);
      } else {
        it->second += ", " + kind;
      }
    }
  }
  std::string api;
  for (const auto& [said, kinds] : states) {
    api += (api.empty() ? "" : "; ") + kinds + (said == kWatching ? " " : ": ") + said;
  }
  out += "  api: " + (api.empty() ? std::string("not reached yet") : api) + "\n";
  out += "  records: " + std::to_string(j.value("records", 0)) + " from " + std::to_string(j.value("services", 0)) +
         " services, " + std::to_string(j.value("endpointSlices", 0)) + " endpoint slices, " +
         std::to_string(j.value("pods", 0)) + " pods (serial " + std::to_string(j.value("serial", 0)) + ")\n";
  if (j.contains("leftOut") && j["leftOut"].is_array() && !j["leftOut"].empty()) {
    out += "  left out: " + std::to_string(j["leftOut"].size()) + " (see the journal)\n";
  }
  if (j.contains("reload")) out += "  reload: " + j.value("reload", "") + "\n";
  return out;
}

}  // namespace sprout::firstboot
