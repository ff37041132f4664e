#include "fetch/fetch.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "util/fs.h"
#include "util/sha256.h"

namespace sprout {

namespace fs = std::filesystem;

fs::path CachedFilePath(const fs::path& cache_dir, const std::string& sha256) {
  return cache_dir / "files" / "sha256" / sha256;
}

Status VerifyFile(const fs::path& file, const std::string& sha256) {
  auto got = Sha256File(file);
  if (!got) return Fail(got.error());
  if (*got != sha256) {
    return Fail(file.string() + " has sha256 " + *got + ", but the profile expects " + sha256 +
                "; if the file changed on purpose, put its new digest in the profile");
  }
  return Ok{};
}

namespace {

// Sink hashes content as it comes and writes it to a file: whole, or sparse in
// kSparseBlock blocks aligned to the file's offsets, so the blocks left as holes are
// exactly the all-zero ones (what SparseMap counts). It refuses content beyond
// the options' limits. A sparse sink gathers kStage bytes before it looks at them and
// writes each run of data blocks with one pwrite: on an emulated CPU a syscall and a
// byte loop per 4 KiB block made the download of a 1 GiB build take minutes.
struct Sink {
  static constexpr std::size_t kStage = 1 << 20;  // a multiple of kSparseBlock
  int fd = -1;
  DownloadOptions options;
  bool write_failed = false;
  int write_errno = 0;
  std::string too_much;  // why the content was refused, when it was
  Sha256 hash;
  std::uint64_t bytes = 0;       // taken so far
  std::uint64_t data_bytes = 0;  // written in whole blocks (sparse)
  std::vector<char> stage;       // sparse: the bytes from offset bytes - stage.size(), a block boundary

  bool Put(const char* data, std::size_t n, std::uint64_t offset) {
    std::size_t done = 0;
    while (done < n) {
      const ssize_t w = ::pwrite(fd, data + done, n - done, static_cast<off_t>(offset + done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        write_failed = true;
        write_errno = w < 0 ? errno : ENOSPC;
        return false;
      }
      done += static_cast<std::size_t>(w);
    }
    return true;
  }

  static bool AllZero(const char* data, std::size_t n) {
    static const char kZeros[kSparseBlock] = {};
    return std::memcmp(data, kZeros, n) == 0;
  }

  // Flush writes the staged bytes' data blocks (the last one may be short), a run of
  // them at a time, and empties the stage.
  bool Flush() {
    const std::uint64_t base = bytes - stage.size();
    const char* data = stage.data();
    const std::size_t n = stage.size();
    std::size_t run = n;  // where the current run of data blocks began; n: none
    for (std::size_t i = 0;; i += kSparseBlock) {
      const bool end = i >= n;
      if (!end && !AllZero(data + i, std::min<std::size_t>(kSparseBlock, n - i))) {
        data_bytes += kSparseBlock;
        if (options.max_data_bytes != 0 && data_bytes > options.max_data_bytes) {
          too_much = "more than the " + std::to_string(options.max_data_bytes) + " bytes of data it may hold";
          return false;
        }
        if (run == n) run = i;
        continue;
      }
      if (run != n && !Put(data + run, std::min(i, n) - run, base + run)) return false;
      run = n;
      if (end) break;
    }
    stage.clear();
    return true;
  }

  bool Take(const char* data, std::size_t n) {
    if (options.max_bytes != 0 && bytes + n > options.max_bytes) {
      too_much = "longer than the " + std::to_string(options.max_bytes) + " bytes it may have";
      return false;
    }
    hash.Update(data, n);
    if (!options.sparse) {
      if (!Put(data, n, bytes)) return false;
      bytes += n;
      data_bytes = bytes;
      return true;
    }
    if (stage.capacity() < kStage) stage.reserve(kStage);
    while (n > 0) {
      const std::size_t take = std::min(n, kStage - stage.size());
      stage.insert(stage.end(), data, data + take);
      bytes += take;
      data += take;
      n -= take;
      if (stage.size() == kStage && !Flush()) return false;
    }
    return true;
  }

  // Zeros takes n zero bytes without writing them (a sparse sink's holes): hashed, and
  // bounded like Take. The staged bytes go first, so the next Take starts a new stage.
  bool Zeros(std::uint64_t n) {
    static const std::vector<char> kZeroes(std::size_t{1} << 20);
    if (options.max_bytes != 0 && bytes + n > options.max_bytes) {
      too_much = "longer than the " + std::to_string(options.max_bytes) + " bytes it may have";
      return false;
    }
    if (!stage.empty() && !Flush()) return false;
    while (n > 0) {
      const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(n, kZeroes.size()));
      hash.Update(kZeroes.data(), k);
      bytes += k;
      n -= k;
    }
    return true;
  }

