#include "cis/cis.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

#include "util/text.h"

namespace sprout::cis {

namespace {

using Flags = std::map<std::string, std::string>;

// Outcome is a verdict with its reason, what each helper returns.
struct Outcome {
  Verdict verdict;
  std::string reason;
};

Outcome Pass(std::string why) { return {Verdict::kPass, std::move(why)}; }
Outcome Failed(std::string why) { return {Verdict::kFail, std::move(why)}; }
Outcome NotApplicable(std::string why) { return {Verdict::kNotApplicable, std::move(why)}; }
Outcome PassIf(bool ok, std::string why) { return {ok ? Verdict::kPass : Verdict::kFail, std::move(why)}; }

std::string Get(const Flags& f, const std::string& name, const std::string& fallback = "") {
  auto it = f.find(name);
  return it == f.end() ? fallback : it->second;
}

bool Has(const Flags& f, const std::string& name) { return f.count(name) != 0; }

std::string Octal(unsigned mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777U);
  return buf;
}

// FlagIs: "--name is want"; def is the component's value when the flag is not set.
Outcome FlagIs(const Flags& f, const std::string& name, const std::string& want, const std::string& def,
               const std::string& why_default = "") {
  if (Has(f, name)) return PassIf(Get(f, name) == want, "`--" + name + "=" + Get(f, name) + "`");
  return PassIf(def == want, "not set; the default is " + def + why_default);
}

Outcome FlagSet(const Flags& f, const std::vector<std::string>& names) {
  std::vector<std::string> missing, set;
  for (const auto& n : names) {
    if (Get(f, n).empty()) {
      missing.push_back("`--" + n + "`");
    } else {
      set.push_back("`--" + n + "=" + Get(f, n) + "`");
    }
  }
  if (!missing.empty()) return Failed("not set: " + Join(missing, ", "));
  return Pass(Join(set, ", "));
}

Outcome FlagUnset(const Flags& f, const std::string& name) {
  if (Has(f, name)) return Failed("`--" + name + "=" + Get(f, name) + "` is set");
  return Pass("not set");
}

Outcome FlagAtLeast(const Flags& f, const std::string& name, long minimum, const std::string& why_lower) {
  if (!Has(f, name)) return Failed("not set");
  const std::string v = Get(f, name);
  long n = 0;
  try {
    n = std::stol(v);
  } catch (const std::exception&) {
    return Failed("`--" + name + "=" + v + "` is not a number");
  }
  if (n >= minimum) return Pass("`--" + name + "=" + v + "`");
  return Failed("`--" + name + "=" + v + "`, below " + std::to_string(minimum) + ": " + why_lower);
}

std::vector<std::string> Plugins(const Flags& f, const std::string& key) {
  std::vector<std::string> out;
  for (auto& p : Split(Get(f, key), ',')) {
    if (!p.empty()) out.push_back(p);
  }
  return out;
}

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

Outcome Admission(const Flags& f, const std::string& plugin, bool on_by_default, int minor,
                  const std::string& why_off = "") {
  if (Contains(Plugins(f, "disable-admission-plugins"), plugin)) {
    return Failed("disabled by `--disable-admission-plugins`");
  }
  if (Contains(Plugins(f, "enable-admission-plugins"), plugin)) return Pass("in `--enable-admission-plugins`");
  if (on_by_default) return Pass("on by default in 1." + std::to_string(minor) + " and not disabled");
  return Failed("not enabled" + (why_off.empty() ? "" : ": " + why_off));
}

// AtMost: "has mode LIMIT or stricter" (no bit LIMIT lacks).
Outcome AtMost(unsigned mode, unsigned limit, const std::string& source) {
  return PassIf((mode & ~limit) == 0, Octal(mode) + " (" + source + ")");
}

// ModeOf is a file's mode as the control-plane step wrote it, or the check fails.
Outcome ModeAtMost(const Inputs& in, const std::string& name, unsigned limit, const std::string& source = "") {
  auto it = in.modes.find(name);
  if (it == in.modes.end()) return Failed("`" + name + "` was not written by the control-plane step");
  return AtMost(it->second, limit, source.empty() ? in.modes_source : source);
}

// RootOwned: files sprout-firstboot writes are root's when its unit runs it as root.
Outcome RootOwned(const std::string& unit, const std::string& what) {
  for (const auto& line : Split(unit, '\n')) {
    if (line.rfind("User=", 0) == 0) return Failed("sprout-firstboot's unit sets User=, so " + what + " is not root's");
  }
  return Pass("written by sprout-firstboot, which runs as root (its unit sets no `User=`)");
}

// Builder collects the rows of the current section.
class Builder {
 public:
  explicit Builder(Report& r) : r_(r) {}
  void Section(std::string title, std::string source) {
    r_.sections.push_back({std::move(title), std::move(source), {}});
  }
  void Add(std::string id, std::string rec, Outcome o) {
    r_.sections.back().checks.push_back({std::move(id), std::move(rec), o.verdict, std::move(o.reason), false});
  }
  // Nominal: a pass that holds only nominally; why says so (a fail stays a fail).
  void AddNominal(std::string id, std::string rec, Outcome o, const std::string& why) {
    const bool nominal = o.verdict == Verdict::kPass;
    if (nominal) o.reason += "; nominally only: " + why;
    r_.sections.back().checks.push_back({std::move(id), std::move(rec), o.verdict, std::move(o.reason), nominal});
  }

