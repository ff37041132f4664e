#include "oci/cache.h"

#include <cerrno>
#include <system_error>

#include "oci/reference.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace sprout::oci {

namespace fs = std::filesystem;

namespace {

std::string_view Hex(std::string_view digest) { return digest.substr(7); }

}  // namespace

std::string DigestMismatch(std::string_view want, std::string_view got, const std::string& what) {
  return "blob " + std::string(want) + " of " + what + " is corrupt: its content hashes to sha256:" + std::string(got) +
         "; it was refused and nothing was cached (pull again, or check the source)";
}

Cache::Cache(fs::path root) : root_(std::move(root)) {}

fs::path Cache::BlobPath(std::string_view digest) const {
  return root_ / "oci" / "blobs" / "sha256" / std::string(Hex(digest));
}

fs::path Cache::PartialPath(std::string_view digest) const {
  return root_ / "oci" / "partial" / (std::string(Hex(digest)) + ".partial");
}

Result<std::FILE*> OpenForWriting(const fs::path& path, const char* mode) {
  std::FILE* f = std::fopen(path.c_str(), mode);
  // generic_category().message() is strerror(errno), without strerror's shared buffer
  // (downloads open files from several threads).
  if (!f) return Fail("cannot open " + path.string() + " for writing: " + std::generic_category().message(errno));
  return f;
}

bool Cache::Has(std::string_view digest, std::int64_t size) const {
  if (!IsSha256Digest(digest)) return false;
  const fs::path blob = BlobPath(digest);
  std::error_code ec;
  if (!fs::is_regular_file(blob, ec)) return false;
  if (size >= 0) {
    std::uintmax_t got = fs::file_size(blob, ec);
    if (!ec && got == static_cast<std::uintmax_t>(size)) return true;
  }
  // The size is unknown or wrong: only the content can tell a damaged file (dropped, to
  // be fetched again) from a descriptor that misstates the size (the blob stays, but
  // does not count as there for that descriptor).
  auto hex = Sha256File(blob);
  if (hex && *hex == Hex(digest)) return size < 0;
  std::fprintf(stderr, "sprout: the cached blob %s is damaged (%s); it was removed, to be fetched or imported again\n",
               std::string(digest).c_str(), hex ? "its content hashes to something else" : hex.error().c_str());
  fs::remove(blob, ec);
  return false;
}

Result<std::string> Cache::Read(std::string_view digest) const {
  if (!IsSha256Digest(digest)) return Fail("'" + std::string(digest) + "' is not a sha256 digest");
  return ReadFile(BlobPath(digest));
}

Status Cache::Put(std::string_view digest, std::string_view bytes, const std::string& what) {
  if (!IsSha256Digest(digest)) return Fail("'" + std::string(digest) + "' is not a sha256 digest");
  std::string got = Sha256Hex(bytes);
  if (got != Hex(digest)) return Fail(DigestMismatch(digest, got, what));
  if (Has(digest, static_cast<std::int64_t>(bytes.size()))) return Ok{};
  std::error_code ec;
  fs::create_directories(BlobPath(digest).parent_path(), ec);
  if (ec) return Fail("cannot create the cache " + BlobPath(digest).parent_path().string() + ": " + ec.message());
  return WriteFileAtomic(BlobPath(digest), bytes);
}

Status Cache::CommitPartial(std::string_view digest, const std::string& what) {
  fs::path partial = PartialPath(digest);
  auto got = Sha256File(partial);
  if (!got) return Fail(got.error());
  std::error_code ec;
  if (*got != Hex(digest)) {
    fs::remove(partial, ec);
    return Fail(DigestMismatch(digest, *got, what));
  }
  // The blob's bytes, then its name, reach the disk before it counts as committed.
  if (auto s = SyncPath(partial); !s) return Fail(s.error());
  fs::create_directories(BlobPath(digest).parent_path(), ec);
  fs::rename(partial, BlobPath(digest), ec);
  if (ec) return Fail("cannot move " + partial.string() + " into the cache: " + ec.message());
  return SyncPath(BlobPath(digest).parent_path());
}

Status Cache::Import(std::string_view digest, const fs::path& file, const std::string& what) {
  if (!IsSha256Digest(digest)) return Fail("'" + std::string(digest) + "' is not a sha256 digest");
  std::error_code ec;
  std::uintmax_t size = fs::file_size(file, ec);
  if (!ec && Has(digest, static_cast<std::int64_t>(size))) return Ok{};
  fs::create_directories(PartialPath(digest).parent_path(), ec);
  fs::remove(PartialPath(digest), ec);
  fs::copy_file(file, PartialPath(digest), ec);
  if (ec) return Fail("cannot copy " + file.string() + " into the cache: " + ec.message());
  return CommitPartial(digest, what);
}

Status Cache::RecordRef(std::string_view key, std::string_view digest) {
  fs::path dir = root_ / "oci" / "refs";
  std::error_code ec;
  fs::create_directories(dir, ec);
  return WriteFileAtomic(dir / Sha256Hex(key), std::string(digest) + "\n" + std::string(key) + "\n");
}

std::optional<std::string> Cache::LookupRef(std::string_view key) const {
  auto text = ReadFile(root_ / "oci" / "refs" / Sha256Hex(key));
  if (!text) return std::nullopt;
  std::string d = text->substr(0, text->find('\n'));
  if (!IsSha256Digest(d)) return std::nullopt;
  return d;
}

}  // namespace sprout::oci
