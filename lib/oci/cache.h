// The content-addressed blob cache shared by all builds: CACHE/oci/blobs/sha256/HEX.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "util/result.h"

namespace sprout::oci {

// kUnknownSize stands for a blob size that no descriptor gave.
inline constexpr std::int64_t kUnknownSize = -1;

// Cache stores blobs by digest and remembers which digest a tag resolved to.
// A file under blobs/ is written to a temporary name and renamed into place only after
// its sha256 matched; Has still checks it, since a file can be damaged later (a
// truncating copy, a full disk, a crash before the data reached the disk).
class Cache {
 public:
  explicit Cache(std::filesystem::path root);

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path BlobPath(std::string_view digest) const;
  // PartialPath is where an interrupted download waits to be resumed.
  std::filesystem::path PartialPath(std::string_view digest) const;
  // Has says whether a whole copy of the blob is cached. With a size (the descriptor's)
  // the file must have exactly that size; with kUnknownSize its content is hashed. A
  // file whose content no longer hashes to its digest is removed, so that it is fetched
  // or imported again; an intact one of another size than asked is kept but not trusted.
  bool Has(std::string_view digest, std::int64_t size) const;
  Result<std::string> Read(std::string_view digest) const;

  // Put stores bytes under digest if they hash to it; otherwise nothing is stored.
  // what names the blob's origin for the error.
  Status Put(std::string_view digest, std::string_view bytes, const std::string& what);
  // CommitPartial hashes the partial file; on a match it becomes the blob, otherwise
  // it is deleted and the error says the blob was corrupt.
  Status CommitPartial(std::string_view digest, const std::string& what);
  // Import copies a file (verifying it) into the cache.
  Status Import(std::string_view digest, const std::filesystem::path& file, const std::string& what);

  // RecordRef and LookupRef map a reference text (e.g. a tag, or a recipe key) to the
  // digest of the manifest it resolved to.
  Status RecordRef(std::string_view key, std::string_view digest);
  std::optional<std::string> LookupRef(std::string_view key) const;

 private:
  std::filesystem::path root_;
};

// OpenForWriting opens path with fopen in mode ("wb" or "ab"); the error names the file
// and the reason (strerror).
Result<std::FILE*> OpenForWriting(const std::filesystem::path& path, const char* mode);

// DigestMismatch words the error for a blob whose bytes do not hash to its digest.
std::string DigestMismatch(std::string_view want, std::string_view got, const std::string& what);

}  // namespace sprout::oci