  // Finish writes what is staged (the short last block counts whole) and gives the file
  // its length.
  bool Finish() {
    if (!stage.empty() && !Flush()) return false;
    return ::ftruncate(fd, static_cast<off_t>(bytes)) == 0;
  }
};

size_t OnData(char* data, size_t size, size_t count, void* user) {
  auto* s = static_cast<Sink*>(user);
  const size_t n = size * count;
  return s->Take(data, n) ? n : 0;
}

// RangeSink takes one range request's body into a Sink: the server must answer 206
// (Partial Content) with no more than the range's length.
struct RangeSink {
  Sink* sink = nullptr;
  CURL* curl = nullptr;
  std::uint64_t want = 0;
  std::uint64_t got = 0;
  long status = 0;  // the answer's HTTP status, read at its first bytes
};

size_t OnRangeData(char* data, size_t size, size_t count, void* user) {
  auto* r = static_cast<RangeSink*>(user);
  const size_t n = size * count;
  if (r->status == 0) curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, &r->status);
  if (r->status != 206) return 0;  // a whole file (200) or an error page: not taken
  if (r->got + n > r->want) {
    r->sink->too_much = "an answer longer than the range asked for";
    return 0;
  }
  r->got += n;
  return r->sink->Take(data, n) ? n : 0;
}

// NewRequest is a libcurl handle for url with sprout's settings: redirects as
// RedirectProtocols allows, timeouts, and the CA file of options.
CURL* NewRequest(const std::string& url, const std::string& redirects, char* err, const DownloadOptions& options) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return nullptr;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  // A redirect never leaves https and never reaches file: (RedirectProtocols).
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, redirects.empty() ? 0L : 1L);
  if (!redirects.empty()) curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, redirects.c_str());
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 256L << 10);  // fewer, larger calls of the write function
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, err);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 15L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https,file");
  if (!options.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, options.ca_file.c_str());
  return curl;
}

// Transient says whether another try may help.
bool Transient(CURLcode code, long status) {
  if (code == CURLE_OK) return status == 429 || status >= 500;
  return code == CURLE_COULDNT_CONNECT || code == CURLE_OPERATION_TIMEDOUT || code == CURLE_RECV_ERROR ||
         code == CURLE_SEND_ERROR || code == CURLE_PARTIAL_FILE || code == CURLE_GOT_NOTHING;
}

}  // namespace

std::string RedirectProtocols(const std::string& url) {
  if (url.starts_with("https://")) return "https";
  if (url.starts_with("http://")) return "http,https";
  return "";
}

std::vector<DataExtent> BuildSparseMap(const std::vector<std::uint64_t>& data_blocks, std::uint64_t size,
                                       std::uint64_t merge_gap) {
  std::vector<DataExtent> out;
  for (std::uint64_t block : data_blocks) {
    const std::uint64_t begin = block * kSparseBlock;
    if (begin >= size) break;
    const std::uint64_t end = std::min(begin + kSparseBlock, size);
    if (!out.empty() && begin <= out.back().offset + out.back().length + merge_gap) {
      out.back().length = end - out.back().offset;
    } else {
      out.push_back({begin, end - begin});
    }
  }
  return out;
}

