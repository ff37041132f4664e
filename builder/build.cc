// `sprout build`, `sprout validate` and `sprout base`. Build reads as the list of its
// steps; builder/pipeline.cc holds each step, lib/image the pure decisions below them.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "builder/commands.h"
#include "builder/pipeline.h"
#include "builder/publish.h"
#include "image/base.h"
#include "image/step_list.h"
#include "profile/profile.h"
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
  std::fprintf(stderr, "boot it: sprout boot %s --snapshot\n", raw_out.c_str());
}

}  // namespace

int Validate(const fs::path& path, bool print) {
  auto p = LoadAndReport(path);
  if (!p) return 1;
  if (print) {
    std::cout << ProfileToJson(*p, fs::current_path()) << "\n";
  } else {
    std::cout << path.string() << ": ok (name " << p->name << ", role " << RoleName(p->role);
    for (std::size_t i = p->chain.size() - 1; i-- > 0;) std::cout << ", extends " << p->chain[i].filename().string();
    std::cout << ")\n";
  }
  return 0;
}

int Base(const fs::path& what, const fs::path& cache_dir, bool force) {
  fs::path recipe = what;
  if (!IsRecipe(what)) {
    auto p = LoadAndReport(what);
    if (!p) return 1;
    recipe = p->base;
    if (!IsRecipe(recipe)) {
      std::cout << "the profile's base " << recipe.string() << " is a ready root; nothing to build\n";
      return 0;
    }
  }
  auto key = RecipeKey(recipe, DefaultAptSources());
  if (!key) {
    std::cerr << "sprout: " << key.error() << "\n";
    return 1;
  }
  fs::path cached = CachedBasePath(cache_dir, *key);
  std::error_code ec;
  if (!force && fs::is_regular_file(cached, ec)) {
    std::cout << "base is cached: " << cached.string() << "\n";
    return 0;
  }
  Progress progress(::isatty(2) != 0, 1);
  progress.Begin("build base OS with mmdebstrap (log: " + (cache_dir / "base" / (*key + ".log")).string() + ")");
  auto built = BuildBase(recipe, cache_dir, *key);
  if (!built) {
    progress.Note("sprout: " + built.error());
    return 1;
  }
  progress.End(HumanSize(fs::file_size(*built, ec)));
  std::cout << "base: " << built->string() << "\n";
  return 0;
}

int Build(const BuildOptions& options) {
  using enum BuildStep;
  // The profile is read first, so the step list (and "[n/N]") follows its formats.
  auto profile = LoadAndReport(options.profile);
  if (!profile) return 1;
  StepProgress steps(::isatty(2) != 0, BuildSteps(options.formats.empty() ? profile->formats : options.formats));
  auto fail = [&](const std::string& why) {
    steps.Note("sprout: " + why);
    return 1;
  };
  auto in = steps.Run(kResolveProfile, ResolveProfile, std::move(*profile), options);
  if (!in) return fail(in.error());
  auto base = steps.Run(kPrepareBase, ResolveBase, in->profile.base, options.cache_dir, options.build_base);
  if (!base) return fail(base.error());
  BuildPlan plan = PlanBuild(std::move(*in), std::move(*base));
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