 private:
  Report& r_;
};

// PodFlags are the first container's command (without the program) and args.
Result<Flags> PodFlags(const Rendered& pod) {
  try {
    YAML::Node y = YAML::Load(pod.text);
    YAML::Node c = y["spec"]["containers"][0];
    if (!c || !c.IsMap()) return Fail(pod.path + ": no container in spec.containers");
    std::vector<std::string> args;
    bool first = true;
    for (const auto& a : c["command"]) {
      if (!first) args.push_back(a.Scalar());
      first = false;
    }
    for (const auto& a : c["args"]) args.push_back(a.Scalar());
    return ParseFlags(args);
  } catch (const YAML::Exception& e) {
    return Fail(pod.path + ":" + std::to_string(e.mark.line + 1) + ": not YAML: " + e.msg);
  }
}

Result<YAML::Node> LoadYaml(const Rendered& file) {
  try {
    YAML::Node y = YAML::Load(file.text);
    return y;
  } catch (const YAML::Exception& e) {
    return Fail(file.path + ":" + std::to_string(e.mark.line + 1) + ": not YAML: " + e.msg);
  }
}

std::string Minor(int minor) { return "1." + std::to_string(minor); }

void ApiserverChecks(Builder& r, const Flags& a, const YAML::Node& enc, int minor);
Outcome EncryptionProviders(const YAML::Node& enc);

void ApiserverChecks(Builder& r, const Flags& a, const YAML::Node& enc, int minor) {
  r.Add("1.2.1", "`--anonymous-auth` is false",
        FlagIs(a, "anonymous-auth", "false", "true",
               ": as kubeadm, anonymous requests stay on, and get only what RBAC grants "
               "`system:unauthenticated` (the health and version endpoints)"));
  r.Add("1.2.2", "`--token-auth-file` is not set", FlagUnset(a, "token-auth-file"));
  if (minor >= 22 && !Has(a, "kubelet-https")) {
    r.Add("1.2.3", "`--kubelet-https` is true",
          NotApplicable("the flag is gone since 1.22: the apiserver reaches kubelets over HTTPS only"));
  } else {
    r.Add("1.2.3", "`--kubelet-https` is true", FlagIs(a, "kubelet-https", "true", "true"));
  }
  r.Add("1.2.4", "`--kubelet-client-certificate` and `--kubelet-client-key` are set",
        FlagSet(a, {"kubelet-client-certificate", "kubelet-client-key"}));
  Outcome ca = FlagSet(a, {"kubelet-certificate-authority"});
  if (ca.verdict == Verdict::kFail) {
    ca.reason = "not set: the apiserver does not check the certificate a kubelet serves with";
  }
  r.Add("1.2.5", "`--kubelet-certificate-authority` is set", ca);
  const auto modes = Plugins(a, "authorization-mode");
  const std::string mode_text = "`--authorization-mode=" + Join(modes, ",") + "`";
  r.Add("1.2.6", "`--authorization-mode` is not AlwaysAllow",
        PassIf(!Contains(modes, "AlwaysAllow") && !modes.empty(), mode_text));
  Outcome node_mode = PassIf(Contains(modes, "Node"), mode_text);
  if (node_mode.verdict == Verdict::kPass) {
    node_mode.reason +=
        "; a kubelet is held to the Node its certificate names, and sprout's approver gives a "
        "bootstrap token only a name no node holds (docs/formation.md)";
  }
  r.Add("1.2.7", "`--authorization-mode` includes Node", node_mode);
  r.Add("1.2.8", "`--authorization-mode` includes RBAC", PassIf(Contains(modes, "RBAC"), mode_text));
  r.Add("1.2.9", "admission plugin EventRateLimit is set",
        Admission(a, "EventRateLimit", false, minor,
                  "it needs an admission configuration file, which sprout does not write"));
  const bool always_admit = Contains(Plugins(a, "enable-admission-plugins"), "AlwaysAdmit");
  r.Add("1.2.10", "admission plugin AlwaysAdmit is not set",
        PassIf(!always_admit, always_admit ? "enabled" : "not in `--enable-admission-plugins`"));
  r.Add("1.2.11", "admission plugin AlwaysPullImages is set",
        Admission(a, "AlwaysPullImages", false, minor,
                  "on purpose: images are preloaded on every node and nothing can be pulled (air-gapped); with "
                  "it, every pod start would need a registry"));
  const bool psp = Contains(Plugins(a, "enable-admission-plugins"), "PodSecurityPolicy");
  const bool pod_security = Contains(Plugins(a, "enable-admission-plugins"), "PodSecurity");
  const std::string rec12 = "admission plugin SecurityContextDeny is set if PodSecurityPolicy is not used";
  if (minor >= 30) {
    r.Add("1.2.12", rec12,
          NotApplicable("SecurityContextDeny is gone since 1.30" +
                        std::string(pod_security ? "; PodSecurity is in `--enable-admission-plugins`" : "")));
  } else if (psp) {
    r.Add("1.2.12", rec12, NotApplicable("PodSecurityPolicy is used"));
  } else {
    r.Add("1.2.12", rec12, Admission(a, "SecurityContextDeny", false, minor, "PodSecurityPolicy is not used either"));
  }
  r.Add("1.2.13", "admission plugin ServiceAccount is set", Admission(a, "ServiceAccount", true, minor));
  r.Add("1.2.14", "admission plugin NamespaceLifecycle is set", Admission(a, "NamespaceLifecycle", true, minor));
  if (minor >= 25) {
    r.Add("1.2.15", "admission plugin PodSecurityPolicy is set",
          NotApplicable("PodSecurityPolicy is gone since 1.25" +
                        std::string(pod_security ? "; its successor PodSecurity is in `--enable-admission-plugins`"
                                                 : "; its successor PodSecurity is not enabled")));
  } else {
    r.Add("1.2.15", "admission plugin PodSecurityPolicy is set",
          Admission(a, "PodSecurityPolicy", false, minor,
                    "sprout defines no PodSecurityPolicies, and the plugin without them admits no pod at all"));
  }
  Outcome restriction = Admission(a, "NodeRestriction", false, minor);
  if (restriction.verdict == Verdict::kPass) {
    restriction.reason +=
        "; sprout's approver gives a bootstrap token only a name no node holds, so the plugin "
        "holds a worker to its own Node (docs/formation.md)";
  }
  r.Add("1.2.16", "admission plugin NodeRestriction is set", restriction);
  r.Add("1.2.17", "`--insecure-bind-address` is not set", FlagUnset(a, "insecure-bind-address"));
  if (minor >= 24 && !Has(a, "insecure-port")) {
    r.Add("1.2.18", "`--insecure-port` is 0",
          NotApplicable("the flag is gone since 1.24: the apiserver has no insecure port"));
  } else {
    r.Add("1.2.18", "`--insecure-port` is 0", FlagIs(a, "insecure-port", "0", "8080"));
  }
  const std::string port = Get(a, "secure-port", "6443");
  r.Add("1.2.19", "`--secure-port` is not 0", PassIf(port != "0", "`--secure-port=" + port + "`"));
  r.Add("1.2.20", "`--profiling` is false", FlagIs(a, "profiling", "false", "true"));
  r.Add("1.2.21", "`--audit-log-path` is set", FlagSet(a, {"audit-log-path"}));
  r.Add("1.2.22", "`--audit-log-maxage` is 30 or as appropriate", FlagAtLeast(a, "audit-log-maxage", 30, ""));
  r.Add("1.2.23", "`--audit-log-maxbackup` is 10 or as appropriate", FlagAtLeast(a, "audit-log-maxbackup", 10, ""));
  long backups = 0;
  try {
    backups = std::stol(Get(a, "audit-log-maxbackup", "0"));
  } catch (const std::exception&) {
    backups = 0;
  }
  r.Add("1.2.24", "`--audit-log-maxsize` is 100 or as appropriate",
        FlagAtLeast(a, "audit-log-maxsize", 100,
                    "the log shares the state partition with etcd's data, so it is bounded to " +
                        std::to_string(backups + 1) + " files of " + Get(a, "audit-log-maxsize") + " MB"));
  if (Has(a, "request-timeout")) {
    r.Add("1.2.25", "`--request-timeout` is set as appropriate",
          Pass("`--request-timeout=" + Get(a, "request-timeout") +
               "`: longer than the 60 s default, for the apiserver's start-up on slow machines "
               "(docs/control-plane.md)"));
  } else {
    r.Add("1.2.25", "`--request-timeout` is set as appropriate", Pass("not set; the default is 60s"));
  }
  r.Add("1.2.26", "`--service-account-lookup` is true", FlagIs(a, "service-account-lookup", "true", "true"));
  r.Add("1.2.27", "`--service-account-key-file` is set", FlagSet(a, {"service-account-key-file"}));
  r.Add("1.2.28", "`--etcd-certfile` and `--etcd-keyfile` are set", FlagSet(a, {"etcd-certfile", "etcd-keyfile"}));
  r.Add("1.2.29", "`--tls-cert-file` and `--tls-private-key-file` are set",
        FlagSet(a, {"tls-cert-file", "tls-private-key-file"}));
  r.Add("1.2.30", "`--client-ca-file` is set", FlagSet(a, {"client-ca-file"}));
  r.Add("1.2.31", "`--etcd-cafile` is set", FlagSet(a, {"etcd-cafile"}));
  r.Add("1.2.32", "`--encryption-provider-config` is set", FlagSet(a, {"encryption-provider-config"}));
  r.Add("1.2.33", "encryption providers are appropriately configured", EncryptionProviders(enc));
  Outcome suites = FlagSet(a, {"tls-cipher-suites"});
  if (suites.verdict == Verdict::kFail)
    suites.reason = "not set: Go's default suites, which still offer CBC suites over TLS 1.2";
  r.Add("1.2.34", "the API server uses only strong cipher suites", suites);
}

std::string FirstKey(const YAML::Node& n) { return n.IsMap() && n.size() > 0 ? n.begin()->first.Scalar() : ""; }

Outcome EncryptionProviders(const YAML::Node& enc) {
  for (const auto& entry : enc["resources"]) {
    bool secrets = false;
    for (const auto& res : entry["resources"]) secrets = secrets || res.Scalar() == "secrets";
    if (!secrets) continue;
    const YAML::Node providers = entry["providers"];
    if (!providers || providers.size() == 0) return Failed("no providers for secrets");
    const std::string first = FirstKey(providers[0]);
    std::vector<std::string> rest;
    for (std::size_t i = 1; i < providers.size(); ++i) rest.push_back("`" + FirstKey(providers[i]) + "`");
    if (first == "identity") return Failed("Secrets are written in the clear (`identity` first)");
    if (first != "aescbc" && first != "secretbox" && first != "kms") {
      return Failed("Secrets are written with `" + first + "`, not aescbc, secretbox or kms");
    }
    std::set<std::size_t> sizes;
    for (const auto& k : providers[0][first]["keys"]) {
      if (auto bytes = Base64Decode(k["secret"].Scalar())) sizes.insert(bytes->size());
    }
    std::vector<std::string> size_text;
    size_text.reserve(sizes.size());
    for (auto n : sizes) size_text.push_back(std::to_string(n));
    const std::string key =
        sizes.empty()
            ? ""
            : " (" + Join(size_text, "/") + "-byte key from the cluster's `encryption.key`, made once by the founder)";
    return Pass("Secrets are written with `" + first + "`" + key + "; then " +
                (rest.empty() ? std::string("nothing") : Join(rest, ", ")) + ", to read only");
  }
  return Failed("the configuration does not cover secrets");
}

// serving: the kubelet asks for its serving certificate (`serverTLSBootstrap`), so the
// gate of 1.3.6 has something to rotate.
void ControllerManagerChecks(Builder& r, const Flags& c, int minor, bool serving) {
  if (Has(c, "terminated-pod-gc-threshold")) {
    r.Add("1.3.1", "`--terminated-pod-gc-threshold` is set as appropriate",
          Pass("`--terminated-pod-gc-threshold=" + Get(c, "terminated-pod-gc-threshold") + "`"));
  } else {
    r.Add("1.3.1", "`--terminated-pod-gc-threshold` is set as appropriate",
          Failed("not set; the default keeps 12500 terminated pods"));
  }
  r.Add("1.3.2", "`--profiling` is false", FlagIs(c, "profiling", "false", "true"));
  r.Add("1.3.3", "`--use-service-account-credentials` is true",
        FlagIs(c, "use-service-account-credentials", "true", "false"));
  r.Add("1.3.4", "`--service-account-private-key-file` is set", FlagSet(c, {"service-account-private-key-file"}));
  r.Add("1.3.5", "`--root-ca-file` is set", FlagSet(c, {"root-ca-file"}));
  const bool off = Contains(Plugins(c, "feature-gates"), "RotateKubeletServerCertificate=false");
  Outcome gate = PassIf(
      !off, off ? "disabled in `--feature-gates`" : "not disabled; the gate is on by default in " + Minor(minor));
  if (serving) {
    gate.reason += "; the kubelets ask for their serving certificates (`serverTLSBootstrap`, 4.2.12)";
    r.Add("1.3.6", "the RotateKubeletServerCertificate feature gate is true", gate);
  } else {
    r.AddNominal("1.3.6", "the RotateKubeletServerCertificate feature gate is true", gate,
                 "no kubelet asks for a serving certificate (`serverTLSBootstrap`, 4.2.12), so there is nothing for "
                 "the controller-manager to rotate");
  }
  r.Add("1.3.7", "`--bind-address` is 127.0.0.1", FlagIs(c, "bind-address", "127.0.0.1", "0.0.0.0"));
}

void SchedulerChecks(Builder& r, const Flags& s) {
  r.Add("1.4.1", "`--profiling` is false", FlagIs(s, "profiling", "false", "true"));
  r.Add("1.4.2", "`--bind-address` is 127.0.0.1", FlagIs(s, "bind-address", "127.0.0.1", "0.0.0.0"));
}

void EtcdChecks(Builder& r, const Flags& e, const Flags& a) {
  r.Add("2.1", "`--cert-file` and `--key-file` are set", FlagSet(e, {"cert-file", "key-file"}));
  r.Add("2.2", "`--client-cert-auth` is true", FlagIs(e, "client-cert-auth", "true", "false"));
  r.Add("2.3", "`--auto-tls` is not true",
        PassIf(Get(e, "auto-tls", "false") != "true",
               Has(e, "auto-tls") ? "`--auto-tls=" + Get(e, "auto-tls") + "`" : "not set; the default is false"));
  r.Add("2.4", "`--peer-cert-file` and `--peer-key-file` are set", FlagSet(e, {"peer-cert-file", "peer-key-file"}));
  r.Add("2.5", "`--peer-client-cert-auth` is true", FlagIs(e, "peer-client-cert-auth", "true", "false"));
  r.Add("2.6", "`--peer-auto-tls` is not true",
        PassIf(Get(e, "peer-auto-tls", "false") != "true", Has(e, "peer-auto-tls")
                                                               ? "`--peer-auto-tls=" + Get(e, "peer-auto-tls") + "`"
                                                               : "not set; the default is false"));
  const std::string ca = Get(e, "trusted-ca-file");
  if (!ca.empty() && ca != Get(a, "client-ca-file") && ca != Get(a, "requestheader-client-ca-file")) {
    r.Add("2.7", "a unique certificate authority is used for etcd",
          Pass("`--trusted-ca-file=" + ca + "`, not the Kubernetes or front-proxy CA (the founder makes three CAs)"));
  } else {
    r.Add("2.7", "a unique certificate authority is used for etcd",
          Failed("etcd trusts `" + ca + "`, which the apiserver also uses for its clients"));
  }
}

// Kubelet reads the kubelet's settings: a flag wins over the configuration file, as in
// the kubelet; each reason names the file and says when the profile set the field.
class Kubelet {
 public:
  Kubelet(const YAML::Node& config, Flags flags, const Inputs& in) : k_(config), f_(std::move(flags)), in_(in) {
    if (!in.kubelet_overrides.empty()) {
      try {
        for (const auto& kv : YAML::Load(in.kubelet_overrides)) overridden_.insert(kv.first.Scalar());
      } catch (const YAML::Exception&) {
        // The build has already refused such a profile (KubeletConfigYaml).
      }
    }
  }
  // Field is the configuration's value at a dotted path, or "" when it is not set.
  std::string Field(const std::string& dotted) const {
    YAML::Node n = k_;
    for (const auto& part : Split(dotted, '.')) {
      const YAML::Node& parent = n;
      if (!parent.IsMap() || !parent[part]) return "";
      n.reset(parent[part]);  // rebinds n; n = parent[part] would overwrite the tree
    }
    if (!n.IsScalar()) return n.IsNull() ? "" : "(set)";
    return n.Scalar();
  }
  bool Set(const std::string& dotted) const { return !Field(dotted).empty(); }
  // In names where FIELD's value comes from: the file, and the profile when it set it.
  std::string In(const std::string& dotted) const {
    const std::string top = Split(dotted, '.')[0];
    return " (" + in_.kubelet_config.path +
           (overridden_.count(top) != 0 ? ", from the profile's `kubelet.config`" : std::string()) + ")";
  }
  // Setting is "`field: value` (file...)", or the flag that overrides it.
  std::string Setting(const std::string& dotted, const std::string& flag) const {
    if (Has(f_, flag)) return "`--" + flag + "=" + Get(f_, flag) + "` (" + FlagFile(flag) + ")";
    return "`" + dotted + ": " + Field(dotted) + "`" + In(dotted);
  }
  // Value is the flag's value, else the field's, else fallback.
  std::string Value(const std::string& dotted, const std::string& flag, const std::string& fallback) const {
    if (Has(f_, flag)) return Get(f_, flag);
    const std::string v = Field(dotted);
    return v.empty() ? fallback : v;
  }
  bool FromFlagOrField(const std::string& dotted, const std::string& flag) const {
    return Has(f_, flag) || Set(dotted);
  }
  std::string FlagFile(const std::string& flag) const {
    const auto env = KubeletFlags("", in_.kubelet_env.text);
    return env.count(flag) != 0 ? in_.kubelet_env.path : in_.kubelet_unit.path;
  }
  const Flags& flags() const { return f_; }