Result<SparseMapOf> SparseMap(const fs::path& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Fail("cannot open " + file.string() + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Fail("cannot stat " + file.string() + ": " + std::strerror(err));
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  std::vector<char> buf(1 << 20);
  std::vector<std::uint64_t> blocks;
  std::uint64_t at = 0;
  while (at < size) {
    // The next region that may hold data: holes read as zeros, so they are skipped (a file
    // system without SEEK_DATA gives the whole rest).
    off_t data = ::lseek(fd, static_cast<off_t>(at), SEEK_DATA);
    if (data < 0 && errno == ENXIO) break;
    off_t hole = data < 0 ? static_cast<off_t>(size) : ::lseek(fd, data, SEEK_HOLE);
    // From the start of the block the region begins in (a block read twice counts once).
    std::uint64_t begin = (data < 0 ? at : static_cast<std::uint64_t>(data)) / kSparseBlock * kSparseBlock;
    const std::uint64_t end = hole < 0 ? size : static_cast<std::uint64_t>(hole);
    while (begin < end) {
      // Whole blocks are read (a short read only at the end), so buf's blocks are the file's.
      const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), end - begin));
      std::size_t got = 0;
      while (got < want) {
        const ssize_t n = ::pread(fd, buf.data() + got, want - got, static_cast<off_t>(begin + got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          const int err = errno;
          ::close(fd);
          return Fail("cannot read " + file.string() + ": " + std::strerror(err));
        }
        if (n == 0) break;
        got += static_cast<std::size_t>(n);
      }
      for (std::size_t b = 0; b < got; b += kSparseBlock) {
        const std::size_t len = std::min<std::size_t>(kSparseBlock, got - b);
        if (!Sink::AllZero(buf.data() + b, len)) {
          const std::uint64_t block = (begin + b) / kSparseBlock;
          if (blocks.empty() || blocks.back() < block) blocks.push_back(block);
        }
      }
      if (got == 0) break;
      begin += got;
    }
    at = std::max(end, at + 1);
  }
  ::close(fd);
  SparseMapOf map;
  map.data_bytes = blocks.size() * kSparseBlock;
  map.extents = BuildSparseMap(blocks, size, kExtentMergeGap);
  return map;
}

Status CheckExtents(const std::vector<DataExtent>& extents, std::uint64_t size, const std::string& what) {
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < extents.size(); ++i) {
    const DataExtent& e = extents[i];
    const std::string which = what + ": extent " + std::to_string(i + 1) + " (offset " + std::to_string(e.offset) +
                              ", length " + std::to_string(e.length) + ")";
    if (e.length == 0) return Fail(which + " is empty");
    if (i > 0 && e.offset <= at) return Fail(which + " does not come after the one before it");
    if (e.offset > size || e.length > size - e.offset) {
      return Fail(which + " ends past the file's " + std::to_string(size) + " bytes");
    }
    const bool at_end = e.offset + e.length == size;
    if (e.offset % kSparseBlock != 0 || (!at_end && e.length % kSparseBlock != 0)) {
      return Fail(which + " is not aligned to " + std::to_string(kSparseBlock) + "-byte blocks");
    }
    at = e.offset + e.length;
  }
  return Ok{};
}

Result<Downloaded> CopyTo(const fs::path& src, const fs::path& dest, const DownloadOptions& options) {
  int in = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    return Fail("cannot read " + src.string() + ": " + std::strerror(errno) + (errno == ENOENT ? " (not found)" : ""));
  }
  Sink s;
  s.options = options;
  s.fd = ::open(dest.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (s.fd < 0) {
    const int err = errno;
    ::close(in);
    return Fail("cannot write " + dest.string() + ": " + std::strerror(err));
  }
  std::vector<char> buf(1 << 20);
  std::string error;
  for (;;) {
    const ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = "cannot read " + src.string() + ": " + std::strerror(errno);
      break;
    }
    const bool more = n > 0;
    if (more ? !s.Take(buf.data(), static_cast<std::size_t>(n)) : !s.Finish()) {
      const int err = s.write_failed ? s.write_errno : errno;
      error = !s.too_much.empty() ? src.string() + " is " + s.too_much
                                  : "cannot write " + dest.string() + ": " + std::strerror(err);
    }
    if (!more || !error.empty()) break;
  }
  ::close(in);
  if (::close(s.fd) != 0 && error.empty()) error = "cannot write " + dest.string() + ": " + std::strerror(errno);
  if (!error.empty()) {
    std::error_code ec;
    fs::remove(dest, ec);
    return Fail(error);
  }
  return Downloaded{s.hash.HexDigest(), s.bytes, s.data_bytes};
}

