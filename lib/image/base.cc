#include "image/base.h"

#include <unistd.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "image/arch.h"
#include "util/fs.h"
#include "util/lines.h"
#include "util/log_watch.h"
#include "util/process.h"
#include "util/sha256.h"
#include "util/text.h"

namespace sprout {

namespace fs = std::filesystem;

bool IsRecipe(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(path / "build.sh", ec);
}

fs::path DefaultAptSources() {
  if (const char* s = std::getenv("SPROUT_APT_SOURCES"); s && *s) return s;
  std::error_code ec;
  if (fs::exists("/etc/apt/sources.list.d/debian.sources", ec)) return "/etc/apt/sources.list.d/debian.sources";
  return "/etc/apt/sources.list";
}

Result<std::string> RecipeKey(const fs::path& recipe, const fs::path& apt_sources, Arch arch) {
  auto files = RegularFilesUnder(recipe);
  if (!files) return Fail("cannot list the base recipe " + recipe.string() + ": " + files.error());
  Sha256 h;
  h.Update("sprout-base-v1\n");
  h.Update(std::string("arch ") + ArchName(arch) + "\n");
  for (const auto& f : *files) {
    auto data = ReadFile(f);
    if (!data) return Fail(data.error());
    std::error_code ec;
    auto perms = fs::status(f, ec).permissions();
    h.Update(f.lexically_relative(recipe).string());
    h.Update((perms & fs::perms::owner_exec) != fs::perms::none ? " x\n" : " -\n");
    h.Update(Sha256Hex(*data));
    h.Update("\n");
  }
  auto sources = ReadFile(apt_sources);
  if (!sources) return Fail("cannot read the apt sources the base builds from: " + sources.error());
  h.Update(*sources);
  return h.HexDigest().substr(0, 32);
}

fs::path CachedBasePath(const fs::path& cache_dir, const std::string& key) {
  return cache_dir / "base" / (key + ".tar");
}

std::string BasePhase(std::string_view log) {
  std::string phase;
  std::string package;
  ForEachLine(log, [&](std::string_view line) {
    if (line.starts_with("I: ")) {
      line.remove_prefix(3);
      // "running --customize-hook in shell: sh -c '...'": the command adds nothing.
      if (auto shell = line.find(" in shell: "); shell != std::string_view::npos) line = line.substr(0, shell);
      while (line.ends_with('.') || line.ends_with(' ')) line.remove_suffix(1);
      phase = std::string(line);
      package.clear();
      return;
    }
    for (std::string_view verb : {"Unpacking ", "Setting up "}) {
      if (!line.starts_with(verb)) continue;
      line.remove_prefix(verb.size());
      package = std::string(line.substr(0, line.find_first_of(" :")));
    }
  });
  if (phase.empty() || package.empty()) return phase;
  return phase + ": " + package;
}

std::string LogTail(std::string_view log, std::size_t lines) {
  while (log.ends_with('\n')) log.remove_suffix(1);
  std::size_t pos = log.size();
  for (std::size_t n = 0; n < lines; ++n) {
    std::size_t nl = log.rfind('\n', pos == 0 ? 0 : pos - 1);
    if (nl == std::string_view::npos || pos == 0) return std::string(log);
    pos = nl;
  }
  return std::string(log.substr(pos + 1));
}

Result<fs::path> BuildBase(const fs::path& recipe, const fs::path& cache_dir, const std::string& key, Arch arch,
                           const PhaseFn& watch) {
  BinfmtCheck binfmt = CheckBinfmt(arch, HostArch(), ReadBinfmt(arch));
  if (binfmt.verdict == BinfmtVerdict::kMissing) return Fail(binfmt.problem);
  if (binfmt.verdict == BinfmtVerdict::kRegister) {
    if (auto s = RegisterBinfmt(arch); !s) return Fail(s.error());
    binfmt = CheckBinfmt(arch, HostArch(), ReadBinfmt(arch));
    if (binfmt.verdict != BinfmtVerdict::kReady) {
      return Fail(std::string("registered ") + TraitsOf(arch).qemu_binfmt +
                  " with binfmt_misc, but: " + binfmt.problem);
    }
  }
  fs::path out = CachedBasePath(cache_dir, key);
  fs::create_directories(out.parent_path());
  // mmdebstrap picks its output format from the file name, so the temporary keeps ".tar".
  fs::path tmp = cache_dir / "base" / (key + ".partial-" + std::to_string(::getpid()) + ".tar");
  fs::path log = cache_dir / "base" / (key + ".log");
  Command cmd{{"bash", (recipe / "build.sh").string(), tmp.string()},
              {{"SPROUT_APT_SOURCES", DefaultAptSources().string()}, {"SPROUT_ARCH", ArchName(arch)}}};
  cmd.stdout_file = log.string();
  cmd.stderr_to_stdout_file = true;
  Result<RunResult> r = Fail("");
  {
    LogWatcher watcher(log, watch ? [&watch](const std::string& text) { watch(BasePhase(text)); }
                                  : std::function<void(const std::string&)>());
    r = Run(cmd);
  }
  std::error_code ec;
  if (!r || r->exit_code != 0) {
    fs::remove(tmp, ec);
    auto text = ReadFile(log);
    std::string phase = text ? BasePhase(*text) : "";
    std::string why = "building the base from " + recipe.string() + " failed" +
                      (r ? " (exit " + std::to_string(r->exit_code) + ")" : ": " + r.error()) +
                      (phase.empty() ? "" : " while " + phase) + "; the last lines of its log, " + log.string() + ":\n";
    if (text) {
      for (const auto& line : Split(LogTail(*text, 25), '\n')) why += "  | " + line + "\n";
    }
    return Fail(why +
                (::geteuid() != 0 ? "hint: mmdebstrap needs root or working user namespaces; try it as root" : ""));
  }
  fs::rename(tmp, out, ec);
  if (ec) return Fail("cannot move the base into the cache: " + ec.message());
  return out;
}

std::optional<fs::path> FindCachedBase(const fs::path& cache_dir, const std::vector<fs::path>& shared,
                                       const std::string& key) {
  std::error_code ec;
  fs::path own = CachedBasePath(cache_dir, key);
  if (fs::is_regular_file(own, ec)) return own;
  for (const auto& dir : shared) {
    fs::path p = CachedBasePath(dir, key);
    if (fs::is_regular_file(p, ec) && ::access(p.c_str(), R_OK) == 0) return p;
  }
  return std::nullopt;
}

Result<BaseRef> ResolveBase(const fs::path& base, Arch arch, const fs::path& cache_dir, bool build,
                            const std::vector<fs::path>& shared) {
  std::error_code ec;
  if (IsRecipe(base)) {
    auto key = RecipeKey(base, DefaultAptSources(), arch);
    if (!key) return Fail(key.error());
    if (auto cached = FindCachedBase(cache_dir, shared, *key)) return BaseRef{*cached, "recipe:" + *key};
    if (!build) {
      std::string where = cache_dir.string();
      for (const auto& dir : shared) where += " or " + dir.string();
      const std::string arch_flag = arch == Arch::kAmd64 ? "" : std::string(" --arch ") + ArchName(arch);
      return Fail("the base recipe " + base.string() + " has not been built yet for " + ArchName(arch) + " (key " +
                  *key + ", cache " + where + ")\nhint: run `sprout base " + base.string() + arch_flag +
                  "` once as root, or pass --build-base");
    }
    auto built = BuildBase(base, cache_dir, *key, arch);
    if (!built) return Fail(built.error());
    return BaseRef{*built, "recipe:" + *key};
  }
  if (fs::is_directory(base, ec)) {
    // A folder is known by its tree, not by where it sits.
    auto digest = ContentDigest(base);
    if (!digest) return Fail(digest.error());
    return BaseRef{base, "dir:" + *digest};
  }
  if (fs::is_regular_file(base, ec)) {
    auto digest = Sha256File(base);
    if (!digest) return Fail(digest.error());
    return BaseRef{base, "sha256:" + *digest};
  }
  return Fail("base " + base.string() + " is neither a recipe directory, a directory nor a tarball");
}

}  // namespace sprout
