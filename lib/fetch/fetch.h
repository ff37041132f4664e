// Fetch: files named by URL and sha256 in a profile, fetched once and cached by digest.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "util/result.h"

namespace sprout {

// CachedFilePath is where a file with this sha256 lives in the cache.
std::filesystem::path CachedFilePath(const std::filesystem::path& cache_dir, const std::string& sha256);

// FetchVerified returns the cached copy of url whose content has the given sha256,
// downloading it (http, https or file URL; up to 3 tries on transient errors) when it is
// not cached yet. The download goes to a temporary file next to the cache entry and is
// renamed into place only when its digest matches; a mismatch is an error that names
// the URL and both digests, and leaves nothing in the cache.
Result<std::filesystem::path> FetchVerified(const std::string& url, const std::string& sha256,
                                            const std::filesystem::path& cache_dir);

// Downloaded is what DownloadTo wrote: the content's sha256 and its length.
struct Downloaded {
  std::string sha256;
  std::uint64_t bytes = 0;
};

// DownloadTo writes the content of url (http, https or file; up to 3 tries on transient
// errors) to dest, replacing it, and hashes it on the way. sparse leaves holes where the
// data is all zeros (for disk images). On failure dest is removed; an HTTP 404 is not
// retried and its error ends in "(not found)".
Result<Downloaded> DownloadTo(const std::string& url, const std::filesystem::path& dest, bool sparse);

// VerifyFile checks a local file against an expected sha256.
Status VerifyFile(const std::filesystem::path& file, const std::string& sha256);

}  // namespace sprout