 private:
  YAML::Node k_;
  Flags f_;
  const Inputs& in_;
  std::set<std::string> overridden_;
};

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

void KubeletChecks(Builder& r, const Kubelet& k) {
  const std::string anonymous = Lower(k.Value("authentication.anonymous.enabled", "anonymous-auth", "true"));
  r.Add("4.2.1", "anonymous authentication is off",
        PassIf(anonymous == "false", k.FromFlagOrField("authentication.anonymous.enabled", "anonymous-auth")
                                         ? k.Setting("authentication.anonymous.enabled", "anonymous-auth")
                                         : "not set; the kubelet's flag default is true"));
  const std::string mode = k.Value("authorization.mode", "authorization-mode", "AlwaysAllow");
  r.Add("4.2.2", "authorization mode is not AlwaysAllow",
        PassIf(mode != "AlwaysAllow", k.FromFlagOrField("authorization.mode", "authorization-mode")
                                          ? k.Setting("authorization.mode", "authorization-mode")
                                          : "not set; the kubelet's flag default is AlwaysAllow"));
  const std::string ca = k.Value("authentication.x509.clientCAFile", "client-ca-file", "");
  r.Add("4.2.3", "a client CA file is set",
        PassIf(!ca.empty(),
               ca.empty() ? "`authentication.x509.clientCAFile` is not set" + k.In("authentication.x509.clientCAFile")
                          : k.Setting("authentication.x509.clientCAFile", "client-ca-file")));
  const std::string port = k.Value("readOnlyPort", "read-only-port", "0");
  r.Add("4.2.4", "the read-only port is 0",
        PassIf(port == "0", k.FromFlagOrField("readOnlyPort", "read-only-port")
                                ? k.Setting("readOnlyPort", "read-only-port")
                                : "not set; 0 (off) is the configuration file's default"));
  if (!k.FromFlagOrField("streamingConnectionIdleTimeout", "streaming-connection-idle-timeout")) {
    r.Add("4.2.5", "the streaming connection idle timeout is not 0", Pass("not set; the default is 4h"));
  } else {
    const std::string idle = k.Value("streamingConnectionIdleTimeout", "streaming-connection-idle-timeout", "");
    r.Add("4.2.5", "the streaming connection idle timeout is not 0",
          PassIf(idle != "0" && idle != "0s",
                 k.Setting("streamingConnectionIdleTimeout", "streaming-connection-idle-timeout")));
  }
  const std::string protect = Lower(k.Value("protectKernelDefaults", "protect-kernel-defaults", "false"));
  r.Add("4.2.6", "`protectKernelDefaults` is true",
        PassIf(protect == "true", protect == "true" ? k.Setting("protectKernelDefaults", "protect-kernel-defaults")
                                                    : "not set: with it the kubelet refuses to start unless the "
                                                      "kernel's tunables (panic, overcommit) already have the values "
                                                      "it expects, and the image does not set them"));
  const std::string chains = Lower(k.Value("makeIPTablesUtilChains", "make-iptables-util-chains", "true"));
  r.Add("4.2.7", "`makeIPTablesUtilChains` is true",
        PassIf(chains == "true", k.FromFlagOrField("makeIPTablesUtilChains", "make-iptables-util-chains")
                                     ? k.Setting("makeIPTablesUtilChains", "make-iptables-util-chains")
                                     : "not set; the default is true"));
  if (Has(k.flags(), "hostname-override")) {
    r.Add("4.2.8", "`--hostname-override` is not set",
          Failed("`--hostname-override` is the node's name from its node config (" + k.FlagFile("hostname-override") +
                 "), so the Node object carries the name in its certificate whatever the host is called"));
  } else {
    r.Add("4.2.8", "`--hostname-override` is not set", Pass("not set"));
  }
  r.Add("4.2.9", "`eventRecordQPS` captures events appropriately",
        Pass(k.FromFlagOrField("eventRecordQPS", "event-qps") ? k.Setting("eventRecordQPS", "event-qps")
                                                              : "not set; the default is 5 per second"));
  const std::string cert = k.Value("tlsCertFile", "tls-cert-file", "");
  const std::string key = k.Value("tlsPrivateKeyFile", "tls-private-key-file", "");
  r.Add("4.2.10", "`tlsCertFile` and `tlsPrivateKeyFile` are set",
        PassIf(!cert.empty() && !key.empty(), !cert.empty() && !key.empty()
                                                  ? k.Setting("tlsCertFile", "tls-cert-file")
                                                  : "not set: the kubelet serves with a certificate it signs itself"));
  const std::string rotate = Lower(k.Value("rotateCertificates", "rotate-certificates", "false"));
  r.Add("4.2.11", "`rotateCertificates` is not false",
        PassIf(rotate == "true", k.FromFlagOrField("rotateCertificates", "rotate-certificates")
                                     ? k.Setting("rotateCertificates", "rotate-certificates")
                                     : "not set; the default is false"));
  const std::string bootstrap = Lower(k.Value("serverTLSBootstrap", "rotate-server-certificates", "false"));
  r.Add("4.2.12", "the serving certificate is rotated (RotateKubeletServerCertificate)",
        PassIf(bootstrap == "true", bootstrap == "true"
                                        ? k.Setting("serverTLSBootstrap", "rotate-server-certificates")
                                        : "`serverTLSBootstrap` is not set: the serving certificate is self-signed "
                                          "and not rotated (the client certificate is: 4.2.11)"));
  const bool suites = k.FromFlagOrField("tlsCipherSuites", "tls-cipher-suites");
  r.Add("4.2.13", "the kubelet uses only strong cipher suites",
        PassIf(suites, suites ? "`tlsCipherSuites` set" + k.In("tlsCipherSuites")
                              : "not set: Go's default suites, which still offer CBC suites over TLS 1.2"));
}

void FileChecks(Builder& r, const Inputs& in) {
  const std::string& unit = in.firstboot_unit;
  struct Pod {
    const char *perm, *own, *what, *name;
  };
  const Pod pods[] = {
      {"1.1.1", "1.1.2", "the API server pod specification", "manifests/kube-apiserver.yaml"},
      {"1.1.3", "1.1.4", "the controller manager pod specification", "manifests/kube-controller-manager.yaml"},
      {"1.1.5", "1.1.6", "the scheduler pod specification", "manifests/kube-scheduler.yaml"},
      {"1.1.7", "1.1.8", "the etcd pod specification", "manifests/etcd.yaml"},
  };
  for (const auto& p : pods) {
    r.Add(p.perm, std::string(p.what) + " file has permissions 644 or stricter", ModeAtMost(in, p.name, 0644));
    r.Add(p.own, std::string(p.what) + " file is owned by root:root", RootOwned(unit, p.what));
  }
  r.Add("1.1.9", "the CNI configuration files have permissions 644 or stricter",
        AtMost(in.cni_mode, 0644, in.cni_mode_source));
  r.Add("1.1.10", "the CNI configuration files are owned by root:root", RootOwned(unit, "10-sprout.conflist"));
  r.Add("1.1.11", "the etcd data directory has permissions 700 or stricter",
        Pass("0700 (lib/formationd/etcd_supervisor.cc sets `owner_all` at every start of etcd)"));
  r.Add("1.1.12", "the etcd data directory is owned by etcd:etcd",
        Failed("root's: etcd runs as root, in its static pod as in kubeadm's, and there is no etcd user on the node"));
  const std::pair<const char*, const char*> confs[] = {
      {"1.1.13", "admin.conf"}, {"1.1.15", "scheduler.conf"}, {"1.1.17", "controller-manager.conf"}};
  for (const auto& [perm, name] : confs) {
    const std::string own = "1.1." + std::to_string(std::stoi(std::string(perm).substr(4)) + 1);
    r.Add(perm, "`" + std::string(name) + "` has permissions 644 or stricter", ModeAtMost(in, name, 0644));
    r.Add(own, "`" + std::string(name) + "` is owned by root:root", RootOwned(unit, name));
  }
  r.Add("1.1.19", "the PKI directory and its files are owned by root:root", RootOwned(unit, "pki/"));
  auto listed = [&](const std::string& suffix, unsigned limit, std::vector<std::string>& wide) {
    int n = 0;
    for (const auto& [name, mode] : in.modes) {
      if (name.rfind("pki/", 0) != 0 || name.size() < suffix.size() ||
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      ++n;
      if ((mode & ~limit) != 0) wide.push_back(name + " " + Octal(mode));
    }
    return n;
  };
  std::vector<std::string> wide_certs, open_keys;
  const int certs = listed(".crt", 0644, wide_certs);
  r.Add("1.1.20", "the PKI certificate files have permissions 644 or stricter",
        PassIf(wide_certs.empty() && certs > 0,
               wide_certs.empty()
                   ? std::to_string(certs) + " certificates, each 0644 or stricter (" + in.modes_source + ")"
                   : "wider: " + Join(wide_certs, ", ")));
  const int keys = listed(".key", 0600, open_keys);
  r.Add("1.1.21", "the PKI key files have permissions 600",
        PassIf(open_keys.empty() && keys > 0, open_keys.empty()
                                                  ? std::to_string(keys) + " keys, each 0600 (" + in.modes_source + ")"
                                                  : "wider: " + Join(open_keys, ", ")));
}

void AuditChecks(Builder& r, const Flags& a, const YAML::Node& policy) {
  r.Add("3.1.1", "client certificate authentication is not used for users",
        Failed("the one user credential, `admin.conf`, is a client certificate in `system:masters`, as kubeadm's; "
               "no OIDC or other user authentication is configured"));
  const bool has_policy = !Get(a, "audit-policy-file").empty();
  const YAML::Node rules = policy["rules"];
  const std::size_t n = rules && rules.IsSequence() ? rules.size() : 0;
  r.Add("3.2.1", "a minimal audit policy is created",
        PassIf(has_policy && n > 0,
               has_policy ? "`--audit-policy-file=" + Get(a, "audit-policy-file") + "`, " + std::to_string(n) + " rules"
                          : "no `--audit-policy-file`"));
  std::set<std::string> levels;
  for (std::size_t i = 0; i < n; ++i) levels.insert(rules[i]["level"] ? rules[i]["level"].Scalar() : "");
  r.Add("3.2.2", "the audit policy covers key security concerns",
        PassIf(has_policy && !levels.empty(),
               "every request is logged at " + Join(std::vector<std::string>(levels.begin(), levels.end()), "/") +
                   " (who, what, when, the answer), never a body: so no Secret's value reaches the log"));
}

void NodeFileChecks(Builder& r, const Inputs& in) {
  const std::string& unit = in.firstboot_unit;
  const bool kubelet = !in.kubelet_config.text.empty();
  const Outcome none = NotApplicable("the profile's pod host is podman: the image has no kubelet");
  const std::string root_file =
      "root's: a file of the image's read-only root, every entry of which `sprout build` writes with uid and gid 0 "
      "(lib/image/rootfs.cc)";
  r.Add(
      "4.1.1", "the kubelet service file has permissions 644 or stricter",
      kubelet ? AtMost(in.kubelet_unit_mode, 0644, in.kubelet_unit.path + ", set by " + in.image_modes_source) : none);
  r.Add("4.1.2", "the kubelet service file is owned by root:root", kubelet ? Pass(root_file) : none);
  r.Add("4.1.3", "the proxy kubeconfig file has permissions 644 or stricter",
        ModeAtMost(in, "kubelet.conf", 0644,
                   "kube-proxy reads the kubelet's kubelet.conf; control plane: " + in.modes_source +
                       "; a worker's is the kubelet's own, 0600"));
  r.Add("4.1.4", "the proxy kubeconfig file is owned by root:root", RootOwned(unit, "kubelet.conf"));
  r.Add(
      "4.1.5", "`kubelet.conf` has permissions 644 or stricter",
      ModeAtMost(in, "kubelet.conf", 0644,
                 "control plane: " + in.modes_source + "; a worker's is written by the kubelet's TLS bootstrap, 0600"));
  Outcome owned = RootOwned(unit, "kubelet.conf");
  if (owned.verdict == Verdict::kPass)
    owned.reason += "; a worker's is the kubelet's, whose unit sets no `User=` either";
  r.Add("4.1.6", "`kubelet.conf` is owned by root:root", owned);
  r.Add(
      "4.1.7", "the certificate authorities file has permissions 644 or stricter",
      ModeAtMost(in, "pki/ca.crt", 0644, in.modes_source + "; a worker's is written 0644 by firstboot/kube_agent.cc"));
  r.Add("4.1.8", "the client certificate authorities file is owned by root:root", RootOwned(unit, "pki/ca.crt"));
  r.Add("4.1.9", "the kubelet's config.yaml has permissions 644 or stricter",
        kubelet ? AtMost(in.kubelet_config_mode, 0644, in.kubelet_config.path + ", set by " + in.image_modes_source)
                : none);
  r.Add("4.1.10", "the kubelet's config.yaml is owned by root:root", kubelet ? Pass(root_file) : none);
}

std::string SourceOf(const Rendered& f) { return "`" + f.path + "`" + (f.origin.empty() ? "" : " (" + f.origin + ")"); }

}  // namespace

std::map<std::string, std::string> ParseFlags(const std::vector<std::string>& args) {
  std::map<std::string, std::string> out;
  for (const auto& a : args) {
    if (a.rfind("--", 0) != 0) continue;
    const auto eq = a.find('=');
    if (eq == std::string::npos) {
      out[a.substr(2)] = "true";
    } else {
      out[a.substr(2, eq - 2)] = a.substr(eq + 1);
    }
  }
  return out;
}

std::vector<std::string> ShellWords(const std::string& line) {
  std::vector<std::string> out;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (char c : line) {
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else {
        word += c;
      }
    } else if (c == '"' || c == '\'') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) out.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) out.push_back(word);
  return out;
}

