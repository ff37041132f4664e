#include "formationd/founding.h"

#include <systemd/sd-daemon.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "formationd/join_endpoint.h"
#include "formationd/journal.h"
#include "formationd/membership.h"
#include "pki/pki.h"
#include "util/fs.h"
#include "util/text.h"

namespace sprout::formation {

// PlanRestore starts a founding member from the backup of o.restore: the bundle's PKI
// (the same on every restoring member, so nothing is fetched), its etcd data made from
// the snapshot with this founding's initial cluster and a token of the restore. A
// failure starts nothing and says why (STATUS=error); a restart tries again.
FoundingPlan PlanRestore(const DaemonOptions& o, const StartEtcdNew& s, EtcdArgs args) {
  const RestorePlan& r = *o.restore;
  args.initial_cluster_token = s.founding.token + r.token_suffix;
  Credentials c = r.credentials;
  c.api_endpoints = ApiEndpoints(s.founding);
  auto fail = [&](const std::string& why) {
    std::string message = "restore from " + r.source + " failed, etcd not started: " + why;
    Journal(LOG_ERR, message, {{"PHASE", "error"}, {"RESTORE_FROM", r.source}});
    sd_notifyf(0, "STATUS=error: %s", message.c_str());
    return FoundingPlan{};
  };
  auto files = CredentialFiles(o);
  if (auto st = InstallCredentials(files, c); !st) return fail(st.error());
  if (s.founding.founder == o.name) {
    if (auto st = WriteFileAtomic(files.founded, s.founding.token + "\n"); !st) return fail(st.error());
  }
  // A data dir left empty by an earlier try is removed; one with data is never touched
  // (Found only comes here without etcd's member folder).
  std::error_code ec;
  std::filesystem::remove(o.etcd_data_dir, ec);
  if (auto st = r.make_data_dir(args); !st) return fail(st.error());
  Journal(LOG_INFO,
          "restored etcd from " + r.source + " as founding member of " + args.initial_cluster_token + " (" +
              args.initial_cluster + ")",
          {{"PHASE", "founding"}, {"RESTORE_FROM", r.source}, {"CLUSTER_TOKEN", args.initial_cluster_token}});
  return {FoundingPlan::kServe, c, args};
}

// PlanFounding: the founder makes the PKI (once), the others fetch it from the
// founder's join endpoint in the background first. A founder never
// makes a second PKI (DecideFounderPki): one whose PKI from an earlier run is there but
// unusable says so loudly, names the file and the fix, and fetches the PKI from the
// other founding members, as they did from it; with nobody to ask it waits for a
// person. A lost bootstrap token alone is fetched back, or made anew when no other
// member holds it; the CAs stay.
FoundingPlan PlanFounding(const DaemonOptions& o, const EtcdConfig& etcd_config, const StartEtcdNew& s) {
  EtcdArgs args = EtcdNewArgs(etcd_config, s);
  std::error_code ec;
  if (o.restore && !std::filesystem::exists(o.etcd_data_dir / "member", ec)) return PlanRestore(o, s, args);
  auto files = CredentialFiles(o);
  auto local = LoadLocalCredentials(files, s.founding);
  auto cas = pki::LoadCAs(files.pki_dir);
  auto traces = TracesOfEarlierFounding(files, etcd_config.data_dir);
  FounderPkiInput in;
  in.founder = s.founding.founder == o.name;
  in.local_loads = local.ok();
  in.cas_load = cas.ok();
  in.traces = !traces.empty();
  in.other_members = std::any_of(s.founding.members.begin(), s.founding.members.end(),
                                 [&o](const Member& m) { return m.name != o.name; });
  std::string why = local ? "" : local.error();
  switch (DecideFounderPki(in)) {
    case FounderPki::kUseLocal:
      return {FoundingPlan::kServe, *local, args};
    case FounderPki::kFetch:
      if (in.founder) {
        Journal(LOG_ERR,
                "founder: this node made the PKI of " + s.founding.token + " before (" + Join(traces, ", ") +
                    ") but cannot use it: " + why +
                    "; not making a second PKI, which would split it from the other members; fetching the PKI "
                    "from them instead (if no member answers, restore that file from a backup or another "
                    "control-plane node)",
                {{"PHASE", "error"}, {"PKI_PROBLEM", why}});
      }
      return {FoundingPlan::kFetch, {}, args};
    case FounderPki::kNewToken: {
      auto token = MakeBootstrapToken();
      if (!token) {
        Journal(LOG_ERR, "cannot make a bootstrap token: " + token.error(), {{"PHASE", "error"}});
        return {};
      }
      Journal(LOG_WARNING,
              "founder: " + why + "; keeping the CAs under " + o.pki_dir.string() +
                  " and making a new bootstrap token, since no other founding member holds the old one",
              {{"PHASE", "founding"}, {"PKI_PROBLEM", why}});
      return {FoundingPlan::kServe, Credentials{*cas, *token, ApiEndpoints(s.founding)}, args};
    }
    case FounderPki::kRefuse: {
      std::string message = "founder: this node made or held a PKI before (" + Join(traces, ", ") +
                            ") but cannot use it: " + why +
                            "; not making a second PKI and not starting etcd; no other founding member to fetch "
                            "it from: restore that file from a backup, then restart sprout-firstboot";
      Journal(LOG_ERR, message, {{"PHASE", "error"}, {"PKI_PROBLEM", why}});
      sd_notifyf(0, "STATUS=error: %s", message.c_str());
      return {};
    }
    case FounderPki::kMake:
      break;
  }
  // The Kubernetes CA's key comes from the cluster secret: a worker personalized with
  // that secret pins its hash and refuses a join endpoint that hands it any other CA.
  auto made = MakeFounderCredentials(s.founding, o.secret);
  if (!made) {
    Journal(LOG_ERR, "cannot make the cluster PKI: " + made.error(), {{"PHASE", "error"}});
    return {};
  }
  // Installed, then marked, then served. Every CA file counts as a trace, so even a
  // crash before the mark never leads to a second PKI.
  auto installed = InstallCredentials(files, *made);
  if (installed) installed = WriteFileAtomic(files.founded, s.founding.token + "\n");
  if (!installed) {
    Journal(LOG_ERR, "cannot install the cluster PKI: " + installed.error(), {{"PHASE", "error"}});
    return {};
  }
  auto hash = pki::SpkiSha256(made->cas.kubernetes_ca.cert_pem);
  Journal(LOG_INFO,
          "founder: made the etcd, Kubernetes and front-proxy CAs under " + o.pki_dir.string() +
              " (the Kubernetes CA's key derived from the cluster secret: workers pin " + (hash ? *hash : "?") + ")",
          {{"PHASE", "founding"}, {"CA_CERT_HASH", hash ? *hash : ""}});
  return {FoundingPlan::kServe, *made, args};
}

}  // namespace sprout::formation
