#include "firstboot/workloads.h"

#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cxxopts.hpp>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "formationd/state_file.h"
#include "kube/workloads.h"
#include "util/fs.h"
#include "util/json_field.h"
#include "util/text.h"

namespace sprout::firstboot {

namespace fs = std::filesystem;
using kube::ObjectState;

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

const std::string kRecordPath =
    std::string("/api/v1/namespaces/") + kube::kWorkloadsNamespace + "/configmaps/" + kube::kWorkloadsRecord;
const std::string kLeasePath = std::string("/apis/coordination.k8s.io/v1/namespaces/") + kube::kWorkloadsNamespace +
                               "/leases/" + kube::kWorkloadsLease;
const std::string kLeases =
    std::string("/apis/coordination.k8s.io/v1/namespaces/") + kube::kWorkloadsNamespace + "/leases";
const char* const kApply = "?fieldManager=sprout&force=true";
const char* const kApplyType = "application/apply-patch+yaml";
// The Lease is written by create and update: its managedFields name this manager.
const char* const kLeaseManager = "?fieldManager=sprout-firstboot";

std::int64_t MonotonicSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// MicroTime is now as a Kubernetes MicroTime (RFC 3339 with microseconds, UTC).
std::string MicroTime() {
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  std::string frac = std::to_string(us % 1000000);
  frac.insert(0, 6 - frac.size(), '0');
  return UtcTime(us / 1000000, "%Y-%m-%dT%H:%M:%S") + "." + frac + "Z";
}

std::string Now() {
  return UtcTime(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count(),
      "%Y-%m-%dT%H:%M:%SZ");
}

const char* StateName(ObjectState s) {
  switch (s) {
    case ObjectState::kApplied:
      return "applied";
    case ObjectState::kPending:
      return "pending";
    case ObjectState::kFailed:
      return "failed";
  }
  return "?";
}

// Outcome is how a pass ended: done (all applied, nothing left to prune but what is
// kept on purpose), or to be retried, and why.
struct Outcome {
  bool done = false;
  std::string problem;
};

// Applier holds the image's workloads and what this run of sprout-firstboot learned.
class Applier {
 public:
  Applier(const WorkloadsOptions& o, WorkloadsApi api, WorkloadsLog log)
      : o_(o), api_(std::move(api)), log_(std::move(log)) {}

  // Load reads index.json and every object file; an object that cannot be read fails on
  // its own, a bad index fails all.
  Status Load() {
    const fs::path index_file = o_.dir / "index.json";
    auto text = ReadFile(index_file);
    if (!text) return Fail(index_file.string() + ": " + text.error());
    auto index = kube::ParseWorkloadIndex(*text, index_file.string());
    if (!index) return Fail(index.error());
    index_ = std::move(*index);
    for (const auto& w : index_.workloads) {
      for (const auto& e : w.objects) {
        kube::LoadedObject l;
        l.workload = w.name;
        l.entry = e;
        const fs::path file = o_.dir / e.file;
        if (auto body = ReadFile(file); !body) {
          l.problem = file.string() + ": " + body.error();
        } else {
          l.body = json::parse(*body, nullptr, false);
          if (l.body.is_discarded()) {
            l.problem = file.string() + ": not JSON; the image's workloads are damaged (rebuild it)";
          } else if (auto why = kube::CheckObject(e, l.body); !why.empty()) {
            l.problem = file.string() + ": " + why;
          }
        }
        loaded_.push_back(std::move(l));
      }
    }
    results_.assign(loaded_.size(), {ObjectState::kPending, "not applied yet"});
    return Ok{};
  }

