#include "settings/settings.h"

#include <catch2/catch.hpp>
#include <functional>

#include "formation/auth.h"
#include "pki/pki.h"
#include "util/text.h"

namespace sprout::settings {
namespace {

// Inputs is one row's input: every layer starts empty, so the defaults decide.
struct Inputs {
  RunFlags flags;
  NodeConfig config;
  ClusterRecord record;
  HostFacts facts;
};

using Setup = std::function<void(Inputs&)>;

Inputs Make(const Setup& setup) {
  Inputs in;
  in.flags.state_dir = "/state";
  in.facts.host_name = "host-name";
  setup(in);
  return in;
}

// Value renders one resolved setting as text, so that one table holds every setting.
std::string Value(const NodeSettings& s, const std::string& setting) {
  const auto& o = s.formation;
  if (setting == "secret") return o.secret;
  if (setting == "worker secret") return o.worker_secret;
  if (setting == "listen") return o.listen;
  if (setting == "name") return o.name;
  if (setting == "peers") return Join(o.peers, ",");
  if (setting == "expected") return std::to_string(o.expected);
  if (setting == "max control planes") return std::to_string(o.electorate);
  if (setting == "role") return s.role + (o.control_plane ? " (control plane)" : " (no control plane)");
  if (setting == "cluster name") return o.cluster_name;
  if (setting == "etcd data dir") return o.etcd_data_dir.string();
  if (setting == "port") return std::to_string(o.port);
  if (setting == "etcd launch") return s.etcd_launch == EtcdLaunch::kStaticPod ? "static-pod" : "process";
  if (setting == "backup dir") return s.backup.sink;
  if (setting == "backup interval") return std::to_string(s.backup.interval);
  if (setting == "backup keep") return std::to_string(s.backup.keep);
  if (setting == "restore from") return s.backup.restore_from;
  if (setting == "ca cert hash") return o.ca_cert_hash;
  return "unknown setting " + setting;
}

struct PrecedenceCase {
  const char* name;
  Setup setup;
  const char* setting;
  const char* value;
  const char* origin;
};

// Shorthands for the rows: a secret given by file, and a node config key with its source.
void SecretFile(Inputs& in, const std::string& text) {
  in.flags.secret_file = "/run/secret";
  in.facts.secret_file_text = text;
}
void FromCmdline(Inputs& in, const std::string& key) { in.config.origin[key] = "kernel command line"; }

TEST_CASE("ResolveSettings precedence table: flag > node config > cluster record > default, per setting",
          "[node][settings]") {
  const std::vector<PrecedenceCase> cases = {
      // secret
      {"secret: the flag's file beats the node config",
       [](Inputs& in) {
         SecretFile(in, "from-file\n");
         in.config.cluster_secret = "from-config";
       },
       "secret", "from-file", "flag"},
      {"secret: the file's trailing CR and LF are dropped", [](Inputs& in) { SecretFile(in, "s3cret\r\n"); }, "secret",
       "s3cret", "flag"},
      {"secret: the node config when no flag",
       [](Inputs& in) {
         in.config.cluster_secret = "from-config";
         FromCmdline(in, "cluster-secret");
       },
       "secret", "from-config", "node config (kernel command line)"},
      {"secret: none by default", [](Inputs&) {}, "secret", "", "default"},
      // worker secret
      {"worker secret: a control-plane node derives it from the cluster secret",
       [](Inputs& in) { SecretFile(in, "s3cret-0123456789\n"); }, "worker secret",
       "ba880e710a35ca014c6bf8618972d84f9676b0d73bbd0b385e7039437b284b77", "derived from the cluster secret (flag)"},
      {"worker secret: the flag's file beats the node config",
       [](Inputs& in) {
         in.flags.role = "worker";
         in.flags.worker_secret_file = "/run/worker";
         in.facts.worker_secret_file_text = std::string(64, 'a') + "\n";
         in.config.worker_secret = std::string(64, 'b');
       },
       "worker secret", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "flag"},
      {"worker secret: the node config when no flag",
       [](Inputs& in) {
         in.config.role = "worker";
         in.config.worker_secret = std::string(64, 'b');
         FromCmdline(in, "worker-secret");
       },
       "worker secret", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
       "node config (kernel command line)"},
      {"worker secret: a worker given the cluster secret derives it",
       [](Inputs& in) {
         in.flags.role = "worker";
         SecretFile(in, "s3cret-0123456789");
       },
       "worker secret", "ba880e710a35ca014c6bf8618972d84f9676b0d73bbd0b385e7039437b284b77",
       "derived from the cluster secret (flag)"},
      {"secret: a worker's daemon never gets the cluster secret, even when the node was given it",
       [](Inputs& in) {
         in.flags.role = "worker";
         SecretFile(in, "s3cret-0123456789");
       },
       "secret", "", "flag"},
      // listen
      {"listen: the flag beats the node config's address",
       [](Inputs& in) {
         in.flags.listen = "198.18.0.1";
         in.config.address = "198.18.0.2/24";
       },
       "listen", "198.18.0.1", "flag"},
      {"listen: the node config's address without its prefix length",
       [](Inputs& in) {
         in.config.address = "198.18.0.2/24";
         FromCmdline(in, "address");
       },
       "listen", "198.18.0.2", "node config (kernel command line)"},
      {"listen: none by default", [](Inputs&) {}, "listen", "", "default"},
      // name
      {"name: the flag beats the configured hostname and the host name",
       [](Inputs& in) {
         in.flags.name = "flag-name";
         in.config.hostname = "config-name";
       },
       "name", "flag-name", "flag"},
      {"name: the configured hostname beats the host name",
       [](Inputs& in) {
         in.config.hostname = "config-name";
         FromCmdline(in, "hostname");
       },
       "name", "config-name", "node config (kernel command line)"},
      {"name: the host name by default", [](Inputs&) {}, "name", "host-name", "host"},
      // peers
      {"peers: the flag beats the node config; prefixes and empty fields dropped",
       [](Inputs& in) {
         in.flags.peers = "198.18.0.1/24,198.18.0.2,,198.18.0.3";
         in.config.peers = std::vector<std::string>{"198.18.0.9"};
       },
       "peers", "198.18.0.1,198.18.0.2,198.18.0.3", "flag"},
      {"peers: the node config's, without prefix lengths",
       [](Inputs& in) {
         in.config.peers = std::vector<std::string>{"198.18.0.8/24", "198.18.0.9"};
         FromCmdline(in, "peers");
       },
       "peers", "198.18.0.8,198.18.0.9", "node config (kernel command line)"},
      {"peers: none by default", [](Inputs&) {}, "peers", "", "default"},
      // expected
      // max control planes (the electorate without a static list)
      {"max control planes: the flag beats the Shoot's maximum",
       [](Inputs& in) {
         in.flags.electorate = 7;
         in.record.expected_control_planes = 3;
         in.record.max_control_planes = 5;
       },
       "max control planes", "7", "flag"},
      {"max control planes: the Shoot's maximum from the cluster record",
       [](Inputs& in) {
         in.record.expected_control_planes = 3;
         in.record.max_control_planes = 5;
       },
       "max control planes", "5", "cluster record"},
      {"max control planes: none when nothing gives one (no M = N default)",
       [](Inputs& in) { in.record.expected_control_planes = 3; }, "max control planes", "0", "none"},
      {"expected: the flag beats the peers and the cluster record",
       [](Inputs& in) {
         in.flags.expected = 5;
         in.flags.peers = "198.18.0.2,198.18.0.3";
         in.record.expected_control_planes = 7;
       },
       "expected", "5", "flag"},
      {"expected: the peers plus this node, each counted once, beat the cluster record",
       [](Inputs& in) {
         in.flags.listen = "198.18.0.1";
         in.flags.peers = "198.18.0.1,198.18.0.2,198.18.0.2,198.18.0.3";
         in.record.expected_control_planes = 7;
       },
       "expected", "3", "peers"},
      {"expected: the cluster record's control-plane count when no peers",
       [](Inputs& in) { in.record.expected_control_planes = 5; }, "expected", "5", "cluster record"},
      {"expected: 3 by default", [](Inputs&) {}, "expected", "3", "default"},
      // role
      {"role: the flag beats the node config",
       [](Inputs& in) {
         in.flags.role = "worker";
         in.config.role = "control-plane";
       },
       "role", "worker (no control plane)", "flag"},
      {"role: the node config's",
       [](Inputs& in) {
         in.config.role = "worker";
         FromCmdline(in, "role");
       },
       "role", "worker (no control plane)", "node config (kernel command line)"},
      {"role: control-plane by default", [](Inputs&) {}, "role", "control-plane (control plane)", "default"},
      // cluster name
      {"cluster name: the flag beats the cluster record",
       [](Inputs& in) {
         in.flags.cluster_name = "flag-cluster";
         in.record.name = "shoot-name";
       },
       "cluster name", "flag-cluster", "flag"},
      {"cluster name: the cluster record's Shoot name", [](Inputs& in) { in.record.name = "shoot-name"; },
       "cluster name", "shoot-name", "cluster record"},
      {"cluster name: sprout by default", [](Inputs&) {}, "cluster name", "sprout", "default"},
      // etcd data dir
      {"etcd data dir: the flag", [](Inputs& in) { in.flags.etcd_data_dir = "/data/etcd"; }, "etcd data dir",
       "/data/etcd", "flag"},
      {"etcd data dir: <state-dir>/etcd by default", [](Inputs&) {}, "etcd data dir", "/state/etcd", "default"},
      // port
      {"port: the flag", [](Inputs& in) { in.flags.port = 7000; }, "port", "7000", "flag"},
      {"port: 7777 by default", [](Inputs&) {}, "port", "7777", "default"},
      // etcd launch
      {"etcd launch: auto is a static pod when the record has an etcd image and the template exists",
       [](Inputs& in) {
         in.record.images["etcd"] = "localhost/sprout/etcd@sha256:abc";
         in.facts.etcd_template = true;
       },
       "etcd launch", "static-pod", "cluster record"},
      {"etcd launch: auto is a process without the template",
       [](Inputs& in) { in.record.images["etcd"] = "localhost/sprout/etcd@sha256:abc"; }, "etcd launch", "process",
       "default"},
      {"etcd launch: auto is a process without an etcd image", [](Inputs& in) { in.facts.etcd_template = true; },
       "etcd launch", "process", "default"},
      {"etcd launch: the process flag beats a possible static pod",
       [](Inputs& in) {
         in.flags.etcd_launch = "process";
         in.record.images["etcd"] = "localhost/sprout/etcd@sha256:abc";
         in.facts.etcd_template = true;
       },
       "etcd launch", "process", "flag"},
      {"etcd launch: the static-pod flag where one is possible",
       [](Inputs& in) {
         in.flags.etcd_launch = "static-pod";
         in.record.images["etcd"] = "localhost/sprout/etcd@sha256:abc";
         in.facts.etcd_template = true;
       },
       "etcd launch", "static-pod", "flag"},
      // backups: the sink per node (a share's address and uid/gid), the schedule from the profile
      {"backup dir: the flag beats the node config and the profile",
       [](Inputs& in) {
         in.flags.backup_dir = "/var/lib/sprout/backups";
         in.config.backup_dir = "nfs://198.18.0.5/backups";
         in.record.backup_dir = "nfs://198.18.0.6/backups";
       },
       "backup dir", "/var/lib/sprout/backups", "flag"},
      {"backup dir: the node config (the share's address and credentials) beats the profile",
       [](Inputs& in) {
         in.config.backup_dir = "nfs://198.18.0.5/backups?uid=1000&gid=1000";
         FromCmdline(in, "backup-dir");
         in.record.backup_dir = "nfs://198.18.0.6/backups";
       },
       "backup dir", "nfs://198.18.0.5/backups?uid=1000&gid=1000", "node config (kernel command line)"},
      {"backup dir: the profile's, from the cluster record",
       [](Inputs& in) { in.record.backup_dir = "nfs://198.18.0.6/backups"; }, "backup dir", "nfs://198.18.0.6/backups",
       "cluster record"},
      {"backup dir: none by default", [](Inputs&) {}, "backup dir", "", "default"},
      {"backup interval: the flag beats the profile, and 0 turns the schedule off",
       [](Inputs& in) {
         in.flags.backup_interval = 0;
         in.record.backup_dir = "/b";
         in.record.backup_interval = 3600;
       },
       "backup interval", "0", "flag"},
      {"backup interval: the profile's",
       [](Inputs& in) {
         in.record.backup_dir = "/b";
         in.record.backup_interval = 3600;
       },
       "backup interval", "3600", "cluster record"},
      {"backup interval: none by default", [](Inputs&) {}, "backup interval", "0", "default"},
      {"backup interval: the profile's schedule is off until the node is given a sink",
       [](Inputs& in) { in.record.backup_interval = 3600; }, "backup interval", "0",
       "cluster record, off: no sink (give sprout.backup-dir)"},
      {"backup keep: the flag beats the profile",
       [](Inputs& in) {
         in.flags.backup_keep = 3;
         in.record.backup_keep = 14;
       },
       "backup keep", "3", "flag"},
      {"backup keep: the profile's", [](Inputs& in) { in.record.backup_keep = 14; }, "backup keep", "14",
       "cluster record"},
      {"backup keep: 7 by default", [](Inputs&) {}, "backup keep", "7", "default"},
      {"restore from: the flag beats the node config",
       [](Inputs& in) {
         in.flags.restore_from = "/mnt/usb/c-20261125T095500Z-scheduled.sprout-backup";
         in.config.restore_from = "nfs://198.18.0.5/backups/c-20261125T095500Z-scheduled.sprout-backup";
       },
       "restore from", "/mnt/usb/c-20261125T095500Z-scheduled.sprout-backup", "flag"},
      // a worker's CA pin: given, else derived from a cluster secret the worker was given
      {"ca cert hash: the flag beats the node config",
       [](Inputs& in) {
         in.flags.role = "worker";
         in.flags.ca_cert_hash = "SHA256:" + std::string(64, 'A');
         in.config.ca_cert_hash = "sha256:" + std::string(64, 'b');
       },
       "ca cert hash", "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "flag"},
      {"ca cert hash: the node config beats the one derived from the cluster secret",
       [](Inputs& in) {
         in.config.role = "worker";
         in.config.ca_cert_hash = "sha256:" + std::string(64, 'b');
         in.config.origin["ca-cert-hash"] = "config area";
         SecretFile(in, "s3cret-0123456789\n");
       },
       "ca cert hash", "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
       "node config (config area)"},
      {"ca cert hash: a worker given the cluster secret pins the CA a founder makes from it",
       [](Inputs& in) {
         in.flags.role = "worker";
         SecretFile(in, "example cluster secret 0123456789\n");
       },
       "ca cert hash", "sha256:7e858bf6c6e83eaf78d3cc3967d2e34b5d1608e99687acd70f16c5948e9fd40b",
       "derived from the cluster secret (flag)"},
      {"ca cert hash: none for a worker given only the worker secret",
       [](Inputs& in) {
         in.config.role = "worker";
         in.config.worker_secret = "ba880e710a35ca014c6bf8618972d84f9676b0d73bbd0b385e7039437b284b77";
       },
       "ca cert hash", "", "none"},
      {"restore from: the node config, handed over like other per-node settings",
       [](Inputs& in) {
         in.config.restore_from = "nfs://198.18.0.5/backups/c-20261125T095500Z-scheduled.sprout-backup";
         in.config.origin["restore-from"] = "fw_cfg";
       },
       "restore from", "nfs://198.18.0.5/backups/c-20261125T095500Z-scheduled.sprout-backup", "node config (fw_cfg)"},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.name) {
      Inputs in = Make(c.setup);
      auto r = ResolveSettings(in.flags, in.config, in.record, in.facts);
      REQUIRE(r.ok());
      CHECK(Value(r.settings, c.setting) == c.value);
      CHECK(r.settings.origin[c.setting] == c.origin);
    }
  }
}

TEST_CASE("SecretsForRole: a worker's config area holds the worker secret, never the cluster secret",
          "[node][settings]") {
  NodeConfig worker;
  worker.role = "worker";
  worker.cluster_secret = "s3cret-0123456789";
  worker.origin["cluster-secret"] = "option";
  auto w = SecretsForRole(worker);
  REQUIRE(w);
  CHECK_FALSE(w->cluster_secret);
  CHECK(w->origin.count("cluster-secret") == 0);
  CHECK(*w->worker_secret == "ba880e710a35ca014c6bf8618972d84f9676b0d73bbd0b385e7039437b284b77");
  CHECK(RenderNodeConfig(*w).find(Base64Encode("s3cret-0123456789")) == std::string::npos);

  NodeConfig cp = *w;
  cp.role = "control-plane";
  cp.cluster_secret = "s3cret-0123456789";
  auto c = SecretsForRole(cp);
  REQUIRE(c);
  CHECK(c->cluster_secret);
  CHECK_FALSE(c->worker_secret);  // it derives its own

  // ...and the pin of the CA a founder with that secret makes, unless one is given.
  CHECK(w->ca_cert_hash == pki::ClusterCaCertHash("s3cret-0123456789").value());
  CHECK(w->origin.at("ca-cert-hash") == "derived from the cluster secret");
  NodeConfig given = worker;
  given.ca_cert_hash = "sha256:" + std::string(64, 'c');
  CHECK(SecretsForRole(given)->ca_cert_hash == given.ca_cert_hash);
  CHECK(c->ca_cert_hash == std::nullopt);  // a control-plane node holds the CA; it pins nothing

  NodeConfig cp_without = *w;
  cp_without.role.reset();  // control-plane by default
  auto refused = SecretsForRole(cp_without);
  REQUIRE_FALSE(refused);
  CHECK(refused.error() ==
        "a control-plane node (role control-plane, the default) needs the cluster secret, and this one would have "
        "only a worker secret; give --cluster-secret, or --role worker");
}

TEST_CASE("ResolveSettings idles without a secret or an address, and fills the rest", "[node][settings]") {
  auto none = Make([](Inputs&) {});
  auto r = ResolveSettings(none.flags, none.config, none.record, none.facts);
  REQUIRE(r.ok());
  CHECK(r.settings.idle_reason == "no cluster secret configured");
  auto worker_none = Make([](Inputs& in) { in.flags.role = "worker"; });
  r = ResolveSettings(worker_none.flags, worker_none.config, worker_none.record, worker_none.facts);
  REQUIRE(r.ok());
  CHECK(r.settings.idle_reason == "no worker secret configured");
  auto no_address = Make([](Inputs& in) { SecretFile(in, "s"); });
  r = ResolveSettings(no_address.flags, no_address.config, no_address.record, no_address.facts);
  REQUIRE(r.ok());
  CHECK(r.settings.idle_reason == "no node address configured (sprout.address or --listen)");
  auto ready = Make([](Inputs& in) {
    SecretFile(in, "s");
    in.flags.listen = "198.18.0.1";
    in.flags.etcd_bin = "/usr/bin/etcd";
    in.flags.pki_dir = "/var/lib/sprout/pki";
    in.flags.group = "";
  });
  r = ResolveSettings(ready.flags, ready.config, ready.record, ready.facts);
  REQUIRE(r.ok());
  CHECK(r.settings.idle_reason.empty());
  CHECK(r.settings.formation.state_dir == "/state");
  CHECK(r.settings.formation.etcd_bin == "/usr/bin/etcd");
  CHECK(r.settings.formation.pki_dir == "/var/lib/sprout/pki");
  CHECK(r.settings.formation.group.empty());
  CHECK_FALSE(r.settings.formation.make_launcher);
}

struct ErrorCase {
  const char* name;
  Setup setup;
  std::vector<std::string> errors;  // every error, rendered by Describe
};

// Ready makes a node that would form: a secret and an address.
void Ready(Inputs& in) {
  SecretFile(in, "s");
  in.flags.listen = "198.18.0.1";
}

TEST_CASE("ResolveSettings validation table: every bad setting is named with its source and the fix",
          "[node][settings]") {
  const std::vector<ErrorCase> cases = {
      {"role from the flag is neither control-plane nor worker",
       [](Inputs& in) {
         Ready(in);
         in.flags.role = "boss";
       },
       {"role: 'boss' is neither 'control-plane' nor 'worker' (from --role); set it to control-plane or worker"}},
      {"role from the node config names the config source",
       [](Inputs& in) {
         Ready(in);
         in.config.role = "master";
         in.config.origin["role"] = "fw_cfg";
       },
       {"role: 'master' is neither 'control-plane' nor 'worker' (from sprout.role (fw_cfg)); set it to "
        "control-plane or worker"}},
      {"max control planes below the expected count, without a static list",
       [](Inputs& in) {
         Ready(in);
         in.flags.expected = 5;
         in.flags.electorate = 3;
       },
       {"max control planes: 3 is below the expected control-plane count 5 (from --max-control-planes); give at "
        "least 5, or lower --expected"}},
      {"a worker's CA pin from the flag that is not sha256:HEX",
       [](Inputs& in) {
         Ready(in);
         in.flags.role = "worker";
         in.flags.ca_cert_hash = "7e858bf6";
       },
       {"ca cert hash: '7e858bf6' is not sha256:<64 hex digits> (from --ca-cert-hash); give the hash "
        "`sprout-firstboot status` prints on a control-plane node, or `sprout ca-cert-hash --cluster-secret FILE`"}},
      {"port 0",
       [](Inputs& in) {
         Ready(in);
         in.flags.port = 0;
       },
       {"port: 0 is not a UDP port (from --port); give a port from 1 to 65535"}},
      {"port above 65535",
       [](Inputs& in) {
         Ready(in);
         in.flags.port = 65536;
       },
       {"port: 65536 is not a UDP port (from --port); give a port from 1 to 65535"}},
      {"etcd launch mode unknown",
       [](Inputs& in) {
         Ready(in);
         in.flags.etcd_launch = "pod";
       },
       {"etcd launch: 'pod' is not a way to run etcd (from --etcd-launch); use auto, process or static-pod"}},
      {"etcd launch static-pod without the template",
       [](Inputs& in) {
         Ready(in);
         in.flags.etcd_launch = "static-pod";
         in.record.images["etcd"] = "localhost/sprout/etcd@sha256:abc";
       },
       {"etcd launch: a static pod needs /usr/share/sprout/staticpods/etcd.yaml and an etcd image in "
        "/usr/share/sprout/cluster.json (from --etcd-launch=static-pod); use --etcd-launch=process, or an image "
        "built with the etcd static pod"}},
      {"etcd launch static-pod without an etcd image",
       [](Inputs& in) {
         Ready(in);
         in.flags.etcd_launch = "static-pod";
         in.facts.etcd_template = true;
       },
       {"etcd launch: a static pod needs /usr/share/sprout/staticpods/etcd.yaml and an etcd image in "
        "/usr/share/sprout/cluster.json (from --etcd-launch=static-pod); use --etcd-launch=process, or an image "
        "built with the etcd static pod"}},
      {"secret file unreadable, an error even though the node would idle",
       [](Inputs& in) {
         in.flags.secret_file = "/run/secret";
         in.facts.secret_file_error = "cannot read /run/secret: No such file or directory";
         in.flags.role = "boss";
       },
       {"role: 'boss' is neither 'control-plane' nor 'worker' (from --role); set it to control-plane or worker",
        "secret: cannot read /run/secret: No such file or directory (from --secret-file /run/secret); fix the "
        "path, or leave --secret-file out to use sprout.cluster-secret"}},
      {"a control-plane node given only a worker secret, an error even though the node would idle",
       [](Inputs& in) {
         in.config.worker_secret = sprout::formation::WorkerSecret("s");
         FromCmdline(in, "worker-secret");
       },
       {"secret: a control-plane node needs the cluster secret, and it was given only a worker secret, which "
        "proves a worker and nothing more (from sprout.worker-secret (kernel command line)); give it the cluster "
        "secret (sprout.cluster-secret or --secret-file), or set sprout.role=worker"}},
      {"a worker secret that is not the cluster secret's",
       [](Inputs& in) {
         Ready(in);
         in.flags.role = "worker";
         in.config.worker_secret = sprout::formation::WorkerSecret("another cluster");
         FromCmdline(in, "worker-secret");
       },
       {"worker secret: is not the worker secret of the cluster secret (from --secret-file /run/secret) (from "
        "sprout.worker-secret (kernel command line)); give one of them, or both of the same cluster"}},
      {"a worker secret file that is not one",
       [](Inputs& in) {
         in.flags.listen = "198.18.0.1";
         in.flags.role = "worker";
         in.flags.worker_secret_file = "/run/worker";
         in.facts.worker_secret_file_text = "the cluster secret by mistake\n";
       },
       {"worker secret: is not 64 lower-case hex digits (from --worker-secret-file /run/worker); write the output "
        "of `sprout worker-secret --cluster-secret FILE` into it"}},
      {"every error is reported at once",
       [](Inputs& in) {
         Ready(in);
         in.flags.role = "boss";
         in.flags.port = -1;
         in.flags.etcd_launch = "pod";
       },
       {"role: 'boss' is neither 'control-plane' nor 'worker' (from --role); set it to control-plane or worker",
        "port: -1 is not a UDP port (from --port); give a port from 1 to 65535",
        "etcd launch: 'pod' is not a way to run etcd (from --etcd-launch); use auto, process or static-pod"}},
      {"backup settings: a bad share, a schedule with no sink, a keep of 0 and a folder given as restore-from",
       [](Inputs& in) {
         Ready(in);
         in.config.backup_dir = "nfs://nas:2049/backups";
         in.config.origin["backup-dir"] = "config area";
         in.flags.backup_keep = 0;
         in.flags.restore_from = "nfs://nas/backups/";
       },
       {"backup dir: backup sink 'nfs://nas:2049/backups': write the server as a bare name or IPv4 address (NFSv4 on "
        "port 2049) (from sprout.backup-dir (config area)); give a folder or nfs://HOST/PATH[?uid=N&gid=N]",
        "backup keep: 0 keeps nothing (from --backup-keep); give 1 or more",
        "restore from: 'nfs://nas/backups/' names a folder; give the bundle's file (see `backup list`) (from "
        "--restore-from); give a bundle's path or nfs://HOST/PATH/NAME"}},
      {"a node with no secret idles and ignores bad settings until it has one",
       [](Inputs& in) {
         in.flags.listen = "198.18.0.1";
         in.flags.role = "boss";
         in.flags.port = 0;
       },
       {}},
      {"a node with no address idles and ignores bad settings until it has one",
       [](Inputs& in) {
         SecretFile(in, "s");
         in.flags.etcd_launch = "pod";
       },
       {}},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.name) {
      Inputs in = Make(c.setup);
      auto r = ResolveSettings(in.flags, in.config, in.record, in.facts);
      std::vector<std::string> got;
      for (const auto& e : r.errors) got.push_back(Describe(e));
      CHECK(got == c.errors);
      if (c.errors.empty()) CHECK_FALSE(r.settings.idle_reason.empty());
    }
  }
}

}  // namespace
}  // namespace sprout::settings
