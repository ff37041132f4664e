#include "nodeconfig/nodeconfig.h"

#include <catch2/catch.hpp>

using namespace sprout;

TEST_CASE("Node config text round-trips, secret included", "[nodeconfig]") {
  NodeConfig c;
  c.hostname = "rack1-n1";
  c.role = "worker";
  c.address = "198.18.0.10/24";
  c.gateway = "198.18.0.1";
  c.peers = std::vector<std::string>{"198.18.0.11", "198.18.0.12"};
  c.cluster_secret = std::string("\x00\x01\xffsecret-bytes-here", 20);
  c.ssh_authorized_key = "ssh-ed25519 AAAAC3Nza me@laptop";
  auto back = ParseNodeConfig(RenderNodeConfig(c) + std::string(100, '\0') + "garbage", "config area");
  INFO((back ? "" : back.error()));
  REQUIRE(back.ok());
  CHECK(*back->hostname == "rack1-n1");
  CHECK(*back->role == "worker");
  CHECK(*back->peers == *c.peers);
  CHECK(*back->cluster_secret == *c.cluster_secret);
  CHECK(*back->ssh_authorized_key == *c.ssh_authorized_key);
  CHECK(back->origin.at("hostname") == "config area");
}

TEST_CASE("Bad node config lines are all reported with source and line", "[nodeconfig]") {
  auto r = ParseNodeConfig("hostname=Bad_Name\n\nrole=master\nhostnam=x\nnonsense\naddress=198.18.0.1\n", "fw_cfg");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() ==
        "fw_cfg:1: hostname must be a DNS label (a-z, 0-9, '-', at most 63); got 'Bad_Name'\n"
        "fw_cfg:3: role must be 'control-plane' or 'worker'; got 'master'\n"
        "fw_cfg:4: unknown setting 'hostnam'; did you mean 'hostname'?\n"
        "fw_cfg:5: expected 'key=value', got 'nonsense'\n"
        "fw_cfg:6: address must be an IP address with a prefix, such as 198.18.0.10/24; got '198.18.0.1'");
}

TEST_CASE("Precedence: kernel command line over fw_cfg over the config area", "[nodeconfig]") {
  auto area = ParseNodeConfig("hostname=from-area\nrole=worker\npeers=198.18.0.2\n", "config area");
  auto fwcfg = ParseNodeConfig("hostname=from-fwcfg\naddress=198.18.0.5/24\n", "fw_cfg");
  auto cmdline = ParseCmdline("root=/dev/mapper/root sprout.roothash=ab sprout.hostname=from-cmdline quiet");
  REQUIRE(area.ok());
  REQUIRE(fwcfg.ok());
  REQUIRE(cmdline.ok());
  NodeConfig m = MergeNodeConfig({*area, *fwcfg, *cmdline});
  CHECK(*m.hostname == "from-cmdline");
  CHECK(m.origin["hostname"] == "kernel command line");
  CHECK(*m.address == "198.18.0.5/24");
  CHECK(m.origin["address"] == "fw_cfg");
  CHECK(*m.role == "worker");
  CHECK(m.origin["role"] == "config area");
  CHECK(m.peers->size() == 1);
  CHECK_FALSE(m.cluster_secret);

  NodeConfig without_cmdline = MergeNodeConfig({*area, *fwcfg});
  CHECK(*without_cmdline.hostname == "from-fwcfg");
}

TEST_CASE("The kernel command line ignores boot plumbing and rejects bad values", "[nodeconfig]") {
  auto ok = ParseCmdline("sprout.state=PARTUUID=x sprout.config=PARTUUID=y sprout.role=control-plane");
  REQUIRE(ok.ok());
  CHECK(*ok->role == "control-plane");
  CHECK_FALSE(ok->hostname);
  auto bad = ParseCmdline("sprout.role=boss");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error() == "kernel command line: sprout.role: role must be 'control-plane' or 'worker'; got 'boss'");
}

TEST_CASE("Base64 round-trips every length", "[nodeconfig]") {
  std::string s;
  for (int i = 0; i < 40; ++i) {
    s.push_back(static_cast<char>(i * 37));
    auto back = Base64Decode(Base64Encode(s));
    REQUIRE(back);
    CHECK(*back == s);
  }
  CHECK_FALSE(Base64Decode("abc"));
}

TEST_CASE("A worker secret is 64 lower-case hex digits, from any source, and round-trips", "[nodeconfig]") {
  const std::string ws = "ba880e710a35ca014c6bf8618972d84f9676b0d73bbd0b385e7039437b284b77";
  auto cmdline = ParseCmdline("quiet sprout.role=worker sprout.worker-secret=" + ws);
  REQUIRE(cmdline.ok());
  CHECK(*cmdline->worker_secret == ws);
  CHECK(cmdline->origin.at("worker-secret") == "kernel command line");
  auto back = ParseNodeConfig(RenderNodeConfig(*cmdline), "config area");
  REQUIRE(back.ok());
  CHECK(*back->worker_secret == ws);
  CHECK_FALSE(back->cluster_secret);
  CHECK(MergeNodeConfig({NodeConfig{}, *back}).worker_secret == ws);
  auto bad = ParseNodeConfig("worker-secret=BA880E\n", "fw_cfg");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error() ==
        "fw_cfg:1: worker-secret must be the 64 lower-case hex digits that `sprout worker-secret` prints; got 6 "
        "characters");
}

TEST_CASE("A CA pin is sha256: and 64 hex digits, from any source, kept in lower case", "[nodeconfig]") {
  const std::string hash = "sha256:7e858bf6c6e83eaf78d3cc3967d2e34b5d1608e99687acd70f16c5948e9fd40b";
  // Public, so the kernel command line may carry it (a PXE node's pin).
  auto cmdline = ParseCmdline("quiet sprout.role=worker sprout.ca-cert-hash=" + hash);
  REQUIRE(cmdline.ok());
  CHECK(*cmdline->ca_cert_hash == hash);
  CHECK(cmdline->origin.at("ca-cert-hash") == "kernel command line");
  auto back = ParseNodeConfig(RenderNodeConfig(*cmdline), "config area");
  REQUIRE(back.ok());
  CHECK(*back->ca_cert_hash == hash);
  CHECK(MergeNodeConfig({NodeConfig{}, *back}).ca_cert_hash == hash);
  CHECK(MergeNodeConfig({*back, NodeConfig{}}).ca_cert_hash == hash);
  auto upper = ParseNodeConfig("ca-cert-hash=SHA256:7E858BF6C6E83EAF78D3CC3967D2E34B5D1608E99687ACD70F16C5948E9FD40B\n",
                               "fw_cfg");
  REQUIRE(upper.ok());
  CHECK(*upper->ca_cert_hash == hash);
  for (const std::string& bad :
       {std::string("7e858bf6c6e83eaf78d3cc3967d2e34b5d1608e99687acd70f16c5948e9fd40b"), std::string("sha256:7e858bf6"),
        std::string("sha1:") + hash.substr(7), hash + "00", std::string("sha256:") + std::string(64, 'g')}) {
    INFO(bad);
    auto refused = ParseNodeConfig("ca-cert-hash=" + bad + "\n", "fw_cfg");
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error() ==
          "fw_cfg:1: ca-cert-hash must be 'sha256:' and the 64 hex digits of the cluster CA's public-key hash, as "
          "`sprout-firstboot status` on a control-plane node prints it (kubeadm's --discovery-token-ca-cert-hash "
          "form); got '" +
              bad + "'");
  }
}