std::map<std::string, std::string> KubeletFlags(const std::string& unit, const std::string& env) {
  std::vector<std::string> args;
  for (const auto& line : Split(unit, '\n')) {
    if (line.rfind("ExecStart=", 0) != 0) continue;
    auto words = ShellWords(line.substr(10));
    if (!words.empty()) args.insert(args.end(), words.begin() + 1, words.end());
  }
  for (const auto& line : Split(env, '\n')) {
    if (line.rfind("KUBELET_ARGS=", 0) != 0) continue;
    auto value = ShellWords(line.substr(13));
    if (!value.empty()) {
      auto words = ShellWords(value[0]);
      args.insert(args.end(), words.begin(), words.end());
    }
  }
  args.erase(std::remove_if(args.begin(), args.end(), [](const std::string& a) { return a.rfind('$', 0) == 0; }),
             args.end());
  return ParseFlags(args);
}

Result<Report> Judge(const Inputs& in) {
  auto apiserver = PodFlags(in.apiserver);
  if (!apiserver) return Fail(apiserver.error());
  auto cm = PodFlags(in.controller_manager);
  if (!cm) return Fail(cm.error());
  auto scheduler = PodFlags(in.scheduler);
  if (!scheduler) return Fail(scheduler.error());
  auto etcd = PodFlags(in.etcd);
  if (!etcd) return Fail(etcd.error());
  auto enc = LoadYaml(in.encryption_config);
  if (!enc) return Fail(enc.error());
  auto policy = LoadYaml(in.audit_policy);
  if (!policy) return Fail(policy.error());

  Report report;
  report.subject = in.subject;
  Builder r(report);
  r.Section("1.1 Control plane node configuration files",
            "the files of `/etc/kubernetes` with their modes, as the control-plane step writes them, "
            "`sprout-firstboot.service`, and the modes the code sets (each named)");
  FileChecks(r, in);
  r.Section("1.2 API server", SourceOf(in.apiserver) + ", " + SourceOf(in.encryption_config));
  ApiserverChecks(r, *apiserver, *enc, in.kubernetes_minor);
  r.Section("1.3 Controller manager", SourceOf(in.controller_manager));
  bool serving = false;
  if (!in.kubelet_config.text.empty()) {
    auto kubelet = LoadYaml(in.kubelet_config);
    if (!kubelet) return Fail(kubelet.error());
    const std::string v = Lower(Kubelet(*kubelet, KubeletFlags(in.kubelet_unit.text, in.kubelet_env.text), in)
                                    .Value("serverTLSBootstrap", "rotate-server-certificates", "false"));
    serving = v == "true";
  }
  ControllerManagerChecks(r, *cm, in.kubernetes_minor, serving);
  r.Section("1.4 Scheduler", SourceOf(in.scheduler));
  SchedulerChecks(r, *scheduler);
  r.Section("2 etcd", SourceOf(in.etcd));
  EtcdChecks(r, *etcd, *apiserver);
  r.Section("3 Control plane configuration", SourceOf(in.apiserver) + ", " + SourceOf(in.audit_policy));
  AuditChecks(r, *apiserver, *policy);
  r.Section("4.1 Worker node configuration files",
            "the image's files with their modes, as " + in.image_modes_source +
                " writes them, the files of `/etc/kubernetes` as the control-plane step writes them, "
                "`sprout-firstboot.service`");
  NodeFileChecks(r, in);
  if (in.kubelet_config.text.empty()) {
    r.Section("4.2 Kubelet", "the profile (no kubelet)");
    for (const auto& id : {"4.2.1", "4.2.2", "4.2.3", "4.2.4", "4.2.5", "4.2.6", "4.2.7", "4.2.8", "4.2.9", "4.2.10",
                           "4.2.11", "4.2.12", "4.2.13"}) {
      r.Add(id, "the kubelet's settings", NotApplicable("the profile's pod host is podman: the image has no kubelet"));
    }
    return report;
  }
  auto kubelet = LoadYaml(in.kubelet_config);
  if (!kubelet) return Fail(kubelet.error());
  r.Section("4.2 Kubelet",
            SourceOf(in.kubelet_config) + ", " + SourceOf(in.kubelet_unit) + " and " + SourceOf(in.kubelet_env));
  KubeletChecks(r, Kubelet(*kubelet, KubeletFlags(in.kubelet_unit.text, in.kubelet_env.text), in));
  return report;
}

