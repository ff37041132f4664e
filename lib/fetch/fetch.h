// Fetch: files named by URL and sha256 in a profile, fetched once and cached by digest;
// and the bounded downloads (or local copies) of an A/B update's build.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "util/extent.h"
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

// kSparseBlock is the block a sparse download leaves as a hole when it is all zeros:
// the block size of ext4 as sprout makes it, so a hole is a block never allocated.
inline constexpr std::uint64_t kSparseBlock = 4096;

// kExtentMergeGap: SparseMap joins two runs of data blocks whose gap of zeros is at most
// this long, so that a disk image's map stays a few dozen extents (one HTTP request each)
// while a download of them still leaves nearly every zero block out.
inline constexpr std::uint64_t kExtentMergeGap = 1 << 20;

// SparseMapOf is a file's data: its non-zero kSparseBlock blocks (a short last block
// counts whole), and the extents that hold them.
struct SparseMapOf {
  std::uint64_t data_bytes = 0;
  std::vector<DataExtent> extents;
};

// BuildSparseMap maps the data blocks given as block numbers (ascending) of a file of
// size bytes into extents: runs of blocks, joined across gaps of at most merge_gap
// bytes, the last one ending at size at most. Pure.
std::vector<DataExtent> BuildSparseMap(const std::vector<std::uint64_t>& data_blocks, std::uint64_t size,
                                       std::uint64_t merge_gap);

// SparseMap reads the file (skipping its holes) and returns its data blocks' count and
// extents (BuildSparseMap, kExtentMergeGap).
Result<SparseMapOf> SparseMap(const std::filesystem::path& file);

// CheckExtents refuses extents that are not ascending, apart, non-empty, aligned to
// kSparseBlock (the last may end at size unaligned) and within size bytes; what names
// them in the message.
Status CheckExtents(const std::vector<DataExtent>& extents, std::uint64_t size, const std::string& what);

// DownloadOptions bound and shape a download.
struct DownloadOptions {
  bool sparse = false;               // leave holes where a kSparseBlock block is all zeros (disk images)
  std::uint64_t max_bytes = 0;       // refuse content longer than this; 0: no limit
  std::uint64_t max_data_bytes = 0;  // sparse: refuse more than this in non-zero blocks; 0: no limit
  std::filesystem::path ca_file;     // https: trust this CA bundle (PEM) instead of the system's
  // With sparse, http(s) and max_bytes the content's exact length: the extents that hold
  // all of its data (CheckExtents). Only they are fetched, with HTTP range requests, and
  // the content hashed as their bytes with zeros between: its sha256 is the whole file's,
  // so the caller's check of it covers the bytes between the extents too. A server that
  // ignores ranges (it answers 200) gets one plain download instead.
  std::vector<DataExtent> extents;
};

// Downloaded is what DownloadTo wrote: the content's sha256 and its length.
struct Downloaded {
  std::string sha256;
  std::uint64_t bytes = 0;
  std::uint64_t data_bytes = 0;  // with sparse: the bytes of the blocks written (SparseMap's data_bytes)
  std::size_t ranges = 0;        // the range requests it took; 0: one plain download
  std::uint64_t fetched = 0;     // the bytes that came over the network (or from the file)
};

// DownloadTo writes the content of url (http, https or file; up to 3 tries on transient
// errors) to dest, replacing it, and hashes it on the way. A redirect may go from http
// to http or https and from https to https only, never to file: (RedirectProtocols),
// at most 5 times. Content beyond options' limits ends the download with an error that
// names the limit. On failure dest is removed; an HTTP 404 (or a missing file: URL) is
// not retried and its error ends in "(not found)".
Result<Downloaded> DownloadTo(const std::string& url, const std::filesystem::path& dest,
                              const DownloadOptions& options);

// CopyTo copies the local file src to dest as DownloadTo would download it: hashed on
// the way, sparse and bounded as options say. A missing src's error ends in "(not found)".
Result<Downloaded> CopyTo(const std::filesystem::path& src, const std::filesystem::path& dest,
                          const DownloadOptions& options);

// RedirectProtocols are the schemes (libcurl's list) a redirect from url may go to:
// "https" from https, "http,https" from http, none ("") from anything else.
std::string RedirectProtocols(const std::string& url);

// VerifyFile checks a local file against an expected sha256.
Status VerifyFile(const std::filesystem::path& file, const std::string& sha256);

}  // namespace sprout
