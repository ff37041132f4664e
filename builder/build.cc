// `sprout build`, `sprout validate` and `sprout base`. Build reads as the list of its
// steps; builder/pipeline.cc holds each step, lib/image the pure decisions below them.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "builder/commands.h"
#include "builder/pipeline.h"
#include "builder/publish.h"
#include "image/base.h"
#include "image/plan.h"
#include "image/step_list.h"
#include "profile/profile.h"
#include "util/fs.h"
#include "util/progress.h"
#include "util/text.h"

namespace sprout::cli {

namespace {

namespace fs = std::filesystem;

// ReportBuilt lists what a build published, with sizes and the steps' times.
void ReportBuilt(const fs::path& out_dir, const BuildPlan& plan, const RawDisk& raw, const Manifest& manifest,
                 const StepProgress& steps) {
  bool kept_raw = !KeptRaw(plan).empty();
  fs::path raw_out = out_dir / (plan.in.profile.name + (kept_raw ? ".raw" : ".qcow2"));
  struct stat st {};
  std::uint64_t allocated = ::stat(raw_out.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_blocks) * 512 : 0;
  std::fprintf(stderr, "\nbuilt %s (%s, %s allocated on disk)\n", raw_out.c_str(), HumanSize(raw.size).c_str(),
               HumanSize(allocated).c_str());
  for (const auto& name : manifest.files) {
    std::fprintf(stderr, "  %-24s %10s\n", name.c_str(), HumanSize(fs::file_size(out_dir / name)).c_str());
  }
  std::fprintf(stderr, "steps:\n%s", steps.Table().c_str());
  if (plan.in.secure_boot.on()) {
    std::fprintf(stderr,
                 "Secure Boot: systemd-boot and the unified kernel image are signed by %s; the firmware boots them "
                 "once that certificate is in its db (docs/secure-boot.md)\n",
                 plan.in.secure_boot.subject.c_str());
  }
  if (plan.in.profile.state_encryption != StateEncryption::kNone) {
    std::fprintf(stderr, "state: %s (docs/secure-boot.md)\n", DescribeState(ReadStateWords(plan.disk.cmdline)).c_str());
  }
  std::fprintf(stderr, "boot it: sprout boot %s --snapshot\n", raw_out.c_str());
}

// Phases shows a long step's phases (a base build's, the Kubernetes compile's) with the
// time since the step began: on a terminal one line redrawn twice a second; otherwise a
// line per phase, and one every 30 s within a long phase, so a CI log shows it is alive.
// The text after ": " is detail (a package, a cache miss); the table keeps each phase's
// time by the text before it.
class Phases {
 public:
  Phases(Progress& progress, bool tty) : progress_(progress), tty_(tty) {}

  void Heard(const std::string& phase) {
    const double now = progress_.Seconds();
    // A package name after the phase changes often; the table keeps phases alone.
    const std::string name = phase.substr(0, phase.find(": "));
    if (!phase.empty() && (times_.empty() || times_.back().first != name)) {
      if (!times_.empty()) times_.back().second = now - started_;
      times_.emplace_back(name, 0);
      started_ = now;
    } else if (phase.empty() && !times_.empty() && times_.back().second == 0) {
      times_.back().second = now - started_;
      return;
    }
    if (phase.empty()) return;
    const std::string text = Clock(now) + " " + phase;
    if (tty_) {
      progress_.Status(text);
    } else if (name != shown_ || now - shown_at_ >= 30) {
      progress_.Status(text);
      shown_ = name;
      shown_at_ = now;
    }
  }

  std::string Table() const {
    std::string out;
    for (const auto& [name, seconds] : times_) {
      char line[256];
      std::snprintf(line, sizeof line, "  %6.1f s  %s\n", seconds, name.c_str());
      out += line;
    }
    return out;
  }

 private:
  static std::string Clock(double seconds) {
    char buf[16];
    const int s = static_cast<int>(seconds);
    std::snprintf(buf, sizeof buf, "%d:%02d", s / 60, s % 60);
    return buf;
  }