  // Pass is one round: read the record, decide, take the Lease, apply, prune, record,
  // release. at_start applies whatever the record says (every start does); a retry (the
  // pass after one that did not finish) sends only what the passes before it did not
  // apply.
  Outcome Pass(bool at_start, bool retry, const volatile std::sig_atomic_t* stop) {
    report_ = ojson::object();
    applied_pass_ = false;
    report_["digest"] = index_.digest;
    if (index_.serial > 0) report_["serial"] = index_.serial;
    std::optional<kube::WorkloadRecord> record;
    auto got = Call("GET", kRecordPath);
    if (!got) return Retry("cannot read the record " + RecordName() + ": " + got.error());
    if (got->status == 200) {
      auto r = kube::ParseRecord(got->body);
      if (r) {
        record = std::move(*r);
      } else {
        Note(LOG_WARNING, "the record " + RecordName() + " is damaged (" + r.error() +
                              "); applying as if there were none, and pruning nothing");
      }
    } else if (got->status != 404) {
      return Retry("cannot read the record " + RecordName() + ": " + kube::ApiMessage(got->status, got->body));
    }
    const auto decision = kube::Decide(record, index_, at_start);
    report_["decision"] = decision.why;
    decision_ = decision.why;
    if (decision.decision != kube::Decision::kApply) {
      ShowResults(record);
      WriteReport();
      if (decision.decision == kube::Decision::kSkip) Note(LOG_INFO, "not applying: " + decision.why);
      return {true, ""};
    }
    Note(LOG_INFO, "applying the image's workloads (" + index_.digest + "): " + decision.why);
    if (auto held = Acquire(stop); !held.empty()) {
      report_["lease"] = held;
      ShowResults(record);
      WriteReport();
      return Retry(held);
    }
    report_["lease"] = "held by this node (" + o_.node_name + ") while it applied";
    applied_pass_ = true;
    if (!retry) applied_.clear();
    ApplyAll(retry, stop);
    std::set<std::string> forgotten;
    std::vector<std::string> prune_lines;
    bool prune_retry = false;
    if (record && !lost_) Prune(*record, forgotten, prune_lines, prune_retry);
    std::string problem;
    if (!lost_) {
      if (auto s = WriteRecord(record, forgotten, prune_lines); !s.empty()) problem = s;
    }
    Release();
    ShowResults(record);
    report_["prune"] = prune_lines;
    std::size_t failed = 0, pending = 0;
    for (const auto& r : results_) {
      failed += r.state == ObjectState::kFailed ? 1 : 0;
      pending += r.state == ObjectState::kPending ? 1 : 0;
    }
    if (lost_ && problem.empty()) problem = "the Lease " + LeaseName() + " was lost during the pass";
    if (problem.empty() && (failed > 0 || pending > 0)) {
      problem = std::to_string(failed) + " failed, " + std::to_string(pending) + " pending (of " +
                std::to_string(results_.size()) + " objects)";
    }
    if (problem.empty() && prune_retry) problem = "some objects to prune are left to try again";
    report_["problem"] = problem;
    WriteReport();
    return {problem.empty(), problem};
  }

  // Results are the objects' states for --apply-once's output.
  void Print(std::ostream& out) const {
    if (!applied_pass_) {
      out << "nothing applied: " << decision_ << "\n";
      return;
    }
    for (const auto& step : kube::ApplyOrder(loaded_)) {
      const auto& l = loaded_[step.object];
      const auto& r = results_[step.object];
      out << StateName(r.state) << ": " << l.workload << ": " << kube::Describe(l.entry.ref)
          << (r.message.empty() || r.state == ObjectState::kApplied ? "" : ": " + r.message) << "\n";
    }
    if (report_.contains("prune")) {
      for (const auto& p : report_.at("prune")) out << p.get<std::string>() << "\n";
    }
  }

 private:
  const WorkloadsOptions& o_;
  WorkloadsApi api_;
  WorkloadsLog log_;
  kube::WorkloadIndex index_;
  std::vector<kube::LoadedObject> loaded_;
  std::vector<kube::ObjectResult> results_;
  std::set<std::string> applied_;  // identities applied in this run of this image's objects
  ojson report_;
  std::string written_;  // workloads.json as last written
  // The Lease as this node holds it.
  kube::LeaseSeen seen_;
  std::string lease_rv_;
  std::int64_t lease_transitions_ = 0;
  std::string lease_acquired_;
  std::int64_t renewed_at_ = 0;
  bool lost_ = false;
  bool applied_pass_ = false;         // the last pass applied (held the Lease)
  std::string decision_;              // and why it applied, or did not
  std::set<std::string> discovered_;  // group versions asked about in this pass
  std::optional<std::vector<std::pair<std::string, kube::Resource>>> namespaced_;  // for the Namespace guard

  static std::string RecordName() {
    return std::string("ConfigMap ") + kube::kWorkloadsNamespace + "/" + kube::kWorkloadsRecord;
  }
  static std::string LeaseName() {
    return std::string("Lease ") + kube::kWorkloadsNamespace + "/" + kube::kWorkloadsLease;
  }

  Result<kube::ApiResponse> Call(const std::string& method, const std::string& path, const std::string& body = "",
                                 const std::string& type = "application/json") {
    return api_(method, path, body, type);
  }

  Outcome Retry(const std::string& problem) {
    report_["problem"] = problem;
    WriteReport();
    return {false, problem};
  }

  void Note(int priority, const std::string& m) { log_(priority, "workloads: " + m); }