namespace {

// SinkError is why d ended the download of url into dest, not to be tried again (more
// than its limits, or a write that failed); "" when it did not end it.
std::string SinkError(const Sink& d, const std::string& url, const fs::path& dest) {
  if (!d.too_much.empty()) return "cannot fetch " + url + ": it is " + d.too_much;
  if (d.write_failed) {
    return "cannot write " + dest.string() + " (" + std::strerror(d.write_errno) + ") after " +
           std::to_string(d.bytes) + " bytes of " + url;
  }
  return "";
}

// StartTry waits before a retry (0.5 s, then 1 s) and opens dest afresh for d.
Status StartTry(int attempt, const fs::path& dest, Sink& d) {
  if (attempt > 1) std::this_thread::sleep_for(std::chrono::milliseconds(500 * (1 << (attempt - 2))));
  d.fd = ::open(dest.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (d.fd < 0) return Fail("cannot write " + dest.string() + ": " + std::strerror(errno));
  return Ok{};
}

// DownloadRanges is DownloadTo for options.extents (fetch.h): one range request per
// extent on one connection, zeros between them. ignored is set when the server answered
// a range with the whole file (or nothing but 200): then nothing is kept and the caller
// downloads the whole file instead.
Result<Downloaded> DownloadRanges(const std::string& url, const fs::path& dest, const DownloadOptions& options,
                                  bool& ignored) {
  ignored = false;
  std::string last_error;
  std::error_code ec;
  const std::string redirects = RedirectProtocols(url);
  for (int attempt = 1; attempt <= 3; ++attempt) {
    Sink d;
    d.options = options;
    if (auto s = StartTry(attempt, dest, d); !s) return Fail(s.error());
    char err[CURL_ERROR_SIZE] = {};
    CURL* curl = NewRequest(url, redirects, err, options);
    if (curl == nullptr) {
      ::close(d.fd);
      return Fail("libcurl failed to start");
    }
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnRangeData);
    CURLcode code = CURLE_OK;
    long status = 0;
    std::uint64_t at = 0;
    std::uint64_t fetched = 0;
    std::string range;
    bool whole = true;  // every extent came as asked
    for (const DataExtent& e : options.extents) {
      if (!d.Zeros(e.offset - at)) {
        whole = false;
        break;
      }
      RangeSink r;
      r.sink = &d;
      r.curl = curl;
      r.want = e.length;
      range = std::to_string(e.offset) + "-" + std::to_string(e.offset + e.length - 1);
      curl_easy_setopt(curl, CURLOPT_RANGE, range.c_str());
      curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r);
      code = curl_easy_perform(curl);
      status = r.status;
      if (status == 0) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
      if (status == 200) ignored = true;
      if (code != CURLE_OK || status != 206 || r.got != e.length || d.write_failed) {
        whole = false;
        break;
      }
      fetched += e.length;
      at = e.offset + e.length;
    }
    curl_easy_cleanup(curl);
    const bool finished = whole && d.Zeros(options.max_bytes - at) && d.Finish();
    const bool closed = ::close(d.fd) == 0;
    if (finished && closed) {
      return Downloaded{d.hash.HexDigest(), d.bytes, d.data_bytes, options.extents.size(), fetched};
    }
    fs::remove(dest, ec);
    if (ignored) return Fail("cannot fetch " + url + " in ranges: the server answered a range request with 200");
    if (auto why = SinkError(d, url, dest); !why.empty()) return Fail(why);
    // An answer other than 206 ends the transfer at its first bytes: its status says why.
    const bool answered = status != 0 && status != 206;
    last_error = answered           ? "the server answered HTTP " + std::to_string(status) + " to the range " + range
                 : code != CURLE_OK ? std::string(err[0] != 0 ? err : curl_easy_strerror(code))
                                    : "the range " + range + " came short";
    if (status == 404) return Fail("cannot fetch " + url + ": " + last_error + " (not found)");
    if (!Transient(answered ? CURLE_OK : code, status) && !(code == CURLE_OK && status == 206)) break;
  }
  return Fail("cannot fetch " + url + ": " + last_error);
}

}  // namespace

