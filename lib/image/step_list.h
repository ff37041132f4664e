// The steps of `sprout build` as data. The progress display numbers each step "[n/N]"
// from the same list whose length is N, so the count cannot drift from the steps run.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "profile/profile.h"
#include "util/progress.h"

namespace sprout {

// BuildStep is one timed step of a build, listed in the order a build runs them.
enum class BuildStep {
  kResolveProfile,
  kRenderWorkloads,
  kCompileHost,
  kPrepareBase,
  kPreloadImages,
  kPackRoot,
  kVerity,
  kInitrd,
  kEsp,
  kState,
  kRawDisk,
  kIso,
  kPxe,
  kQcow2,
  kManifest,
};

// StepName is what the progress display and the step table call a step.
std::string_view StepName(BuildStep step);

// BuildSteps lists the steps a build of formats runs: ten always (the raw disk is made
// even when it is not kept, because every other medium is made from it), plus the
// rendering of the profile's workloads right after the profile when workloads is true
// (its errors come before any long step), plus the compile of host binaries after that
// when compiles is true (a recipe with a host.sh: the kubelet's, images/kubernetes), plus
// one per other medium, in the order ISO, PXE, qcow2.
std::vector<BuildStep> BuildSteps(const std::vector<Format>& formats, bool compiles = false, bool workloads = false);

// MediaSteps is the part of BuildSteps that makes media from the raw disk.
std::vector<BuildStep> MediaSteps(const std::vector<Format>& formats);

// StepProgress shows a build's steps: each Begin must name the next step of the list,
// and "[n/N]" counts through that list.
class StepProgress {
 public:
  StepProgress(bool tty, std::vector<BuildStep> steps, std::FILE* out = stderr);

  // Begin starts the next step; a step that is not next in the list is a bug in the
  // caller, and aborts rather than show a wrong count.
  void Begin(BuildStep step);
  // Update moves the current step's bar; total 0 means unknown.
  void Update(std::uint64_t done, std::uint64_t total) { progress_.Update(done, total); }
  // Bar is Update as a callback, for work that reports its own progress.
  std::function<void(std::uint64_t, std::uint64_t)> Bar() {
    return [this](std::uint64_t done, std::uint64_t total) { Update(done, total); };
  }
  // End finishes the current step with a short result, such as a size.
  void End(const std::string& detail) { progress_.End(detail); }
  // Note prints a line without disturbing the bar.
  void Note(const std::string& line) { progress_.Note(line); }
  // progress is the display itself, for a step that shows its phases (Progress::Status).
  Progress& progress() { return progress_; }
  // Table renders the finished steps' times, aligned, with a total.
  std::string Table() const { return progress_.Table(); }

  // Run shows step around work(args...): Begin, the work, and End with Summary(value)
  // when the work succeeded. It returns the work's Result.
  template <typename Work, typename... Args>
  auto Run(BuildStep step, Work&& work, Args&&... args) {
    Begin(step);
    auto out = work(std::forward<Args>(args)...);
    if (out) End(Summary(*out));
    return out;
  }

 private:
  std::vector<BuildStep> steps_;
  std::size_t next_ = 0;
  Progress progress_;
};

}  // namespace sprout
