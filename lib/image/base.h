// The base OS: a recipe directory built once with mmdebstrap and cached under a key of
// its inputs, or a ready tarball or directory.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profile/profile.h"
#include "util/result.h"

namespace sprout {

// BaseRef is a base ready to read, with a stable identity for seeds and manifests.
struct BaseRef {
  std::filesystem::path root;  // a tarball or a directory
  std::string id;              // "recipe:<key>", "sha256:<digest>" or "dir:sha256:<tree digest>"
};

// IsRecipe says whether path is a base recipe directory (it holds build.sh).
bool IsRecipe(const std::filesystem::path& path);

// RecipeKey digests a recipe directory's files (names and contents, sorted) together
// with the apt sources it builds from and the architecture it builds for, so any
// change gives a new key and two architectures never share a base.
Result<std::string> RecipeKey(const std::filesystem::path& recipe, const std::filesystem::path& apt_sources, Arch arch);

// DefaultAptSources is the host's sources file a recipe builds from.
std::filesystem::path DefaultAptSources();

// CachedBasePath is where a recipe's tarball lives in the cache.
std::filesystem::path CachedBasePath(const std::filesystem::path& cache_dir, const std::string& key);

// BasePhase is what a base build's log says it is doing now: mmdebstrap's last "I: "
// line without its "I: ", shortened (a hook's shell command is left out), and the package
// dpkg works on after it, if any ("installing essential packages: libc6"). "" before
// the first such line.
std::string BasePhase(std::string_view log);

// LogTail is the last lines of a log (all of it when shorter).
std::string LogTail(std::string_view log, std::size_t lines);

// PhaseFn hears the base build's phase (BasePhase) about twice a second while it runs.
using PhaseFn = std::function<void(const std::string& phase)>;

// BuildBase runs the recipe for arch (SPROUT_ARCH) into the cache (atomically: a failed
// run leaves nothing), logging to <cache>/base/<key>.log, telling watch its phase while
// it runs. A foreign arch needs qemu-user through binfmt_misc (image/arch.h): as root it
// registers qemu-user-static's rule when that is all that is missing, else it fails
// naming what to install or mount. It returns the tarball's path; its error ends with
// the log's last lines.
Result<std::filesystem::path> BuildBase(const std::filesystem::path& recipe, const std::filesystem::path& cache_dir,
                                        const std::string& key, Arch arch, const PhaseFn& watch = {});

// FindCachedBase is the recipe key's tarball in cache_dir, else in the first of shared
// (read only) that holds it; nullopt when none does.
std::optional<std::filesystem::path> FindCachedBase(const std::filesystem::path& cache_dir,
                                                    const std::vector<std::filesystem::path>& shared,
                                                    const std::string& key);

// ResolveBase turns a profile's base into a BaseRef for arch. A recipe must already be
// built for arch, in cache_dir or one of the shared caches, unless build is true (it is
// built into cache_dir).
Result<BaseRef> ResolveBase(const std::filesystem::path& base, Arch arch, const std::filesystem::path& cache_dir,
                            bool build, const std::vector<std::filesystem::path>& shared = {});

}  // namespace sprout
