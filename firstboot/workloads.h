// The site's workloads, applied by the cluster itself (docs/workloads-node.md). On a
// control-plane node whose image carries /usr/lib/sprout/workloads/index.json, a thread
// of sprout-firstboot applies the baked objects once the apiserver answers: one node at a
// time (the Lease kube-system/sprout-workloads), by server-side apply under the field
// manager "sprout", CRDs first (each waited for until Established), then Namespaces,
// then the rest. It prunes what an earlier build applied and this one no longer carries
// (only objects whose managedFields name sprout), records what it applied in the
// ConfigMap kube-system/sprout-workloads, says each workload's state there and in Events
// of kube-system, and in workloads.json in the state folder for `sprout-firstboot
// status`. The decisions are lib/kube/workloads.h, pure.
#pragma once

#include <csignal>
#include <filesystem>
#include <functional>
#include <string>

#include "kube/api.h"

namespace sprout::firstboot {

struct WorkloadsOptions {
  std::filesystem::path dir = "/usr/lib/sprout/workloads";          // index.json, objects/
  std::filesystem::path kubeconfig = "/etc/kubernetes/admin.conf";  // the node's admin credentials
  std::filesystem::path state_dir = "/var/lib/sprout";              // workloads.json
  std::string node_name;                                            // the Lease's holder
  int lease_seconds = 60;      // the Lease's duration; renewed every third of it while working
  int lease_wait_seconds = 0;  // how long a pass waits for another holder (0: twice the duration)
  int crd_wait_seconds = 60;   // how long a pass waits for its CRDs to be Established
  int request_seconds = 30;    // the bound of one API request
  int check_seconds = 60;      // between checks of the record once all is applied
};

using WorkloadsLog = std::function<void(int priority, const std::string& message)>;

// WorkloadsApi sends one request to the apiserver; tests give a fake.
using WorkloadsApi = std::function<Result<kube::ApiResponse>(const std::string& method, const std::string& path,
                                                             const std::string& body, const std::string& content_type)>;

// HasWorkloads is true when the image carries a workloads index: without one nothing runs.
bool HasWorkloads(const WorkloadsOptions& o);

// RunWorkloads is the applier's thread: it waits for the apiserver, makes a pass at once
// (every start applies), retries what failed with a backoff (kube::RetryDelay, at most
// kube::kMaxRetries times), then checks the record every check_seconds and applies again
// when it is gone or comes from an older build. Until *stop.
void RunWorkloads(const WorkloadsOptions& o, const volatile std::sig_atomic_t* stop, const WorkloadsLog& log);

// WorkloadsMain is `sprout-firstboot workloads [--apply-once | --run]` (argv[0] is
// "workloads"); --run is RunWorkloads in the foreground, until SIGTERM or SIGINT.
int WorkloadsMain(int argc, char** argv);

// WorkloadsStatusLines is the "workloads:" part of `sprout-firstboot status`, from
// workloads.json in state_dir; "" when this node applies none.
std::string WorkloadsStatusLines(const std::filesystem::path& state_dir);

}  // namespace sprout::firstboot
