// Where bundles go: a sink is a folder (local, on the state partition) or a folder on
// an NFS share reached in user space (libnfs). Both offer the same few primitives; the
// atomic write (temporary name, flush, link, read back) and the listing are written once
// over them (docs/backup.md, "Sinks").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backup/bundle.h"
#include "backup/catalog.h"
#include "util/result.h"

namespace sprout::backup {

// SinkLocation is what a --backup-dir value names.
struct SinkLocation {
  enum class Kind { kFolder, kNfs };
  Kind kind = Kind::kFolder;
  std::string text;    // as given, for messages
  std::string folder;  // kFolder: the folder's path
  std::string host;    // kNfs: the server (name or IPv4 address)
  std::string path;    // kNfs: the folder on the server, "/export/sub" (NFSv4 path)
  int uid = 0;         // kNfs: AUTH_SYS credentials (?uid=N&gid=N); root by default
  int gid = 0;
};

// ParseSinkLocation reads "nfs://HOST/PATH[?uid=N&gid=N]" or a plain folder path.
Result<SinkLocation> ParseSinkLocation(std::string_view text);

// BundleAt is a bundle's sink and its file name.
struct BundleAt {
  std::string sink;  // location of the folder (a path or an nfs:// URL)
  std::string name;  // file name in it
};

// SplitBundleLocation splits "DIR/NAME" or "nfs://HOST/PATH/NAME" (a query, if any,
// stays with the sink).
Result<BundleAt> SplitBundleLocation(std::string_view text);

// JoinLocation is the location of name in sink, for messages and the record.
std::string JoinLocation(std::string_view sink, std::string_view name);

// SinkEntry is one file of a sink's folder as its listing shows it.
struct SinkEntry {
  std::string name;
  std::uint64_t size = 0;
  std::int64_t mtime = 0;  // Unix seconds
};

// Sink is the few file operations a backup needs from where it writes. Every call is
// bounded in time (an NFS server that does not answer is an error after a timeout).
class Sink {
 public:
  virtual ~Sink() = default;
  // Location says where the sink is, for messages ("nfs://…" or the folder).
  virtual std::string Location() const = 0;
  // WriteNew creates (or truncates) name, writes bytes and flushes them to stable
  // storage (fsync; NFS COMMIT).
  virtual Status WriteNew(const std::string& name, std::string_view bytes) = 0;
  // Link gives the file from a second name; false (not an error) when to exists.
  virtual Result<bool> Link(const std::string& from, const std::string& to) = 0;
  // Remove deletes name; a missing name is no error.
  virtual Status Remove(const std::string& name) = 0;
  // ReadPrefix returns the first `limit` bytes of name (all of it when it is shorter).
  virtual Result<std::string> ReadPrefix(const std::string& name, std::uint64_t limit) = 0;
  // ReadChunks passes name's bytes to each in order, in pieces of at most kChunkSize,
  // until the file ends, `limit` bytes were passed, or each returns false; it never
  // holds more than one piece.
  virtual Status ReadChunks(const std::string& name, std::uint64_t limit,
                            const std::function<bool(std::string_view)>& each) = 0;
  // kChunkSize is the largest piece ReadChunks passes.
  static constexpr std::size_t kChunkSize = std::size_t{64} << 10;
  // Read returns name's whole contents, or an error when it is over limit bytes (it never
  // holds more than limit + 1 of them).
  Result<std::string> Read(const std::string& name, std::uint64_t limit = kMaxBundleSize);
  // Exists says whether name is in the folder.
  virtual Result<bool> Exists(const std::string& name) = 0;
  // List returns the folder's regular files.
  virtual Result<std::vector<SinkEntry>> List() = 0;
  // Sync makes the folder's names durable (fsync of the folder; NFS commits names).
  virtual Status Sync() = 0;
};

// kNfsTimeoutMs bounds each NFS call (libnfs counts whole seconds).
inline constexpr int kNfsTimeoutMs = 10000;

// OpenSink opens the sink a location names: a folder must exist; an NFS share is
// mounted (NFSv4, bounded by kNfsTimeoutMs) and its folder must exist.
Result<std::unique_ptr<Sink>> OpenSink(const std::string& location);

// SinkWrite is how a write to a sink ended.
enum class SinkWrite { kWritten, kExists };

// WriteBundle writes bytes to the sink as name atomically: under a temporary name
// (TempNameFor), flushed, linked to name (which fails if name exists: then kExists, and
// nothing changed), the folder synced, and read back: its sha256 must match, else the
// name is removed again. The temporary name is removed in every case it can be.
Result<SinkWrite> WriteBundle(Sink& sink, const std::string& name, std::string_view bytes, const std::string& node,
                              long pid);

// ScanBundles lists the sink's files and reads the header of each bundle name (and of
// each temporary name carrying one, for Prune): at most kMaxHeadSize bytes a file
// (ReadHeaderPrefix), and nothing of a file over kMaxBundleSize.
Result<std::vector<SinkFile>> ScanBundles(Sink& sink);

// Checked is what reading one bundle file through once showed.
struct Checked {
  std::uint64_t size = 0;                          // bytes read
  std::string sha256;                              // of the whole file; "" when reading stopped early (it cannot open)
  Authenticity opened = Authenticity::kUnchecked;  // kUnchecked: no secret was given
  BundleHeader header;                             // when kAuthentic: the authenticated header
  std::string problem;                             // when kRefused: why it does not open
  bool over_limit = false;                         // kRefused because it is over the bytes the caller would read
};

// CheckBundle reads name once, in pieces (Sink::ReadChunks; at most max_bytes + 1
// bytes), hashing it and, with a secret, authenticating it as it goes (BundleVerifier):
// memory stays a few pieces whatever the file holds or claims. A file that cannot open,
// or is over max_bytes, stops the reading early (then over_limit says which). An error
// only when the sink cannot be read.
Result<Checked> CheckBundle(Sink& sink, const std::string& name, std::string_view cluster, std::string_view secret,
                            std::uint64_t max_bytes = kMaxBundleSize);

// AuthenticateBundles opens the cluster's bundles among files whose header reads with
// the cluster's secret (CheckBundle, one at a time, in OpenOrder's order, within its
// byte budget and, with a known bundle `near` of this cluster, its size bound:
// BundleSizeBound), and records in each SinkFile whether it opened, and if so its
// authenticated time and sealing.
void AuthenticateBundles(Sink& sink, std::vector<SinkFile>& files, std::string_view cluster, std::string_view secret,
                         std::string_view near = {});

// PruneSink applies retention (Prune) to the sink: lists it, authenticates the bundles
// (AuthenticateBundles), removes what Prune says (never `protect`, the bundle just
// written) and syncs the folder when it removed anything. Returns the names it did
// remove, why it held, and what it did not count; a sink that cannot be listed is left
// alone.
Retention PruneSink(Sink& sink, std::string_view cluster, std::string_view secret, int keep, std::int64_t now,
                    std::string_view protect);

// ReadBundleAt reads the bundle a location names (a path, or an nfs:// URL of a file).
Result<std::string> ReadBundleAt(const std::string& location);

}  // namespace sprout::backup
