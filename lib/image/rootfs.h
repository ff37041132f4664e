// Root assembly: the base OS plus overlays and sprout's files as one deterministic tar
// stream, which the squashfs packer reads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "util/result.h"

namespace sprout {

// RootEntry is one file, directory or symlink added on top of the base.
struct RootEntry {
  enum class Kind { kFile, kDir, kSymlink };
  Kind kind = Kind::kFile;
  std::string path;              // inside the root, without a leading '/'
  std::string data;              // file contents or link target (when source is empty)
  std::filesystem::path source;  // a host file to copy contents from
  std::uint32_t mode = 0644;
};

// RootSpec is everything that goes into the root file system.
struct RootSpec {
  std::filesystem::path base;        // a tarball (any compression libarchive reads) or a directory
  std::vector<RootEntry> additions;  // applied after the base; a path here replaces the base's
  std::int64_t mtime = 0;            // every entry gets this modification time
  // Base paths under `var/` move to `usr/share/factory/var/`; /var itself stays empty,
  // because the state partition is mounted there and seeded from the factory copy.
  bool relocate_var = true;
  // Files whose contents the caller wants kept (kernel, initrd, boot loader): a path
  // matches when it starts with one of these prefixes.
  std::vector<std::string> capture_prefixes;
};

// RootSummary reports what was written.
struct RootSummary {
  std::uint64_t entries = 0;
  std::uint64_t file_bytes = 0;
  std::map<std::string, std::string> captured;  // path -> contents
};

// ProgressFn receives (done, total) in bytes of base input; total is 0 if unknown.
using ProgressFn = std::function<void(std::uint64_t done, std::uint64_t total)>;

// WriteRootTar streams the assembled root as a POSIX tar to out_fd. Entries keep the
// base's order and owners; additions follow sorted by path, owned by root. All times
// are spec.mtime, so equal inputs give equal bytes.
Result<RootSummary> WriteRootTar(const RootSpec& spec, int out_fd, const ProgressFn& progress = {});

// AddTree appends every entry below dir (sorted by name) to out, as paths under prefix.
// Regular files keep their executable bits (0755 or 0644); directories are 0755.
Status AddTree(const std::filesystem::path& dir, const std::string& prefix, std::vector<RootEntry>& out);

}  // namespace sprout
