#include "firstboot/certs.h"

#include <syslog.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cxxopts.hpp>
#include <iostream>
#include <map>
#include <thread>

#include "formationd/state_file.h"
#include "kube/api.h"
#include "kube/renewal.h"
#include "settings/cluster.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/text.h"

namespace sprout::firstboot {

namespace fs = std::filesystem;

namespace {

std::int64_t Now() { return static_cast<std::int64_t>(std::time(nullptr)); }

// Lifetimes is every leaf certificate the node holds with its validity: pki/*.crt and
// etcd/*.crt (the CAs left out) and each kubeconfig's client certificate.
std::map<std::string, pki::Validity> Lifetimes(const CertsOptions& o) {
  std::map<std::string, pki::Validity> out;
  std::vector<std::pair<std::string, std::string>> certs;  // name, PEM
  for (const auto& [path, request] : pki::EtcdNodeRequests(o.etcd)) {
    if (auto text = ReadFile(o.paths.pki_dir / (path + ".crt"))) certs.emplace_back(path + ".crt", *text);
  }
  if (o.kubernetes) {
    for (const auto& rel : kube::ControlPlaneFilePaths()) {
      if (rel.ends_with(".crt")) {
        if (auto text = ReadFile(o.paths.pki_dir / rel.substr(4))) certs.emplace_back(rel.substr(4), *text);
      } else if (rel.ends_with(".conf")) {
        auto text = ReadFile(o.paths.kubernetes_dir / rel);
        auto k = text ? kube::ParseKubeconfig(*text) : Fail("absent");
        if (k && !k->cert_pem.empty()) certs.emplace_back("../" + rel, k->cert_pem);
      }
    }
  }
  for (const auto& [name, pem] : certs) {
    if (auto v = pki::CertValidity(pem)) out[name] = *v;
  }
  return out;
}

// Restart starts a component again: the kubelet through systemd, a static pod's
// container by stopping it through containerd (the kubelet starts it again at once).
Status Restart(const CertsOptions& o, const std::string& component) {
  if (component == "kubelet") {
    auto r = Run(Command{{o.systemctl, "restart", "kubelet.service"}});
    if (!r) return Fail(r.error());
    if (r->exit_code != 0) return Fail("systemctl restart kubelet.service: " + r->output);
    return Ok{};
  }
  auto ids = Run(Command{
      {o.ctr, "-n", "k8s.io", "containers", "ls", "-q", "labels.\"io.kubernetes.container.name\"==" + component}});
  if (!ids) return Fail(ids.error());
  if (ids->exit_code != 0) return Fail("ctr containers ls: " + ids->output);
  int stopped = 0;
  for (const auto& id : Split(ids->output, '\n')) {
    if (Trim(id).empty()) continue;
    // A container that already exited has no task; only the running one matters.
    auto k = Run(Command{{o.ctr, "-n", "k8s.io", "tasks", "kill", "--signal", "SIGTERM", std::string(Trim(id))}});
    if (k && k->exit_code == 0) ++stopped;
  }
  if (stopped == 0) return Fail("no running container of " + component + " to stop");
  return Ok{};
}

}  // namespace

Result<RenewalReport> RenewOnce(const CertsOptions& o) {
  auto cas = pki::LoadCAs(o.paths.pki_dir);
  if (!cas) return Fail("certificate renewal needs the cluster CAs: " + cas.error());
  RenewalReport report;
  std::vector<std::string> kube_issued;
  if (o.kubernetes) {
    auto issued = kube::WriteControlPlaneFiles(o.paths, o.node);
    if (!issued) return Fail(issued.error());
    for (const auto& f : *issued) {
      if (f.ends_with(".crt") || f.ends_with(".conf") || f.ends_with(".key")) kube_issued.push_back(f);
    }
  }
  std::map<std::string, std::string> existing;
  for (const auto& [path, request] : pki::EtcdNodeRequests(o.etcd)) {
    for (const char* ext : {".crt", ".key"}) {
      if (auto text = ReadFile(o.paths.pki_dir / (path + ext))) existing[path + ext] = *text;
    }
  }
  auto etcd = pki::UpdateNodeFiles(*cas, o.etcd, existing, Now());
  if (!etcd) return Fail(etcd.error());
  if (auto s = pki::WritePkiFiles(o.paths.pki_dir, *etcd); !s) return Fail(s.error());
  report.issued = kube_issued;
  for (const auto& f : *etcd) report.issued.push_back("pki/" + f.path);
  if (o.restart) {
    for (const auto& c : kube::RestartsFor(kube_issued)) {
      if (auto s = Restart(o, c); s) {
        report.restarted.push_back(c);
      } else {
        report.problems.push_back(c + ": " + s.error());
      }
    }
  }
  std::vector<std::int64_t> due;
  for (const auto& [name, v] : Lifetimes(o)) due.push_back(pki::RenewalTime(v));
  report.next_in = kube::NextCheckIn(due, Now());
  return report;
}

void RunCertRenewal(const CertsOptions& o, const volatile std::sig_atomic_t* stop, const CertsLog& log) {
  std::string last_problem;
  while (!*stop) {
    std::int64_t wait = 60;
    auto r = RenewOnce(o);
    if (!r) {
      if (r.error() != last_problem) log(LOG_ERR, "certificate renewal failed, retried in a minute: " + r.error());
      last_problem = r.error();
    } else {
      last_problem.clear();
      if (!r->issued.empty()) {
        std::string issued, restarted;
        for (const auto& f : r->issued) issued += (issued.empty() ? "" : ", ") + f;
        for (const auto& c : r->restarted) restarted += (restarted.empty() ? "" : ", ") + c;
        log(LOG_NOTICE,
            "certificates renewed: " + issued + "; started again: " +
                (restarted.empty() ? "none (etcd and kube-apiserver read the new files themselves)" : restarted));
      }
      for (const auto& p : r->problems) log(LOG_WARNING, "after renewing certificates, cannot start again " + p);
      wait = r->next_in;
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(wait);
    while (!*stop && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int CertsMain(int argc, char** argv) {
  cxxopts::Options options(
      "sprout-firstboot certs",
      "The node's own leaf certificates and kubeconfigs: each one's lifetime and when it is renewed (two thirds\n"
      "into its lifetime). A control-plane node renews them by itself while it runs (docs/control-plane.md);\n"
      "--renew runs that pass now. Examples:\n"
      "  sprout-firstboot certs\n"
      "  sprout-firstboot certs --renew\n");
  options.add_options()("renew", "renew what is due now (and what lives longer than --validity), then list")(
      "no-restart", "with --renew: do not start kube-controller-manager, kube-scheduler or the kubelet again")(
      "pki-dir", "the cluster PKI in kubeadm's layout; the kubeconfigs are in its parent folder",
      cxxopts::value<std::string>()->default_value("/etc/kubernetes/pki"))(
      "state-dir", "where the node keeps its state (its name and address, for --name and --address)",
      cxxopts::value<std::string>()->default_value("/var/lib/sprout"))(
      "name", "the node's name (default: from the state)", cxxopts::value<std::string>())(
      "address", "the node's address (default: from the state)", cxxopts::value<std::string>())(
      "cluster-file", "the image's cluster record (services network, certificates.validity)",
      cxxopts::value<std::string>()->default_value("/usr/share/sprout/cluster.json"))(
      "validity", "the lifetime in seconds of what --renew issues (default: the cluster record's, else a year)",
      cxxopts::value<std::int64_t>())("etcd-only",
                                      "the node has no Kubernetes control plane: etcd's certificates only")(
      "ctr", "containerd's ctr", cxxopts::value<std::string>()->default_value("ctr"))("h,help", "show this help");
  cxxopts::ParseResult args;
  try {
    args = options.parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "sprout-firstboot certs: " << e.what() << "\n" << options.help();
    return 2;
  }
  if (args.count("help")) {
    std::cout << options.help();
    return 0;
  }
  CertsOptions o;
  o.paths.pki_dir = args["pki-dir"].as<std::string>();
  o.paths.kubernetes_dir = o.paths.pki_dir.parent_path();
  o.kubernetes = args.count("etcd-only") == 0;
  o.restart = args.count("no-restart") == 0;
  o.ctr = args["ctr"].as<std::string>();
  auto state = LoadNodeState(args["state-dir"].as<std::string>());
  std::string name = args.count("name") ? args["name"].as<std::string>() : (state ? state->name : "");
  std::string address = args.count("address") ? args["address"].as<std::string>() : (state ? state->address : "");
  if (name.empty() || address.empty()) {
    std::cerr << "sprout-firstboot certs: the node's name or address is unknown (no state in "
              << args["state-dir"].as<std::string>() << "); give --name and --address\n";
    return 2;
  }
  std::string services = "10.96.0.0/12", cluster = "sprout";
  std::int64_t validity = pki::kDefaultLeafValiditySeconds;
  if (auto text = ReadFile(args["cluster-file"].as<std::string>())) {
    if (auto record = ParseClusterRecord(*text)) {
      if (!record->services_cidr.empty()) services = record->services_cidr;
      if (!record->name.empty()) cluster = record->name;
      if (record->cert_validity_seconds > 0) validity = record->cert_validity_seconds;
    }
  }
  if (args.count("validity")) validity = args["validity"].as<std::int64_t>();
  if (validity < 60) {
    std::cerr << "sprout-firstboot certs: --validity " << validity << " is under a minute; give 60 or more\n";
    return 2;
  }
  o.node = kube::ControlPlaneNode{name, {address}, services, cluster, "cluster.local", validity};
  o.etcd = pki::NodeIdentity{name, {address}, validity};
  if (args.count("renew")) {
    auto r = RenewOnce(o);
    if (!r) {
      std::cerr << "sprout-firstboot certs: " << r.error() << "\n";
      return 1;
    }
    std::cout << "renewed: " << (r->issued.empty() ? "nothing was due" : "") << "\n";
    for (const auto& f : r->issued) std::cout << "  " << f << "\n";
    for (const auto& c : r->restarted) std::cout << "started again: " << c << "\n";
    for (const auto& p : r->problems) std::cout << "could not start again: " << p << "\n";
    if (!r->problems.empty()) return 1;
  }
  const auto now = Now();
  std::cout << "certificate                          lifetime    renewed at (UTC)       left\n";
  for (const auto& [file, v] : Lifetimes(o)) {
    char at[32] = {};
    const std::time_t t = pki::RenewalTime(v);
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::strftime(at, sizeof at, "%Y-%m-%d %H:%M:%S", &tm);
    const std::int64_t left = pki::RenewalTime(v) - now;
    std::string label = file.starts_with("../") ? file.substr(3) : file;
    label.resize(std::max<std::size_t>(label.size(), 36), ' ');
    std::string life = std::to_string((v.not_after - v.not_before) / 86400) + "d";
    if (v.not_after - v.not_before < 86400) life = std::to_string(v.not_after - v.not_before) + "s";
    life.resize(std::max<std::size_t>(life.size(), 11), ' ');
    std::cout << label << " " << life << " " << at << "    "
              << (left <= 0      ? "due"
                  : left < 86400 ? std::to_string(left) + "s"
                                 : std::to_string(left / 86400) + "d")
              << "\n";
  }
  return 0;
}

}  // namespace sprout::firstboot
