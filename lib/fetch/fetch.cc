#include "fetch/fetch.h"

#include <curl/curl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
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
  std::FILE* out = nullptr;
  Sha256 hash;
  std::uint64_t bytes = 0;
};

size_t OnData(char* data, size_t size, size_t count, void* user) {
  auto* d = static_cast<Download*>(user);
  const size_t n = size * count;
  if (std::fwrite(data, 1, n, d->out) != n) return 0;
  d->hash.Update(std::string_view(data, n));
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
  std::string last_error;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    if (attempt > 1) std::this_thread::sleep_for(std::chrono::milliseconds(500 * (1 << (attempt - 2))));
    Download d;
    d.out = std::fopen(partial.c_str(), "wb");
    if (d.out == nullptr) return Fail("cannot write " + partial.string());
    CURL* curl = curl_easy_init();
    if (curl == nullptr) {
      std::fclose(d.out);
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
    const bool closed = std::fclose(d.out) == 0;
    const bool http = url.rfind("http", 0) == 0;
    if (code == CURLE_OK && (!http || status == 200) && closed) {
      const std::string got = d.hash.HexDigest();
      if (got != sha256) {
        fs::remove(partial, ec);
        return Fail(url + ": the download (" + std::to_string(d.bytes) + " bytes) has sha256 " + got +
                    ", but the profile expects " + sha256 +
                    ". Nothing was cached. Check the URL, or put the right digest in the profile");
      }
      fs::rename(partial, target, ec);
      if (ec) return Fail("cannot move " + partial.string() + " into the cache: " + ec.message());
      return target;
    }
    fs::remove(partial, ec);
    last_error = code != CURLE_OK ? std::string(err[0] != 0 ? err : curl_easy_strerror(code))
                                  : "the server answered HTTP " + std::to_string(status);
    if (!Transient(code, status)) break;
  }
  return Fail("cannot fetch " + url + ": " + last_error);
}

}  // namespace sprout
