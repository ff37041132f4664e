#include "cis/cis.h"

#include <catch2/catch.hpp>

namespace sprout::cis {
namespace {

// Pod is a static pod whose one container runs program with args.
std::string Pod(const std::string& program, const std::vector<std::string>& args) {
  std::string out = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + program +
                    "\nspec:\n  containers:\n    - name: " + program + "\n      image: x\n      command:\n        - " +
                    program + "\n";
  for (const auto& a : args) out += "        - " + a + "\n";
  return out;
}

const char* kKubeletConfig = R"(apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
rotateCertificates: true
)";

// Sample is a control plane that passes what sprout's passes.
Inputs Sample() {
  Inputs in;
  in.subject = "a test";
  in.apiserver = {"/etc/kubernetes/manifests/kube-apiserver.yaml",
                  Pod("kube-apiserver", {"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
                                         "--client-ca-file=/pki/ca.crt", "--audit-policy-file=/audit.yaml"}),
                  ""};
  in.controller_manager = {"/etc/kubernetes/manifests/kube-controller-manager.yaml",
                           Pod("kube-controller-manager", {"--profiling=false"}), ""};
  in.scheduler = {"/etc/kubernetes/manifests/kube-scheduler.yaml", Pod("kube-scheduler", {}), ""};
  in.etcd = {"/etc/kubernetes/manifests/etcd.yaml", Pod("etcd", {"--trusted-ca-file=/pki/etcd/ca.crt"}), ""};
  in.encryption_config = {"/etc/kubernetes/pki/encryption-config.yaml",
                          "resources:\n  - resources: [secrets]\n    providers:\n      - aescbc:\n          keys:\n"
                          "            - name: k\n              secret: " +
                              std::string(44, 'A') + "\n      - identity: {}\n",
                          ""};
  in.audit_policy = {"/etc/kubernetes/audit-policy.yaml", "rules:\n  - level: Metadata\n", ""};
  in.modes = {{"manifests/kube-apiserver.yaml", 0600},
              {"manifests/kube-controller-manager.yaml", 0600},
              {"manifests/kube-scheduler.yaml", 0600},
              {"manifests/etcd.yaml", 0600},
              {"admin.conf", 0600},
              {"scheduler.conf", 0600},
              {"controller-manager.conf", 0600},
              {"kubelet.conf", 0600},
              {"pki/ca.crt", 0644},
              {"pki/ca.key", 0600}};
  in.modes_source = "written by the control-plane step";
  in.firstboot_unit = "[Service]\nExecStart=/usr/bin/sprout-firstboot\n";
  in.kubelet_config = {"/usr/lib/sprout/kubelet/config.yaml", kKubeletConfig, ""};
  in.kubelet_config_mode = 0644;
  in.kubelet_unit = {
      "/usr/lib/systemd/system/kubelet.service",
      "[Service]\nExecStart=/usr/bin/kubelet --config=/usr/lib/sprout/kubelet/config.yaml $KUBELET_ARGS\n", ""};
  in.kubelet_unit_mode = 0644;
  in.kubelet_env = {"/etc/kubernetes/kubelet.env", "KUBELET_ARGS=\"--node-ip=198.18.0.14\"\n", ""};
  in.image_modes_source = "`sprout build`";
  return in;
}

const Check& Find(const Report& r, const std::string& id) {
  for (const auto& s : r.sections) {
    for (const auto& c : s.checks) {
      if (c.id == id) return c;
    }
  }
  FAIL("no check " << id);
  static const Check none;
  return none;
}

Report Judged(const Inputs& in) {
  auto r = Judge(in);
  INFO((r ? "" : r.error()));
  REQUIRE(r);
  return *r;
}

TEST_CASE("cis: sprout's kubelet defaults pass 4.2.1 to 4.2.4, naming the file") {
  const Report r = Judged(Sample());
  CHECK(Find(r, "4.2.1").verdict == Verdict::kPass);
  CHECK(Find(r, "4.2.1").reason == "`authentication.anonymous.enabled: false` (/usr/lib/sprout/kubelet/config.yaml)");
  CHECK(Find(r, "4.2.2").verdict == Verdict::kPass);
  CHECK(Find(r, "4.2.3").verdict == Verdict::kPass);
  CHECK(Find(r, "4.2.4").verdict == Verdict::kPass);
  CHECK(Find(r, "4.2.4").reason == "not set; 0 (off) is the configuration file's default");
}

TEST_CASE("cis: a kubelet.config override that opens the read-only port or anonymous access fails, named") {
  Inputs in = Sample();
  // As KubeletConfigYaml renders the override: top-level fields replaced whole.
  in.kubelet_overrides = "readOnlyPort: 10255\nauthentication:\n  anonymous:\n    enabled: true\n";
  in.kubelet_config.text =
      "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nauthentication:\n  anonymous:\n"
      "    enabled: true\nauthorization:\n  mode: Webhook\nreadOnlyPort: 10255\n";
  const Report r = Judged(in);
  const Check& port = Find(r, "4.2.4");
  CHECK(port.verdict == Verdict::kFail);
  CHECK(port.reason ==
        "`readOnlyPort: 10255` (/usr/lib/sprout/kubelet/config.yaml, from the profile's `kubelet.config`)");
  const Check& anonymous = Find(r, "4.2.1");
  CHECK(anonymous.verdict == Verdict::kFail);
  CHECK(anonymous.reason ==
        "`authentication.anonymous.enabled: true` (/usr/lib/sprout/kubelet/config.yaml, from the profile's "
        "`kubelet.config`)");
  // The override replaced the whole authentication block, so the client CA went too.
  CHECK(Find(r, "4.2.3").verdict == Verdict::kFail);
  CHECK(Find(r, "4.2.2").reason == "`authorization.mode: Webhook` (/usr/lib/sprout/kubelet/config.yaml)");
  const std::string md = Markdown(r);
  CHECK(md.find("| 4.2.4 | the read-only port is 0 | **fail** | `readOnlyPort: 10255` "
                "(/usr/lib/sprout/kubelet/config.yaml, from the profile's `kubelet.config`) |\n") != std::string::npos);
}

TEST_CASE("cis: a kubelet flag wins over the file and the report names the file it is in") {
  Inputs in = Sample();
  in.kubelet_env.text = "KUBELET_ARGS=\"--node-ip=198.18.0.14 --read-only-port=10255 --hostname-override=n\"\n";
  const Report r = Judged(in);
  CHECK(Find(r, "4.2.4").verdict == Verdict::kFail);
  CHECK(Find(r, "4.2.4").reason == "`--read-only-port=10255` (/etc/kubernetes/kubelet.env)");
  CHECK(Find(r, "4.2.8").verdict == Verdict::kFail);
}

TEST_CASE("cis: nominal passes are marked and said so; a fail is never nominal") {
  Report r = Judged(Sample());
  // A kubelet that asks for no serving certificate leaves the rotation gate nothing to do.
  CHECK(Find(r, "1.3.6").verdict == Verdict::kPass);
  CHECK(Find(r, "1.3.6").nominal);
  CHECK(Find(r, "1.3.6").reason.find("; nominally only: ") != std::string::npos);
  int nominal = 0;
  for (const auto& s : r.sections) {
    for (const auto& c : s.checks) nominal += c.nominal ? 1 : 0;
  }
  CHECK(nominal == 1);
  const std::string md = Markdown(r);
  CHECK(md.find("| 1.3.6 | the RotateKubeletServerCertificate feature gate is true | pass (*nominal*) | not "
                "disabled; ") != std::string::npos);
  CHECK(md.find(" pass (1 of them nominal), ") != std::string::npos);
  // The Node authorizer and NodeRestriction hold now: a bootstrap token gets no name a
  // node holds (kube/csr_approval.h), so they are plain passes.
  for (const char* id : {"1.2.7", "1.2.16"}) {
    INFO(id);
    CHECK(Find(r, id).verdict == Verdict::kPass);
    CHECK_FALSE(Find(r, id).nominal);
    CHECK(Find(r, id).reason.find("sprout's approver") != std::string::npos);
  }
  Inputs serving = Sample();
  serving.kubelet_config.text = std::string(kKubeletConfig) + "serverTLSBootstrap: true\n";
  Report rs = Judged(serving);
  CHECK(Find(rs, "1.3.6").verdict == Verdict::kPass);
  CHECK_FALSE(Find(rs, "1.3.6").nominal);
  CHECK(Find(rs, "4.2.12").verdict == Verdict::kPass);

  Inputs off = Sample();
  off.apiserver.text =
      Pod("kube-apiserver", {"--authorization-mode=RBAC", "--disable-admission-plugins=NodeRestriction"});
  r = Judged(off);
  CHECK(Find(r, "1.2.16").verdict == Verdict::kFail);
  CHECK_FALSE(Find(r, "1.2.16").nominal);
  CHECK(Find(r, "1.2.16").reason == "disabled by `--disable-admission-plugins`");
  CHECK(Find(r, "1.2.7").verdict == Verdict::kFail);
  CHECK_FALSE(Find(r, "1.2.7").nominal);
}

TEST_CASE("cis: a flag gone from a later Kubernetes is not applicable; on 1.20 its default is judged") {
  Inputs in = Sample();
  CHECK(Find(Judged(in), "1.2.18").verdict == Verdict::kFail);  // 1.20's insecure port defaults to 8080
  in.kubernetes_minor = 36;
  const Report r = Judged(in);
  CHECK(Find(r, "1.2.18").verdict == Verdict::kNotApplicable);
  CHECK(Find(r, "1.2.3").verdict == Verdict::kNotApplicable);
  CHECK(Find(r, "1.2.15").verdict == Verdict::kNotApplicable);
  CHECK(Find(r, "1.2.12").verdict == Verdict::kNotApplicable);
  CHECK(Find(r, "1.2.13").reason == "on by default in 1.36 and not disabled");
}

TEST_CASE("cis: file modes are judged as written; a wide key fails naming it") {
  Inputs in = Sample();
  CHECK(Find(Judged(in), "1.1.21").reason == "1 keys, each 0600 (written by the control-plane step)");
  in.modes["pki/sa.key"] = 0644;
  in.modes.erase("manifests/etcd.yaml");
  const Report r = Judged(in);
  CHECK(Find(r, "1.1.21").verdict == Verdict::kFail);
  CHECK(Find(r, "1.1.21").reason == "wider: pki/sa.key 0644");
  CHECK(Find(r, "1.1.7").verdict == Verdict::kFail);
  CHECK(Find(r, "1.1.7").reason == "`manifests/etcd.yaml` was not written by the control-plane step");
}

TEST_CASE("cis: Secrets in the clear fail 1.2.33; a broken file is an error naming it") {
  Inputs in = Sample();
  CHECK(Find(Judged(in), "1.2.33").reason.find("Secrets are written with `aescbc` (33-byte key") == 0);
  in.encryption_config.text = "resources:\n  - resources: [secrets]\n    providers:\n      - identity: {}\n";
  CHECK(Find(Judged(in), "1.2.33").verdict == Verdict::kFail);
  in.kubelet_config.text = "a: [b\n";
  auto r = Judge(in);
  REQUIRE_FALSE(r);
  CHECK(r.error().rfind("/usr/lib/sprout/kubelet/config.yaml:", 0) == 0);
}

TEST_CASE("cis: the kubelet's flags come from the unit's ExecStart and the env file, quotes as a shell reads them") {
  CHECK(ShellWords(R"(a "b c" 'd e'f)") == std::vector<std::string>{"a", "b c", "d ef"});
  auto f = KubeletFlags("ExecStart=/usr/bin/kubelet --config=/c.yaml --x $KUBELET_ARGS\n",
                        "KUBELET_ARGS=\"--node-ip=1.2.3.4 --hostname-override=n\"\n");
  CHECK(f == std::map<std::string, std::string>{
                 {"config", "/c.yaml"}, {"x", "true"}, {"node-ip", "1.2.3.4"}, {"hostname-override", "n"}});
}

}  // namespace
}  // namespace sprout::cis