  // Acquire takes the Lease, waiting at most lease_wait_seconds for another holder;
  // "" when held, else who holds it.
  std::string Acquire(const volatile std::sig_atomic_t* stop) {
    lost_ = false;
    const int wait = o_.lease_wait_seconds > 0 ? o_.lease_wait_seconds : 2 * o_.lease_seconds;
    const auto deadline = MonotonicSeconds() + wait;
    std::string why;
    while (*stop == 0) {
      auto got = Call("GET", kLeasePath);
      if (!got) {
        why = "cannot read the " + LeaseName() + ": " + got.error();
      } else if (got->status == 404) {
        const std::string now = MicroTime();
        auto made =
            Call("POST", kLeases + kLeaseManager, kube::LeaseBody(o_.node_name, o_.lease_seconds, "", 0, now, now));
        if (made && made->status == 201) return Held(made->body, 0, now);
        why = "cannot create the " + LeaseName() + ": " +
              (made ? kube::ApiMessage(made->status, made->body) : made.error());
      } else if (got->status != 200) {
        why = "cannot read the " + LeaseName() + ": " + kube::ApiMessage(got->status, got->body);
      } else if (auto lease = kube::ParseLease(got->body); !lease) {
        why = LeaseName() + ": " + lease.error();
      } else {
        const auto step = kube::DecideLease(*lease, o_.node_name, MonotonicSeconds(), seen_);
        if (step == kube::LeaseStep::kWait) {
          why = LeaseName() + " is held by " + lease->holder + "; this node applies once it is released or expires";
        } else {
          const bool ours = step == kube::LeaseStep::kRenew;
          const std::string now = MicroTime();
          const auto transitions = lease->transitions + (ours ? 0 : 1);
          const std::string acquired = ours && !lease->acquire_time.empty() ? lease->acquire_time : now;
          auto put = Call(
              "PUT", kLeasePath + kLeaseManager,
              kube::LeaseBody(o_.node_name, o_.lease_seconds, lease->resource_version, transitions, acquired, now));
          if (put && put->status == 200) {
            if (!ours && !lease->holder.empty()) {
              Note(LOG_INFO, "took over the " + LeaseName() + " from " + lease->holder + ", which stopped renewing it");
            }
            return Held(put->body, transitions, acquired);
          }
          why =
              "cannot take the " + LeaseName() + ": " + (put ? kube::ApiMessage(put->status, put->body) : put.error());
        }
      }
      if (MonotonicSeconds() >= deadline) return why;
      for (int i = 0; i < 2 && *stop == 0; ++i) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    return "stopped";
  }

  std::string Held(const std::string& body, std::int64_t transitions, const std::string& acquired) {
    auto lease = kube::ParseLease(body);
    lease_rv_ = lease ? lease->resource_version : "";
    lease_transitions_ = transitions;
    lease_acquired_ = acquired;
    renewed_at_ = MonotonicSeconds();
    return "";
  }

  // KeepLease renews the Lease when a third of its duration has passed; false when it
  // was lost (another node took it over: this node stops at once).
  bool KeepLease() {
    if (lost_) return false;
    if (MonotonicSeconds() - renewed_at_ < std::max(o_.lease_seconds / 3, 1)) return true;
    auto put = Call(
        "PUT", kLeasePath + kLeaseManager,
        kube::LeaseBody(o_.node_name, o_.lease_seconds, lease_rv_, lease_transitions_, lease_acquired_, MicroTime()));
    if (put && put->status == 200) {
      Held(put->body, lease_transitions_, lease_acquired_);
      return true;
    }
    if (put && put->status == 409) {
      lost_ = true;
      Note(LOG_WARNING, "lost the " + LeaseName() + " to another node; it goes on from here");
      return false;
    }
    return true;  // the API did not answer: the Lease still runs, try again at the next object
  }

  void Release() {
    if (lost_ || lease_rv_.empty()) return;
    auto put = Call("PUT", kLeasePath + kLeaseManager,
                    kube::LeaseBody("", o_.lease_seconds, lease_rv_, lease_transitions_, "", MicroTime()));
    if (!put || put->status != 200) {
      Note(LOG_INFO, "could not release the " + LeaseName() + " (" +
                         (put ? kube::ApiMessage(put->status, put->body) : put.error()) +
                         "); another node takes it once it expires");
    }
    lease_rv_.clear();
  }

  // Resolve finds where the API serves a kind: the tables, else discovery (once a pass
  // for each group version).
  std::optional<kube::Resource> Resolve(kube::ResourceTable& table, const kube::ObjectRef& r, std::string& why) {
    const std::string group = kube::GroupOf(r.api_version);
    if (auto res = table.Find(group, r.kind)) return res;
    if (discovered_.insert(r.api_version).second) {
      const std::string path = group.empty() ? "/api/" + r.api_version : "/apis/" + r.api_version;
      auto got = Call("GET", path);
      if (!got) {
        why = got.error();
        return std::nullopt;
      }
      if (got->status == 200) {
        if (auto list = kube::ParseApiResourceList(got->body)) {
          for (const auto& res : *list) table.Add(res);
        }
      }
    }
    if (auto res = table.Find(group, r.kind)) return res;
    why = "the API serves no kind " + r.kind + " in " + r.api_version + " (is its CRD installed?)";
    return std::nullopt;
  }

  void ApplyOne(kube::ResourceTable& table, std::size_t i) {
    const auto& l = loaded_[i];
    auto& result = results_[i];
    if (!l.problem.empty()) {
      result = {ObjectState::kFailed, l.problem};
      return;
    }
    std::string why;
    auto res = Resolve(table, l.entry.ref, why);
    if (!res) {
      result = {ObjectState::kFailed, why};
      return;
    }
    auto path = kube::ObjectPath(l.entry.ref, *res);
    if (!path) {
      result = {ObjectState::kFailed, path.error()};
      return;
    }
    auto r = Call("PATCH", *path + kApply, kube::ApplyBody(l.body, l.workload), kApplyType);
    if (!r) {
      result = {ObjectState::kFailed, r.error()};
    } else if (r->status == 200 || r->status == 201) {
      result = {ObjectState::kApplied, ""};
      applied_.insert(kube::IdentityOf(l.entry.ref));
    } else {
      result = {ObjectState::kFailed, kube::ApiMessage(r->status, r->body)};
    }
  }

  // WaitEstablished polls the CRDs applied in this pass until each is Established or the
  // pass's bound for them passes; it returns those that are.
  std::set<std::string> WaitEstablished(const std::vector<std::string>& crds, const volatile std::sig_atomic_t* stop) {
    std::set<std::string> ready;
    const auto deadline = MonotonicSeconds() + o_.crd_wait_seconds;
    while (*stop == 0 && ready.size() < crds.size() && KeepLease()) {
      for (const auto& name : crds) {
        if (ready.count(name) != 0) continue;
        auto got = Call("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + name);
        if (got && got->status == 200 && kube::CrdEstablished(got->body)) ready.insert(name);
      }
      if (ready.size() == crds.size() || MonotonicSeconds() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return ready;
  }

  void ApplyAll(bool retry, const volatile std::sig_atomic_t* stop) {
    kube::ResourceTable table(loaded_);
    discovered_.clear();
    namespaced_.reset();
    const auto steps = kube::ApplyOrder(loaded_);
    std::vector<std::string> crds;
    std::set<std::string> established;
    bool waited = false;
    for (const auto& step : steps) {
      if (*stop != 0 || !KeepLease()) return;
      const auto& l = loaded_[step.object];
      if (step.phase != kube::Phase::kCrd && !waited) {
        established = WaitEstablished(crds, stop);
        waited = true;
      }
      // A retry skips what the passes before it applied: server-side apply would change
      // nothing there.
      if (retry && applied_.count(kube::IdentityOf(l.entry.ref)) != 0 &&
          results_[step.object].state == ObjectState::kApplied) {
        if (step.phase == kube::Phase::kCrd) crds.push_back(l.entry.ref.name);
        continue;
      }
      if (!step.crd.empty() && waited && established.count(step.crd) == 0) {
        results_[step.object] = {ObjectState::kPending, "waiting for the CRD " + step.crd + " to be Established"};
        continue;
      }
      ApplyOne(table, step.object);
      if (step.phase == kube::Phase::kCrd && results_[step.object].state == ObjectState::kApplied) {
        crds.push_back(l.entry.ref.name);
      }
    }
  }

  // NamespacedResources are every listable namespaced resource the API serves, with the
  // group version to list it through (read once a pass, when a Namespace is pruned).
  const std::vector<std::pair<std::string, kube::Resource>>& NamespacedResources() {
    if (namespaced_) return *namespaced_;
    namespaced_.emplace();
    std::vector<std::string> versions = {"v1"};
    if (auto got = Call("GET", "/apis"); got && got->status == 200) {
      if (auto groups = kube::ParseApiGroupList(got->body))
        versions.insert(versions.end(), groups->begin(), groups->end());
    }
    for (const auto& gv : versions) {
      auto got = Call("GET", gv == "v1" ? "/api/v1" : "/apis/" + gv);
      if (!got || got->status != 200) continue;
      auto list = kube::ParseApiResourceList(got->body);
      if (!list) continue;
      for (const auto& r : *list) {
        if (r.namespaced) namespaced_->emplace_back(gv, r);
      }
    }
    return *namespaced_;
  }

  // Foreign lists what deleting obj (a Namespace or a CRD) would take with it that sprout
  // does not delete itself; nullopt when the API could not say.
  std::optional<std::vector<std::string>> Foreign(const kube::ObjectRef& ref, const json& obj,
                                                  const std::set<std::string>& sprout_set) {
    std::vector<std::pair<std::string, kube::Resource>> lists;
    std::string ns;
    if (kube::PhaseOf(ref) == kube::Phase::kNamespace) {
      lists = NamespacedResources();
      if (lists.empty()) return std::nullopt;
      ns = ref.name;
    } else {
      auto crd = kube::CrdResource(obj);
      if (!crd || crd->version.empty()) return std::nullopt;
      lists.emplace_back(crd->resource.group + "/" + crd->version, crd->resource);
    }
    std::vector<std::string> out;
    for (const auto& [gv, res] : lists) {
      auto got = Call("GET", kube::CollectionPath(gv, res, ns));
      if (!got) return std::nullopt;
      if (got->status == 404 || got->status == 405 || got->status == 403) continue;
      if (got->status != 200) return std::nullopt;
      for (auto& f : kube::ForeignObjects(got->body, gv, res, sprout_set)) out.push_back(std::move(f));
    }
    return out;
  }

  // Prune deletes what the record holds and this image no longer carries, if sprout
  // applied it; forgotten gets what leaves the record, lines what happened.
  void Prune(const kube::WorkloadRecord& record, std::set<std::string>& forgotten, std::vector<std::string>& lines,
             bool& retry) {
    const auto prune = kube::PruneSet(record.objects, kube::RefsOf(index_));
    std::set<std::string> sprout_set;
    for (const auto& p : prune) sprout_set.insert(kube::IdentityOf(p));
    kube::ResourceTable table(loaded_);
    for (const auto& ref : prune) {
      if (!KeepLease()) return;
      const std::string what = kube::Describe(ref);
      const std::string id = kube::IdentityOf(ref);
      std::string why;
      auto res = Resolve(table, ref, why);
      if (!res) {
        // Its kind is served no more (its CRD went): the object went with it.
        forgotten.insert(id);
        lines.push_back("gone: " + what + " (" + why + ")");
        continue;
      }
      auto path = kube::ObjectPath(ref, *res);
      if (!path) {
        forgotten.insert(id);
        lines.push_back("not pruned: " + what + ": " + path.error());
        continue;
      }
      auto got = Call("GET", *path);
      if (!got || (got->status != 200 && got->status != 404)) {
        retry = true;
        lines.push_back("not pruned yet: " + what + ": " +
                        (got ? kube::ApiMessage(got->status, got->body) : got.error()));
        continue;
      }
      if (got->status == 404) {
        forgotten.insert(id);
        lines.push_back("gone: " + what + " (deleted by someone else)");
        continue;
      }
      const json obj = json::parse(got->body, nullptr, false);
      if (!kube::AppliedBySprout(obj)) {
        forgotten.insert(id);
        lines.push_back("left alone: " + what +
                        ": its managedFields name no manager sprout (made or taken over by "
                        "hand)");
        Event("PruneSkipped", lines.back(), false);
        continue;
      }
      const auto phase = kube::PhaseOf(ref);
      if (phase != kube::Phase::kRest) {
        auto foreign = Foreign(ref, obj, sprout_set);
        if (!foreign) {
          retry = true;
          lines.push_back("not pruned yet: " + what + ": the API did not say what it holds");
          continue;
        }
        if (!foreign->empty()) {
          if (foreign->size() > 3) foreign->resize(3);
          lines.push_back("kept: " + what + ": deleting it would delete what sprout did not apply (" +
                          Join(*foreign, ", ") + ")");
          continue;
        }
      }
      const json meta = obj.contains("metadata") ? obj.at("metadata") : json::object();
      json options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"propagationPolicy", "Background"}};
      options["preconditions"] = {{"uid", JsonString(meta, "uid").value_or("")},
                                  {"resourceVersion", JsonString(meta, "resourceVersion").value_or("")}};
      auto del = Call("DELETE", *path, options.dump());
      if (del && (del->status == 200 || del->status == 202 || del->status == 404)) {
        forgotten.insert(id);
        lines.push_back("pruned: " + what);
        Note(LOG_INFO, "pruned " + what + " (this image no longer carries it)");
        Event("Pruned", "pruned " + what + ": this image's workloads no longer carry it", false);
      } else {
        retry = true;
        lines.push_back("not pruned yet: " + what + ": " +
                        (del ? kube::ApiMessage(del->status, del->body) : del.error()));
      }
    }
  }

  // StatusLines is each workload's line, and the prune's (key "(prune)") when something
  // is kept.
  std::map<std::string, std::string> StatusLines(const std::vector<std::string>& prune_lines) const {
    std::map<std::string, std::string> status;
    std::map<std::string, std::vector<std::size_t>> by_workload;
    for (std::size_t i = 0; i < loaded_.size(); ++i) by_workload[loaded_[i].workload].push_back(i);
    for (const auto& w : index_.workloads) status[w.name] = kube::StatusLine(by_workload[w.name], loaded_, results_);
    std::vector<std::string> kept;
    for (const auto& l : prune_lines) {
      if (l.starts_with("kept: ")) kept.push_back(l.substr(6));
    }
    if (!kept.empty()) status["(prune)"] = "kept " + Join(kept, "; ");
    return status;
  }

  void Event(const std::string& reason, const std::string& message, bool warning) {
    auto r = Call("POST", std::string("/api/v1/namespaces/") + kube::kWorkloadsNamespace + "/events",
                  kube::EventBody(reason, message, warning, o_.node_name, Now()));
    if (!r || r->status != 201) {
      Note(LOG_INFO, "could not write an Event (" + (r ? kube::ApiMessage(r->status, r->body) : r.error()) + ")");
    }
  }

  std::string WriteRecord(const std::optional<kube::WorkloadRecord>& old, const std::set<std::string>& forgotten,
                          const std::vector<std::string>& prune_lines) {
    kube::WorkloadRecord next;
    next.digest = index_.digest;
    next.serial = index_.serial;
    next.node = o_.node_name;
    next.objects = kube::NextRecord(old ? old->objects : std::vector<kube::ObjectRef>{}, kube::RefsOf(index_), applied_,
                                    forgotten);
    next.status = StatusLines(prune_lines);
    auto r = Call("PATCH", kRecordPath + kApply, kube::RecordConfigMap(next), kApplyType);
    if (!r) return "cannot write the record " + RecordName() + ": " + r.error();
    if (r->status != 200 && r->status != 201) {
      return "cannot write the record " + RecordName() + ": " + kube::ApiMessage(r->status, r->body);
    }
    // An Event and a log line for each workload whose state changed since the record.
    for (const auto& [name, line] : next.status) {
      const std::string before = old && old->status.count(name) ? old->status.at(name) : "";
      if (line == before) continue;
      const std::string state = kube::StateOf(line);
      const bool warning = state == "failed" || name == "(prune)";
      const char* reason = state == "applied" ? "Applied" : state == "failed" ? "ApplyFailed" : "ApplyPending";
      if (name == "(prune)") reason = "PruneKept";
      const std::string message = (name == "(prune)" ? std::string("pruning: ") : "workload " + name + ": ") + line;
      Note(warning ? LOG_WARNING : LOG_INFO, message);
      Event(reason, message, warning);
    }
    return "";
  }

  // ShowResults puts each workload's state into the report.
  void ShowResults(const std::optional<kube::WorkloadRecord>& record) {
    auto workloads = ojson::array();
    std::map<std::string, std::vector<std::size_t>> by_workload;
    for (std::size_t i = 0; i < loaded_.size(); ++i) by_workload[loaded_[i].workload].push_back(i);
    const bool applied_here = std::any_of(results_.begin(), results_.end(),
                                          [](const kube::ObjectResult& r) { return r.message != "not applied yet"; });
    for (const auto& w : index_.workloads) {
      ojson j;
      j["name"] = w.name;
      j["type"] = w.type;
      if (!w.chart_version.empty()) j["chartVersion"] = w.chart_version;
      if (applied_here) {
        j["status"] = kube::StatusLine(by_workload[w.name], loaded_, results_);
      } else if (record && record->status.count(w.name)) {
        // Not applied by this node (yet): what the record says, from the node that wrote it.
        j["status"] = record->status.at(w.name) + " (the record, by " + record->node + ")";
      } else {
        j["status"] = "pending: not applied yet";
      }
      auto objects = ojson::array();
      for (auto i : by_workload[w.name]) {
        ojson o;
        o["object"] = kube::Describe(loaded_[i].entry.ref);
        o["state"] = applied_here ? StateName(results_[i].state) : "unknown";
        if (applied_here && results_[i].state != ObjectState::kApplied) o["message"] = results_[i].message;
        objects.push_back(o);
      }
      j["objects"] = objects;
      workloads.push_back(j);
    }
    report_["workloads"] = workloads;
  }

  void WriteReport() {
    const std::string text = report_.dump(2) + "\n";
    if (text == written_) return;
    if (WriteFileAtomic(o_.state_dir / "workloads.json", text)) written_ = text;
  }
};

WorkloadsApi ApiOf(const kube::Kubeconfig& k, int timeout) {
  return [k, timeout](const std::string& method, const std::string& path, const std::string& body,
                      const std::string& type) { return kube::ApiRequest(k, method, path, body, type, timeout); };
}

// Sleep waits seconds, or less when *stop is set.
void Sleep(std::int64_t seconds, const volatile std::sig_atomic_t* stop) {
  for (std::int64_t i = 0; i < seconds && *stop == 0; ++i) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// AdminApi reads the kubeconfig and asks /readyz: the API once it answers, else why not.
Result<WorkloadsApi> AdminApi(const WorkloadsOptions& o) {
  auto text = ReadFile(o.kubeconfig);
  if (!text) return Fail("no kubeconfig yet: " + text.error());
  auto k = kube::ParseKubeconfig(*text);
  if (!k) return Fail(o.kubeconfig.string() + ": " + k.error());
  auto api = ApiOf(*k, o.request_seconds);
  auto ready = api("GET", "/readyz", "", "application/json");
  if (!ready) return Fail(ready.error());
  if (ready->status != 200)
    return Fail("the apiserver is not ready (/readyz HTTP " + std::to_string(ready->status) + ")");
  return api;
}

volatile std::sig_atomic_t g_stop = 0;  // --run's stop signal
void OnStop(int) { g_stop = 1; }

}  // namespace

bool HasWorkloads(const WorkloadsOptions& o) {
  std::error_code ec;
  return fs::exists(o.dir / "index.json", ec);
}

void RunWorkloads(const WorkloadsOptions& o, const volatile std::sig_atomic_t* stop, const WorkloadsLog& log) {
  WorkloadsApi current;
  std::string waiting;
  // The API, read again each pass: a kubeconfig renewed by the certificate thread is
  // picked up.
  WorkloadsApi api = [&](const std::string& method, const std::string& path, const std::string& body,
                         const std::string& type) -> Result<kube::ApiResponse> {
    if (!current) return Fail("no API");
    return current(method, path, body, type);
  };
  Applier applier(o, api, log);
  if (auto s = applier.Load(); !s) {
    log(LOG_ERR, "workloads: none are applied: " + s.error());
    ojson report = {{"problem", s.error()}};
    (void)WriteFileAtomic(o.state_dir / "workloads.json", report.dump(2) + "\n");
    return;
  }
  bool at_start = true;
  int attempt = 0;
  while (*stop == 0) {
    auto admin = AdminApi(o);
    if (!admin) {
      if (admin.error() != waiting) log(LOG_INFO, "workloads: waiting for the apiserver: " + admin.error());
      waiting = admin.error();
      Sleep(5, stop);
      continue;
    }
    waiting.clear();
    current = *admin;
    const auto outcome = applier.Pass(at_start, attempt > 0, stop);
    if (*stop != 0) break;
    if (outcome.done) {
      at_start = false;
      attempt = 0;
      Sleep(o.check_seconds, stop);  // then check the record again
      continue;
    }
    if (++attempt > kube::kMaxRetries) {
      log(LOG_WARNING, "workloads: gave up after " + std::to_string(kube::kMaxRetries) + " tries (" + outcome.problem +
                           "); the next start of sprout-firstboot tries again, or `sprout-firstboot workloads "
                           "--apply-once`");
      at_start = false;
      attempt = 0;
      Sleep(3600, stop);
      continue;
    }
    const auto delay = kube::RetryDelay(attempt);
    log(LOG_INFO, "workloads: " + outcome.problem + "; trying again in " + std::to_string(delay) + " s");
    Sleep(delay, stop);
  }
}

std::string WorkloadsStatusLines(const fs::path& state_dir) {
  auto text = ReadFile(state_dir / "workloads.json");
  if (!text) return "";
  json j = json::parse(*text, nullptr, false);  // not const: GCC's null-dereference false positive
  if (!j.is_object()) return "workloads: workloads.json is damaged\n";
  std::string out = "workloads";
  if (auto d = JsonString(j, "digest")) out += " (" + d->substr(0, std::min<std::size_t>(d->size(), 19)) + ")";
  out += ":\n";
  if (j.contains("workloads") && j["workloads"].is_array()) {
    for (const auto& w : j.at("workloads")) {
      out += "  " + JsonString(w, "name").value_or("?") + ": " + JsonString(w, "status").value_or("?") + "\n";
    }
  }
  if (j.contains("prune") && j["prune"].is_array()) {
    for (const auto& p : j.at("prune")) {
      if (p.is_string()) out += "  " + p.get<std::string>() + "\n";
    }
  }
  if (auto p = JsonString(j, "problem"); p && !p->empty()) out += "  waiting: " + *p + "\n";
  return out;
}

int WorkloadsMain(int argc, char** argv) {
  cxxopts::Options options(
      "sprout-firstboot workloads",
      "The site's workloads baked into the image (docs/workloads-node.md). Without flags: each workload's state as "
      "the last pass left it (workloads.json). --apply-once makes one pass now, as the node's applier does: it takes "
      "the Lease kube-system/sprout-workloads, applies every object with server-side apply (field manager sprout), "
      "prunes what an earlier build applied and this one does not carry, and writes the record. Exit 0: all "
      "applied; 1: an object failed or is pending; 2: bad usage or a bad index. Examples:\n"
      "  sprout-firstboot workloads\n"
      "  sprout-firstboot workloads --apply-once\n");
  options.add_options()("apply-once", "make one pass now, then print each object's state")(
      "run",
      "run the node's applier in the foreground until SIGTERM: a pass now, retries, then a check of the record "
      "every --check-seconds")("check-seconds", "with --run: seconds between checks of the record",
                               cxxopts::value<int>()->default_value("60"))(
      "workloads-dir", "the image's workloads (index.json, objects/)",
      cxxopts::value<std::string>()->default_value("/usr/lib/sprout/workloads"))(
      "kubeconfig", "admin credentials", cxxopts::value<std::string>()->default_value("/etc/kubernetes/admin.conf"))(
      "state-dir", "where the node keeps its state (workloads.json; the node's name)",
      cxxopts::value<std::string>()->default_value("/var/lib/sprout"))(
      "name", "the Lease's holder (default: the node's name from the state, else the host name)",
      cxxopts::value<std::string>())("lease-seconds", "the Lease's duration",
                                     cxxopts::value<int>()->default_value("60"))(
      "lease-wait", "how long to wait for another node's Lease (default: twice its duration)",
      cxxopts::value<int>()->default_value("0"))("crd-wait", "how long to wait for the CRDs to be Established",
                                                 cxxopts::value<int>()->default_value("60"))("h,help",
                                                                                             "show this help");
  cxxopts::ParseResult args;
  try {
    args = options.parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "sprout-firstboot workloads: " << e.what() << "\n" << options.help();
    return 2;
  }
  if (args.count("help")) {
    std::cout << options.help();
    return 0;
  }
  WorkloadsOptions o;
  o.dir = args["workloads-dir"].as<std::string>();
  o.kubeconfig = args["kubeconfig"].as<std::string>();
  o.state_dir = args["state-dir"].as<std::string>();
  o.lease_seconds = std::max(args["lease-seconds"].as<int>(), 1);
  o.lease_wait_seconds = args["lease-wait"].as<int>();
  o.crd_wait_seconds = args["crd-wait"].as<int>();
  o.check_seconds = std::max(args["check-seconds"].as<int>(), 1);
  const bool run = args.count("run") > 0;
  if (!args.count("apply-once") && !run) {
    const std::string lines = WorkloadsStatusLines(o.state_dir);
    if (lines.empty()) {
      std::cout << (HasWorkloads(o)
                        ? "workloads: not applied by this node yet\n"
                        : "workloads: none (the image carries no " + (o.dir / "index.json").string() + ")\n");
    }
    std::cout << lines;
    return 0;
  }
  if (!HasWorkloads(o)) {
    std::cout << "workloads: none (the image carries no " << (o.dir / "index.json").string() << ")\n";
    return 0;
  }
  o.node_name = args.count("name") ? args["name"].as<std::string>() : "";
  if (o.node_name.empty()) {
    if (auto state = LoadNodeState(o.state_dir); state && !state->name.empty()) o.node_name = state->name;
  }
  if (o.node_name.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0) o.node_name = host;
  }
  auto log = [](int, const std::string& m) { std::cerr << "sprout-firstboot: " << m << "\n"; };
  if (run) {
    std::signal(SIGTERM, OnStop);
    std::signal(SIGINT, OnStop);
    RunWorkloads(o, &g_stop, log);
    return 0;
  }
  auto api = AdminApi(o);
  if (!api) {
    std::cerr << "sprout-firstboot workloads: " << api.error() << "\n";
    return 1;
  }
  Applier applier(o, *api, log);
  if (auto s = applier.Load(); !s) {
    std::cerr << "sprout-firstboot workloads: " << s.error() << "\n";
    return 2;
  }
  volatile std::sig_atomic_t never = 0;
  const auto outcome = applier.Pass(true, false, &never);
  applier.Print(std::cout);
  if (!outcome.done) std::cout << "not done: " << outcome.problem << "\n";
  return outcome.done ? 0 : 1;
}

}  // namespace sprout::firstboot