Result<Downloaded> DownloadTo(const std::string& url, const fs::path& dest, const DownloadOptions& options) {
  std::string last_error;
  std::error_code ec;
  const std::string redirects = RedirectProtocols(url);
  const bool http = url.starts_with("http://") || url.starts_with("https://");
  if (http && options.sparse && options.max_bytes != 0 && !options.extents.empty()) {
    if (auto s = CheckExtents(options.extents, options.max_bytes, url); !s) return Fail(s.error());
    bool ignored = false;
    auto got = DownloadRanges(url, dest, options, ignored);
    if (got || !ignored) return got;
  }
  for (int attempt = 1; attempt <= 3; ++attempt) {
    Sink d;
    d.options = options;
    if (auto s = StartTry(attempt, dest, d); !s) return Fail(s.error());
    char err[CURL_ERROR_SIZE] = {};
    CURL* curl = NewRequest(url, redirects, err, options);
    if (curl == nullptr) {
      ::close(d.fd);
      return Fail("libcurl failed to start");
    }
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnData);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &d);
    CURLcode code = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    char* effective = nullptr;
    curl_easy_getinfo(curl, CURLINFO_EFFECTIVE_URL, &effective);
    const std::string where = effective != nullptr ? effective : url;
    curl_easy_cleanup(curl);
    const bool finished = code == CURLE_OK && !d.write_failed && d.Finish();
    const bool closed = ::close(d.fd) == 0;
    if (finished && (!http || status == 200) && closed) {
      return Downloaded{d.hash.HexDigest(), d.bytes, d.data_bytes, 0, d.bytes};
    }
    fs::remove(dest, ec);
    if (auto why = SinkError(d, url, dest); !why.empty()) return Fail(why);
    // libcurl names the refused redirect's target as the effective URL.
    if ((code == CURLE_UNSUPPORTED_PROTOCOL && where != url) || code == CURLE_TOO_MANY_REDIRECTS) {
      return Fail(
          "cannot fetch " + url + ": " +
          (code == CURLE_TOO_MANY_REDIRECTS
               ? "more than 5 redirects (the last to " + where + ")"
               : "it redirects to " + where + ", which is refused: a redirect may not leave https, nor go to file:") +
          "; give the build's final URL");
    }
    last_error = code != CURLE_OK ? std::string(err[0] != 0 ? err : curl_easy_strerror(code))
                                  : "the server answered HTTP " + std::to_string(status);
    if (http && code == CURLE_OK && status == 404)
      return Fail("cannot fetch " + url + ": " + last_error + " (not found)");
    if (!http && code == CURLE_FILE_COULDNT_READ_FILE)
      return Fail("cannot fetch " + url + ": " + last_error + " (not found)");
    if (!Transient(code, status)) break;
  }
  return Fail("cannot fetch " + url + ": " + last_error);
}

Result<fs::path> FetchVerified(const std::string& url, const std::string& sha256, const fs::path& cache_dir) {
  const fs::path target = CachedFilePath(cache_dir, sha256);
  std::error_code ec;
  if (fs::exists(target, ec)) {
    if (VerifyFile(target, sha256).ok()) return target;
    fs::remove(target, ec);  // a damaged cache entry is fetched again
  }
  fs::create_directories(target.parent_path(), ec);
  if (ec) return Fail("cannot create the cache folder " + target.parent_path().string() + ": " + ec.message());
  const fs::path partial = target.string() + ".part-" + std::to_string(::getpid());
  auto got = DownloadTo(url, partial, DownloadOptions{});
  if (!got) return Fail(got.error());
  if (got->sha256 != sha256) {
    fs::remove(partial, ec);
    return Fail(url + ": the download (" + std::to_string(got->bytes) + " bytes) has sha256 " + got->sha256 +
                ", but the profile expects " + sha256 +
                ". Nothing was cached. Check the URL, or put the right digest in the profile");
  }
  fs::rename(partial, target, ec);
  if (ec) return Fail("cannot move " + partial.string() + " into the cache: " + ec.message());
  return target;
}

}  // namespace sprout
