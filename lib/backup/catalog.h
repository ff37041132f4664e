// Bundle names in a sink, what a listing shows, and which bundles retention removes.
// Pure: the edge lists the folder and deletes (docs/backup.md, "Names, listing,
// retention").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backup/bundle.h"

namespace sprout::backup {

// BundleName is what a bundle's file name says.
struct BundleName {
  std::string cluster;    // cluster name
  std::int64_t time = 0;  // Unix seconds: the slot's start (scheduled) or when taken (manual)
  std::string kind;       // "scheduled" or "manual"
  std::string node;       // manual only: the node that took it
  std::string tag;        // scheduled only, usually "": 16 hex digits when the slot's own name held a
                          // file that did not count (JudgeSlot), so the bundle went under another
  bool operator==(const BundleName&) const = default;
};

// FormatUtc renders Unix seconds as "20261124T101500Z".
std::string FormatUtc(std::int64_t unix_seconds);
// ParseUtc reads FormatUtc's form back.
std::optional<std::int64_t> ParseUtc(std::string_view text);

// NameFor is the file name of a bundle: "<cluster>-<UTC>-scheduled.sprout-backup",
// "<cluster>-<UTC>-scheduled-<tag>.sprout-backup" or
// "<cluster>-<UTC>-manual-<node>.sprout-backup". A name is a claim: it orders nothing
// (ListBundles and Prune order by the authenticated time).
std::string NameFor(const BundleName& name);
// ParseName reads a file name NameFor made; anything else (temporary files included)
// gives nothing.
std::optional<BundleName> ParseName(std::string_view file);

// TempNameFor is the temporary name a bundle is written under before it is linked to
// its name: hidden, and never parsed as a bundle.
std::string TempNameFor(std::string_view name, std::string_view node, long pid);
// IsTempName says whether file is a name TempNameFor made.
bool IsTempName(std::string_view file);
// TempBundleName is what the bundle name a temporary file carries says (nothing when
// file is no temporary name, or the name in it does not parse).
std::optional<BundleName> TempBundleName(std::string_view file);

// Authenticity is what opening a bundle with the cluster's secret showed.
enum class Authenticity {
  kUnchecked,  // not opened (not this cluster's, its header does not read, too many, or unreadable)
  kAuthentic,  // it opened (OpenBundle): its header's fields are the sealer's
  kRefused,    // it was read whole and did not open: forged, damaged, or another secret's
};

// SinkFile is one file in a sink as the edge found it.
struct SinkFile {
  std::string file;        // its name in the folder
  std::uint64_t size = 0;  // bytes
  std::int64_t mtime = 0;  // Unix seconds
  bool header_ok = false;  // the header reads and the size matches it (ReadHeaderPrefix); a claim only
  std::string problem;     // why not, when !header_ok; or why it did not open
  std::uint64_t revision = 0;
  // Retention's view, filled by the edge (AuthenticateBundles) for bundles it opened:
  Authenticity opened = Authenticity::kUnchecked;
  std::int64_t created = 0;  // the authenticated header's time (never the name's)
  std::string sealing;       // the authenticated header's salt: one per SealBundle, shared by copies
};

// Listed is one bundle of the cluster, newest first in a listing.
struct Listed {
  SinkFile file;
  BundleName name;
};

// ListBundles keeps the bundles of cluster among files: first those that opened, newest
// first by their authenticated time (SinkFile::created; then sealing, then name), then
// the rest by name, newest name first. A name's time orders nothing: a renamed old
// bundle lists at the time sealed inside it. Temporary files and other clusters'
// bundles are left out.
std::vector<Listed> ListBundles(const std::vector<SinkFile>& files, std::string_view cluster);

// kMaxBytesOpenedPerPrune bounds the bytes one prune reads to authenticate bundles: two
// of the largest bundles there can be.
inline constexpr std::uint64_t kMaxBytesOpenedPerPrune = 2 * kMaxBundleSize;

// BundleSizeBound is the largest file a prune reads through, given a bundle of this
// cluster of `size` bytes written now: four times it (etcd grows, but not fourfold
// between two bundles), and at least 64 MiB.
std::uint64_t BundleSizeBound(std::uint64_t size);

// OpenPlan is which files (indices into a prune's files) a prune opens, in order, and
// which it leaves unchecked.
struct OpenPlan {
  std::vector<std::size_t> open;
  std::vector<std::size_t> too_large;  // over the size bound
  std::vector<std::size_t> skipped;    // past the budget
};

// OpenOrder plans which of the cluster's bundles whose clear header reads a prune opens
// (and temporary files carrying one of its names, which a prune removes only once they
// opened):
// the smallest first (ties: the newer name, then the name), none over max_file bytes,
// while their sizes sum to at most budget. Sizes are claims too, but a claim costs its
// own bytes to check: junk claiming 8 GiB is checked after every real bundle (a few MB),
// or not at all when it is over max_file; junk of a real bundle's size crowds the real
// ones out only by filling the whole budget.
OpenPlan OpenOrder(const std::vector<SinkFile>& files, std::string_view cluster, std::uint64_t budget,
                   std::uint64_t max_file = kMaxBundleSize);

// SlotFile is what opening the file under a scheduled slot's name showed.
struct SlotFile {
  Authenticity opened = Authenticity::kUnchecked;
  std::string kind;          // the authenticated header's kind
  std::int64_t created = 0;  // and its time
  std::string problem;       // why it did not open
  bool over_limit = false;   // it was not read through: over the bytes the node would read
};

// SlotVerdict says whether that file counts as the slot's bundle, and why not.
struct SlotVerdict {
  bool counts = false;
  std::string why;
};

// JudgeSlot counts a slot's file only when it opened with the cluster's secret, is a
// scheduled bundle and was sealed at or after the slot's start: anything else (junk,
// a file the share's writer made, an older bundle renamed to the slot) does not stop
// the slot's backup.
SlotVerdict JudgeSlot(const SlotFile& f, std::int64_t slot);

// Retention is what a prune removes, and why nothing when it removes nothing.
struct Retention {
  std::vector<std::string> remove;       // file names to delete
  std::string held;                      // non-empty: why no bundle is deleted
  std::vector<std::string> not_counted;  // "file: why" for this cluster's bundles that did not open
};

// kStaleTempSeconds is how old a temporary file must be before a prune removes it: a
// write in progress on another node is never that slow.
inline constexpr std::int64_t kStaleTempSeconds = 3600;

// TempFileTime is when a temporary file was begun: its mtime, or, when that lies more
// than kStaleTempSeconds ahead of now (libnfs 4.0 can leave such a time), the time in
// the bundle name it carries.
std::int64_t TempFileTime(const SinkFile& f, std::int64_t now);

// Prune decides retention for cluster by authenticated content only. Counted are the
// cluster's bundles that opened (SinkFile::opened), one per sealing (copies of one
// bundle under other names count once), ordered by the time inside them, newest first;
// names and clear headers are claims and order nothing. The newest `keep` sealings are
// kept (keep < 1 counts as 1, so the newest bundle that opens always stays), and the
// files of older sealings are removed, except `protect` (the bundle just written),
// which is never removed. A bundle that did not open, or was not checked, is neither
// counted nor removed (not_counted says why); with no bundle that opens, nothing is
// removed (held says why). A temporary file older than kStaleTempSeconds (by
// TempFileTime) is removed only when it opened as a bundle of cluster (a write that died
// after it was whole); one that does not open is left and named in not_counted, since
// nothing shows it is ours. Another cluster's files never are removed.
Retention Prune(const std::vector<SinkFile>& files, std::string_view cluster, int keep, std::int64_t now,
                std::string_view protect = {});

}  // namespace sprout::backup
