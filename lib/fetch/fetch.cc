#include "fetch/fetch.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

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

struct Download {
  int fd = -1;
  bool sparse = false;
  bool write_failed = false;
  Sha256 hash;
  std::uint64_t bytes = 0;
};

bool AllZero(const char* data, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (data[i] != 0) return false;
  }
  return true;
}

size_t OnData(char* data, size_t size, size_t count, void* user) {
  auto* d = static_cast<Download*>(user);
  const size_t n = size * count;
  d->hash.Update(std::string_view(data, n));
  // A sparse download leaves a hole where the data is all zeros (a disk image is mostly
  // that); the final ftruncate gives the file its length.
  if (!d->sparse || !AllZero(data, n)) {
    size_t done = 0;
    while (done < n) {
      const ssize_t w = ::pwrite(d->fd, data + done, n - done, static_cast<off_t>(d->bytes + done));
      if (w <= 0) {
        d->write_failed = true;
        return 0;
      }
      done += static_cast<size_t>(w);
    }
  }
  d->bytes += n;
  return n;
}

// Transient says whether another try may help.
bool Transient(CURLcode code, long status) {
  if (code == CURLE_OK) return status == 429 || status >= 500;
  return code == CURLE_COULDNT_CONNECT || code == CURLE_OPERATION_TIMEDOUT || code == CURLE_RECV_ERROR ||
         code == CURLE_SEND_ERROR || code == CURLE_PARTIAL_FILE || code == CURLE_GOT_NOTHING;
}

}  // namespace

Result<Downloaded> DownloadTo(const std::string& url, const fs::path& dest, bool sparse) {
  std::string last_error;
  std::error_code ec;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    if (attempt > 1) std::this_thread::sleep_for(std::chrono::milliseconds(500 * (1 << (attempt - 2))));
    Download d;
    d.sparse = sparse;
    d.fd = ::open(dest.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (d.fd < 0) return Fail("cannot write " + dest.string() + ": " + std::strerror(errno));
    CURL* curl = curl_easy_init();
    if (curl == nullptr) {
      ::close(d.fd);
      return Fail("libcurl failed to start");
    }
    char err[CURL_ERROR_SIZE] = {};
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnData);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &d);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 15L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https,file");
    CURLcode code = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(curl);
    const bool sized = ::ftruncate(d.fd, static_cast<off_t>(d.bytes)) == 0;
    const bool closed = ::close(d.fd) == 0;
    const bool http = url.rfind("http", 0) == 0;
    if (code == CURLE_OK && (!http || status == 200) && sized && closed && !d.write_failed) {
      return Downloaded{d.hash.HexDigest(), d.bytes};
    }
    fs::remove(dest, ec);
    if (d.write_failed) {
      return Fail("cannot write " + dest.string() + " (" + std::strerror(errno) + ") after " + std::to_string(d.bytes) +
                  " bytes of " + url);
    }
    last_error = code != CURLE_OK ? std::string(err[0] != 0 ? err : curl_easy_strerror(code))
                                  : "the server answered HTTP " + std::to_string(status);
    if (http && code == CURLE_OK && status == 404)
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
  auto got = DownloadTo(url, partial, false);
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
