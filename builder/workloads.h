// The workloads step of `sprout build` (docs/workloads.md): Helm renders each chart,
// the manifest files are read, lib/workloads checks and orders the objects, and the
// files the nodes apply are made for the root.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "builder/commands.h"
#include "image/rootfs.h"
#include "profile/profile.h"
#include "util/result.h"
#include "workloads/objects.h"

namespace sprout::cli {

// kWorkloadsDir is where the rendered workloads live in the root: index.json and
// objects/NNNN.json, read by the nodes that apply them.
inline constexpr const char* kWorkloadsDir = "usr/lib/sprout/workloads";

// RenderedWorkloads is what the step made: the files for the root and what it reports.
struct RenderedWorkloads {
  workloads::Baked baked;                 // index.json and the object files
  std::vector<workloads::Workload> list;  // as the index has them
  std::vector<std::size_t> objects_of;    // objects per workload, in list's order
  std::vector<std::string> images;        // every image the objects run, sorted, each once
  std::size_t objects = 0;
  std::string helm_version;   // "" when no chart was rendered
  double render_seconds = 0;  // the time the charts took to render (helm template)
  bool present() const { return !list.empty(); }
};

// RenderWorkloads renders and checks the profile's workloads, for the Kubernetes version
// of its Shoot (the 1.36 stack's when it has none). Every problem of every workload is
// collected and reported at once. note prints a line of progress.
Result<RenderedWorkloads> RenderWorkloads(const Profile& p, const BuildOptions& options,
                                          const std::function<void(const std::string&)>& note);

// HelmBinary is the helm that renders charts: $SPROUT_HELM, else the one that
// images/stack/compile.sh compiles into the cache for the build host (at once when it is
// cached; SPROUT_OFFLINE=1 with offline).
Result<std::filesystem::path> HelmBinary(const std::filesystem::path& cache_dir, bool offline);

// AddWorkloadFiles adds the index and the object files under kWorkloadsDir; nothing when
// the profile has no workloads.
void AddWorkloadFiles(const RenderedWorkloads& w, std::vector<RootEntry>& add);

// Summary is the step's one-line result.
std::string Summary(const RenderedWorkloads& w);

}  // namespace sprout::cli
