#include "image/step_list.h"

#include <algorithm>
#include <cstdlib>

namespace sprout {

std::string_view StepName(BuildStep step) {
  switch (step) {
    case BuildStep::kResolveProfile:
      return "resolve profile";
    case BuildStep::kRenderWorkloads:
      return "render workloads";
    case BuildStep::kCompileHost:
      return "compile Kubernetes (kubelet recipe)";
    case BuildStep::kPrepareBase:
      return "prepare base OS";
    case BuildStep::kPreloadImages:
      return "preload container images";
    case BuildStep::kPackRoot:
      return "assemble root and pack squashfs";
    case BuildStep::kVerity:
      return "build verity hash tree";
    case BuildStep::kInitrd:
      return "make initrd";
    case BuildStep::kEsp:
      return "make ESP";
    case BuildStep::kState:
      return "make state partition";
    case BuildStep::kRawDisk:
      return "write raw disk";
    case BuildStep::kIso:
      return "write hybrid ISO";
    case BuildStep::kPxe:
      return "write PXE bundle";
    case BuildStep::kQcow2:
      return "convert to qcow2";
    case BuildStep::kManifest:
      return "write manifest, SBOM and checksums";
  }
  return "?";
}

std::vector<BuildStep> MediaSteps(const std::vector<Format>& formats) {
  auto wants = [&](Format f) { return std::find(formats.begin(), formats.end(), f) != formats.end(); };
  std::vector<BuildStep> steps;
  if (wants(Format::kIso)) steps.push_back(BuildStep::kIso);
  if (wants(Format::kPxe)) steps.push_back(BuildStep::kPxe);
  if (wants(Format::kQcow2)) steps.push_back(BuildStep::kQcow2);
  return steps;
}

std::vector<BuildStep> BuildSteps(const std::vector<Format>& formats, bool compiles, bool workloads) {
  std::vector<BuildStep> steps{BuildStep::kResolveProfile};
  if (workloads) steps.push_back(BuildStep::kRenderWorkloads);
  if (compiles) steps.push_back(BuildStep::kCompileHost);
  for (BuildStep step : {BuildStep::kPrepareBase, BuildStep::kPreloadImages, BuildStep::kPackRoot, BuildStep::kVerity,
                         BuildStep::kInitrd, BuildStep::kEsp, BuildStep::kState, BuildStep::kRawDisk}) {
    steps.push_back(step);
  }
  auto media = MediaSteps(formats);
  steps.insert(steps.end(), media.begin(), media.end());
  steps.push_back(BuildStep::kManifest);
  return steps;
}

StepProgress::StepProgress(bool tty, std::vector<BuildStep> steps, std::FILE* out)
    : steps_(std::move(steps)), progress_(tty, static_cast<int>(steps_.size()), out) {}

void StepProgress::Begin(BuildStep step) {
  if (next_ >= steps_.size() || steps_[next_] != step) {
    progress_.Note("sprout: internal error: step '" + std::string(StepName(step)) +
                   "' is not the next one in the build's step list");
    std::abort();
  }
  ++next_;
  progress_.Begin(std::string(StepName(step)));
}

}  // namespace sprout
