// The local image sources `sprout pull` imports into the cache: an OCI image layout
// (a recipe's output, or a folder), and a tar archive (oci-archive, docker-archive),
// unpacked with every member path checked.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "oci/cache.h"
#include "oci/manifest.h"
#include "oci/reference.h"
#include "util/result.h"

namespace sprout::oci {

// ImportLayout copies ref from an OCI layout directory into the cache; returns the
// digest of the manifest (or index) the layout names for ref.
Result<std::string> ImportLayout(Cache& cache, const std::filesystem::path& dir, const Reference& ref,
                                 const std::string& ref_text, const Platform& platform, const std::string& what);

// ExtractTar unpacks a tar archive into dir with libarchive (no special files, no
// absolute or ".." paths).
Status ExtractTar(const std::filesystem::path& tar, const std::filesystem::path& dir);

// ImportDockerArchive turns a `docker save` tar, unpacked in dir, into an image in the
// cache: its config and layer tars become blobs and sprout writes a Docker schema 2
// manifest for them.
Result<std::string> ImportDockerArchive(Cache& cache, const std::filesystem::path& dir, const std::string& ref_text,
                                        const std::string& what);

// ArchivePathProblem says why rel, a file name that an archive's own index gives (a
// docker-archive's manifest.json Config and Layers), may not be followed: it is empty,
// absolute, has a ".." element or a NUL byte. "" means it is a plain relative path.
std::string ArchivePathProblem(std::string_view rel);

// ArchiveMember is the file rel names inside dir, the folder an archive was unpacked
// into: rel must pass ArchivePathProblem and, with symlinks followed, stay inside dir.
// The error starts with what (the archive and the file that named rel) and says why.
Result<std::filesystem::path> ArchiveMember(const std::filesystem::path& dir, std::string_view rel,
                                            const std::string& what);

}  // namespace sprout::oci
