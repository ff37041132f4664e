#include "image/base.h"

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "util/fs.h"
#include "util/process.h"
#include "util/sha256.h"

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

Result<std::string> RecipeKey(const fs::path& recipe, const fs::path& apt_sources) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(recipe, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file()) files.push_back(it->path());
  }
  if (ec) return Fail("cannot list the base recipe " + recipe.string() + ": " + ec.message());
  std::sort(files.begin(), files.end());
  Sha256 h;
  h.Update("sprout-base-v1\n");
  for (const auto& f : files) {
    auto data = ReadFile(f);
    if (!data) return Fail(data.error());
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

Result<fs::path> BuildBase(const fs::path& recipe, const fs::path& cache_dir, const std::string& key) {
  fs::path out = CachedBasePath(cache_dir, key);
  fs::create_directories(out.parent_path());
  // mmdebstrap picks its output format from the file name, so the temporary keeps ".tar".
  fs::path tmp = cache_dir / "base" / (key + ".partial-" + std::to_string(::getpid()) + ".tar");
  fs::path log = cache_dir / "base" / (key + ".log");
  Command cmd{{"bash", (recipe / "build.sh").string(), tmp.string()},
              {{"SPROUT_APT_SOURCES", DefaultAptSources().string()}}};
  cmd.stdout_file = log.string();
  cmd.stderr_to_stdout_file = true;
  auto r = Run(cmd);
  std::error_code ec;
  if (!r || r->exit_code != 0) {
    fs::remove(tmp, ec);
    std::string why = r ? "" : r.error() + "\n";
    auto tail = ReadFile(log);
    if (tail) why += tail->substr(tail->size() > 3000 ? tail->size() - 3000 : 0);
    return Fail("building the base from " + recipe.string() + " failed; the log is " + log.string() + "\n" + why +
                (::geteuid() != 0 ? "\nhint: mmdebstrap needs root or working user namespaces; try it as root" : ""));
  }
  fs::rename(tmp, out, ec);
  if (ec) return Fail("cannot move the base into the cache: " + ec.message());
  return out;
}

Result<BaseRef> ResolveBase(const fs::path& base, const fs::path& cache_dir, bool build) {
  std::error_code ec;
  if (IsRecipe(base)) {
    auto key = RecipeKey(base, DefaultAptSources());
    if (!key) return Fail(key.error());
    fs::path cached = CachedBasePath(cache_dir, *key);
    if (fs::is_regular_file(cached, ec)) return BaseRef{cached, "recipe:" + *key};
    if (!build) {
      return Fail("the base recipe " + base.string() + " has not been built yet (key " + *key + ", cache " +
                  cache_dir.string() + ")\nhint: run `sprout base " + base.string() +
                  "` once as root, or pass --build-base");
    }
    auto built = BuildBase(base, cache_dir, *key);
    if (!built) return Fail(built.error());
    return BaseRef{*built, "recipe:" + *key};
  }
  if (fs::is_directory(base, ec)) return BaseRef{base, "dir:" + fs::absolute(base).string()};
  if (fs::is_regular_file(base, ec)) {
    auto digest = Sha256File(base);
    if (!digest) return Fail(digest.error());
    return BaseRef{base, "sha256:" + *digest};
  }
  return Fail("base " + base.string() + " is neither a recipe directory, a directory nor a tarball");
}

}  // namespace sprout