std::string Markdown(const Report& report) {
  int pass = 0, nominal = 0, fail = 0, na = 0;
  for (const auto& s : report.sections) {
    for (const auto& c : s.checks) {
      pass += c.verdict == Verdict::kPass ? 1 : 0;
      nominal += c.nominal ? 1 : 0;
      fail += c.verdict == Verdict::kFail ? 1 : 0;
      na += c.verdict == Verdict::kNotApplicable ? 1 : 0;
    }
  }
  std::string out = "# CIS Kubernetes Benchmark 1.20: " + report.subject + R"(

Generated by `sprout cis PROFILE` from the files sprout renders for the profile, as
`sprout build` bakes them and sprout-firstboot writes them on a control-plane node (a
sample node: its name and addresses are stand-ins): the static pods from the image's
templates, the apiserver's encryption configuration and audit policy, the kubelet's
configuration (with the profile's `kubelet.config`), unit and arguments, and the modes
of every file the control-plane step writes. docs/cis.md is this report for
profiles/default.yaml and docs/cis-1.36.md for profiles/kubernetes-1.36.yaml; do not
edit them by hand (ctest's `cis_report_test` fails when they differ from the report).
Checks are those of the CIS Kubernetes V1.20 Benchmark (v1.0.0) for the control-plane
node (1.1 to 1.4), etcd (2), the control plane's configuration (3) and the worker node
(4.1, 4.2), in sprout's words; on a later Kubernetes a check of a flag that is gone is
not applicable. A pass marked *nominal* meets the letter of its check, not its purpose;
its reason says why. The policies (5: RBAC, pod security, network policies, secrets
management) are about the workloads a cluster runs, and sprout ships none of its own
beyond Kubernetes' bootstrap roles, so they are not listed here.

)";
  out += "**" + std::to_string(pass) + " pass (" + std::to_string(nominal) + " of them nominal), " +
         std::to_string(fail) + " fail, " + std::to_string(na) + " not applicable.**\n";
  for (const auto& s : report.sections) {
    out += "\n## " + s.title + "\n\nFrom " + s.source + ".\n\n| check | recommendation | result | reason |\n" +
           "|---|---|---|---|\n";
    for (const auto& c : s.checks) {
      std::string result = c.verdict == Verdict::kFail   ? "**fail**"
                           : c.verdict == Verdict::kPass ? (c.nominal ? "pass (*nominal*)" : "pass")
                                                         : "not applicable";
      std::string reason;
      for (char ch : c.reason) reason += ch == '|' ? std::string("\\|") : std::string(1, ch);
      out += "| " + c.id + " | " + c.recommendation + " | " + result + " | " + reason + " |\n";
    }
  }
  return out;
}

}  // namespace sprout::cis