  Progress& progress_;
  bool tty_;
  std::vector<std::pair<std::string, double>> times_;
  double started_ = 0;
  std::string shown_;
  double shown_at_ = 0;
};

}  // namespace

int Validate(const fs::path& path, bool print) {
  auto p = LoadAndReport(path);
  if (!p) return 1;
  if (print) {
    std::cout << ProfileToJson(*p) << "\n";
  } else {
    std::cout << path.string() << ": ok (name " << p->name << ", role " << RoleName(p->role);
    for (std::size_t i = p->chain.size() - 1; i-- > 0;) std::cout << ", extends " << p->chain[i].filename().string();
    std::cout << ")\n";
  }
  return 0;
}

int Base(const fs::path& what, const fs::path& cache_dir, bool force, std::optional<Arch> arch_flag) {
  fs::path recipe = what;
  Arch arch = arch_flag.value_or(Arch::kAmd64);
  if (!IsRecipe(what)) {
    auto p = LoadAndReport(what);
    if (!p) return 1;
    recipe = p->base;
    arch = arch_flag.value_or(p->arch);
    if (!IsRecipe(recipe)) {
      std::cout << "the profile's base " << recipe.string() << " is a ready root; nothing to build\n";
      return 0;
    }
  }
  auto key = RecipeKey(recipe, DefaultAptSources(), arch);
  if (!key) {
    std::cerr << "sprout: " << key.error() << "\n";
    return 1;
  }
  std::error_code ec;
  if (auto cached = FindCachedBase(cache_dir, SharedCaches(cache_dir), *key); cached && !force) {
    std::cout << "base is cached: " << cached->string() << "\n";
    return 0;
  }
  const bool tty = ::isatty(2) != 0;
  Progress progress(tty, 1);
  progress.Begin(std::string("build base OS (") + ArchName(arch) + ")");
  progress.Note("mmdebstrap takes minutes (70 s on a quiet 2-core machine, more under load); its log: " +
                (cache_dir / "base" / (*key + ".log")).string());
  Phases phases(progress, tty);
  auto built = BuildBase(recipe, cache_dir, *key, arch, [&phases](const std::string& phase) { phases.Heard(phase); });
  phases.Heard("");  // closes the last phase's time
  if (!built) {
    progress.Note("sprout: " + built.error());
    progress.Note("phases:\n" + phases.Table());
    return 1;
  }
  progress.End(HumanSize(fs::file_size(*built, ec)));
  std::fprintf(stderr, "phases:\n%s", phases.Table().c_str());
  std::cout << "base: " << built->string() << "\n";
  return 0;
}

int Build(const BuildOptions& options) {
  using enum BuildStep;
  // The profile is read first, so the step list (and "[n/N]") follows its formats.
  auto profile = LoadAndReport(options.profile);
  if (!profile) return 1;
  if (options.arch) profile->arch = *options.arch;
  if (options.serial) profile->update_serial = *options.serial;
  const bool tty = ::isatty(2) != 0;
  const bool compiles = CompilesKubelet(*profile);
  const bool workloads = !profile->workloads.empty();
  StepProgress steps(tty,
                     BuildSteps(options.formats.empty() ? profile->formats : options.formats, compiles, workloads));
  auto fail = [&](const std::string& why) {
    steps.Note("sprout: " + why);
    return 1;
  };
  auto in = steps.Run(kResolveProfile, ResolveProfile, std::move(*profile), options);
  if (!in) return fail(in.error());
  if (workloads) {
    // Seconds, and every mistake in the charts and manifests, before any long step.
    auto rendered = steps.Run(kRenderWorkloads, RenderWorkloads, in->profile, options,
                              [&steps](const std::string& line) { steps.Note(line); });
    if (!rendered) return fail(rendered.error());
    in->workloads = std::move(*rendered);
  }
  if (compiles) {
    // Minutes on a cold cache (Debian's Kubernetes source, six components), so its phases show.
    Phases phases(steps.progress(), tty);
    auto compiled =
        steps.Run(kCompileHost, CompileHost, *in, options, [&phases](const std::string& p) { phases.Heard(p); });
    phases.Heard("");
    if (!compiled) return fail(compiled.error());
    if (auto times = CompileTimes(*compiled); !times.empty()) steps.Note("  compiled: " + times);
  }
  auto base = steps.Run(kPrepareBase, ResolveBase, in->profile.base, in->profile.arch, options.cache_dir,
                        options.build_base, SharedCaches(options.cache_dir));
  if (!base) return fail(base.error());
  auto planned = PlanBuild(std::move(*in), std::move(*base));
  if (!planned) return fail(planned.error());
  BuildPlan plan = std::move(*planned);
  // Everything is made in a work directory inside -o DIR and published at the end, so a
  // failed build leaves no half-written image behind.
  auto workspace = OpenWorkspace(options.out_dir, options.sign_key);
  if (!workspace) return fail(workspace.error());
  plan.work = (*workspace)->path();
  auto additions = RootAdditions(plan);
  if (!additions) return fail(additions.error());
  auto contents = steps.Run(kPreloadImages, Preload, plan, options, std::move(*additions));
  if (!contents) return fail(contents.error());
  auto root = steps.Run(kPackRoot, PackRoot, plan, std::move(contents->additions), options.jobs, steps.Bar());
  if (!root) return fail(root.error());
  auto verity = steps.Run(kVerity, BuildVerity, plan, *root);
  if (!verity) return fail(verity.error());
  PlanBoot(plan.disk, plan.in.profile, verity->root_hash);
  auto boot = steps.Run(kInitrd, MakeInitrd, plan, *root);
  if (!boot) return fail(boot.error());
  auto esp = steps.Run(kEsp, MakeEsp, plan, *boot, *contents);
  if (!esp) return fail(esp.error());
  auto state = steps.Run(kState, MakeState, plan);
  if (!state) return fail(state.error());
  auto raw = steps.Run(kRawDisk, WriteRaw, plan, *root, *verity, *esp, *state);
  if (!raw) return fail(raw.error());
  // Other media come from the raw disk, so every one carries the same root.
  std::vector<std::string> outputs = KeptRaw(plan);
  MediaInputs media = LiveMedia(plan, *root, *verity, *boot, *esp);
  for (BuildStep step : MediaSteps(plan.in.formats)) {
    auto medium = steps.Run(step, MakeMedium, step, media, *raw);
    if (!medium) return fail(medium.error());
    outputs.insert(outputs.end(), medium->files.begin(), medium->files.end());
  }
  auto manifest = steps.Run(kManifest, WriteManifest, plan, options, outputs, *root, *boot, *contents);
  if (!manifest) return fail(manifest.error());
  if (auto s = Publish(plan.work, options.out_dir, manifest->files); !s) return fail(s.error());
  ReportBuilt(options.out_dir, plan, *raw, *manifest, steps);
  return 0;
}

}  // namespace sprout::cli
