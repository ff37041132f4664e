// The base OS: a recipe directory built once with mmdebstrap and cached under a key of
// its inputs, or a ready tarball or directory.
#pragma once

#include <filesystem>
#include <string>

#include "util/result.h"

namespace sprout {

// BaseRef is a base ready to read, with a stable identity for seeds and manifests.
struct BaseRef {
  std::filesystem::path root;  // a tarball or a directory
  std::string id;              // "recipe:<key>", "sha256:<digest>" or "dir:<path>"
};

// IsRecipe says whether path is a base recipe directory (it holds build.sh).
bool IsRecipe(const std::filesystem::path& path);

// RecipeKey digests a recipe directory's files (names and contents, sorted) together
// with the apt sources it builds from, so any change gives a new key.
Result<std::string> RecipeKey(const std::filesystem::path& recipe, const std::filesystem::path& apt_sources);

// DefaultAptSources is the host's sources file a recipe builds from.
std::filesystem::path DefaultAptSources();

// CachedBasePath is where a recipe's tarball lives in the cache.
std::filesystem::path CachedBasePath(const std::filesystem::path& cache_dir, const std::string& key);

// BuildBase runs the recipe into the cache (atomically: a failed run leaves nothing),
// logging to <cache>/base/<key>.log. It returns the tarball's path.
Result<std::filesystem::path> BuildBase(const std::filesystem::path& recipe, const std::filesystem::path& cache_dir,
                                        const std::string& key);

// ResolveBase turns a profile's base into a BaseRef. A recipe must already be built
// unless build is true.
Result<BaseRef> ResolveBase(const std::filesystem::path& base, const std::filesystem::path& cache_dir, bool build);

}  // namespace sprout
