#include "fetch/fetch.h"

#include <curl/curl.h>
#include <fcntl.h>
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
// exactly the all-zero ones (what SparseDataBytes counts). It refuses content beyond
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

Result<std::uint64_t> SparseDataBytes(const fs::path& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Fail("cannot open " + file.string() + ": " + std::strerror(errno));
  std::vector<char> buf(1 << 20);
  std::uint64_t data = 0;
  for (;;) {
    // Whole blocks are read (a short read only at the end), so buf's blocks are the file's.
    std::size_t got = 0;
    while (got < buf.size()) {
      const ssize_t n = ::read(fd, buf.data() + got, buf.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int err = errno;
        ::close(fd);
        return Fail("cannot read " + file.string() + ": " + std::strerror(err));
      }
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    for (std::size_t at = 0; at < got; at += kSparseBlock) {
      const std::size_t len = std::min<std::size_t>(kSparseBlock, got - at);
      if (!std::all_of(buf.data() + at, buf.data() + at + len, [](char c) { return c == 0; })) data += kSparseBlock;
    }
    if (got < buf.size()) break;
  }
  ::close(fd);
  return data;
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

Result<Downloaded> DownloadTo(const std::string& url, const fs::path& dest, const DownloadOptions& options) {
  std::string last_error;
  std::error_code ec;
  const std::string redirects = RedirectProtocols(url);
  for (int attempt = 1; attempt <= 3; ++attempt) {
    if (attempt > 1) std::this_thread::sleep_for(std::chrono::milliseconds(500 * (1 << (attempt - 2))));
    Sink d;
    d.options = options;
    d.fd = ::open(dest.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (d.fd < 0) return Fail("cannot write " + dest.string() + ": " + std::strerror(errno));
    CURL* curl = curl_easy_init();
    if (curl == nullptr) {
      ::close(d.fd);
      return Fail("libcurl failed to start");
    }
    char err[CURL_ERROR_SIZE] = {};
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    // A redirect never leaves https and never reaches file: (RedirectProtocols).
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, redirects.empty() ? 0L : 1L);
    if (!redirects.empty()) curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, redirects.c_str());
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnData);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &d);
    curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 256L << 10);  // fewer, larger calls of OnData
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 15L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https,file");
    if (!options.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, options.ca_file.c_str());
    CURLcode code = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    char* effective = nullptr;
    curl_easy_getinfo(curl, CURLINFO_EFFECTIVE_URL, &effective);
    const std::string where = effective != nullptr ? effective : url;
    curl_easy_cleanup(curl);
    const bool finished = code == CURLE_OK && !d.write_failed && d.Finish();
    const bool closed = ::close(d.fd) == 0;
    const bool http = url.rfind("http", 0) == 0;
    if (finished && (!http || status == 200) && closed) {
      return Downloaded{d.hash.HexDigest(), d.bytes, d.data_bytes};
    }
    fs::remove(dest, ec);
    if (!d.too_much.empty()) return Fail("cannot fetch " + url + ": it is " + d.too_much);
    if (d.write_failed) {
      return Fail("cannot write " + dest.string() + " (" + std::strerror(d.write_errno) + ") after " +
                  std::to_string(d.bytes) + " bytes of " + url);
    }
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
