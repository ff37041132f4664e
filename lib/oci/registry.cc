#include "oci/registry.h"

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <system_error>
#include <thread>

#include "oci/reference.h"
#include "util/sha256.h"
#include "util/text.h"

namespace sprout::oci {

namespace fs = std::filesystem;

namespace {

// Response is what one HTTP exchange returned.
struct Response {
  CURLcode curl = CURLE_OK;
  std::string curl_error;
  long status = 0;
  std::string body;
  std::string content_type;
  std::string docker_digest;
  std::string www_authenticate;
};

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

size_t HeaderCallback(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<Response*>(user);
  std::string line(data, size * n);
  auto colon = line.find(':');
  if (line.starts_with("HTTP/")) {
    // A new response (after a redirect or a 100): forget the previous headers.
    r->content_type.clear();
    r->docker_digest.clear();
    r->www_authenticate.clear();
  } else if (colon != std::string::npos) {
    std::string key = Lower(line.substr(0, colon));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) value.pop_back();
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    if (key == "content-type") r->content_type = value;
    if (key == "docker-content-digest") r->docker_digest = value;
    if (key == "www-authenticate" && r->www_authenticate.empty()) r->www_authenticate = value;
  }
  return size * n;
}

size_t BodyToString(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<Response*>(user);
  if (r->body.size() + size * n > (8u << 20)) return 0;  // manifests and tokens are small
  r->body.append(data, size * n);
  return size * n;
}

bool Transient(const Response& r) {
  switch (r.curl) {
    case CURLE_OK:
      return r.status >= 500 || r.status == 429 || r.status == 408;
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

std::string Escape(CURL* c, const std::string& s) {
  char* e = curl_easy_escape(c, s.c_str(), static_cast<int>(s.size()));
  std::string out = e ? e : "";
  curl_free(e);
  return out;
}

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

}  // namespace

struct RegistryClient::State {
  std::string registry, repository;
  ClientOptions opt;
  std::mutex mu;
  std::string authorization;  // "Authorization: …" once we know what to send
  std::string base;           // https://registry/v2/repository

  std::string What() const { return registry + "/" + repository; }

  // Setup applies the settings every request shares.
  void Setup(CURL* c, const std::string& url, Response& r, curl_slist* headers) const {
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, HeaderCallback);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 15L);
    // A connection that moves nothing for 30 s is dead; the retry resumes it.
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 30L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "sprout/" SPROUT_VERSION);
    // One connection per download thread; HTTP/1.1 keeps ranged resumes simple.
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "https");
    if (!opt.ca_bundle.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, opt.ca_bundle.c_str());
  }

  // Auth answers a 401's challenge and sets `authorization`; the error explains.
  Status Auth(CURL* c, const std::string& challenge_header, const std::string& failed_with) {
    auto ch = ParseChallenge(challenge_header);
    const std::string who = opt.credentials
                                ? "user '" + opt.credentials->username + "' (from " + opt.credentials->origin + ")"
                                : std::string("no credentials");
    if (!failed_with.empty()) {
      return Fail("registry " + registry + " refused the credentials for " + What() + " (HTTP 401) with " + who +
                  "; check the user name and password in the credentials file, the environment "
                  "(SPROUT_REGISTRY_USERNAME/SPROUT_REGISTRY_PASSWORD) or config.json");
    }
    if (!ch) return Fail("registry " + registry + " answered 401 without a usable WWW-Authenticate header");
    if (ch->scheme == "basic") {
      if (!opt.credentials) {
        return Fail("registry " + registry + " asks for a user name and password for " + What() +
                    "; give them in a credentials file named by the profile's images[].credentials, in "
                    "SPROUT_REGISTRY_USERNAME/SPROUT_REGISTRY_PASSWORD, or in a docker config.json");
      }
      std::string b64 = Base64Encode(opt.credentials->username + ":" + opt.credentials->password);
      std::lock_guard<std::mutex> lock(mu);
      authorization = "Authorization: Basic " + b64;
      return Ok{};
    }
    if (ch->scheme != "bearer") return Fail("registry " + registry + " wants unsupported auth '" + ch->scheme + "'");
    std::string realm = ch->params["realm"];
    if (realm.empty()) return Fail("registry " + registry + " sent a Bearer challenge with no realm");
    std::string url = realm + (realm.find('?') == std::string::npos ? "?" : "&");
    if (!ch->params["service"].empty()) url += "service=" + Escape(c, ch->params["service"]) + "&";
    std::string scope = ch->params["scope"].empty() ? "repository:" + repository + ":pull" : ch->params["scope"];
    url += "scope=" + Escape(c, scope);
    Response r;
    for (int attempt = 0; attempt < opt.attempts; ++attempt) {
      r = Response{};
      curl_easy_reset(c);
      Setup(c, url, r, nullptr);
      curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, BodyToString);
      curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
      if (opt.credentials) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_USERNAME, opt.credentials->username.c_str());
        curl_easy_setopt(c, CURLOPT_PASSWORD, opt.credentials->password.c_str());
      }
      r.curl = curl_easy_perform(c);
      curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
      if (!Transient(r)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(opt.backoff_ms << attempt));
    }
    if (r.curl != CURLE_OK) {
      return Fail("cannot reach the token server " + realm + " of registry " + registry + ": " +
                  curl_easy_strerror(r.curl));
    }
    if (r.status == 401 || r.status == 403) {
      return Fail("the token server " + realm + " refused " + who + " for " + What() + " (HTTP " +
                  std::to_string(r.status) + "); check the user name and password");
    }
    if (r.status != 200) {
      return Fail("the token server " + realm + " answered HTTP " + std::to_string(r.status) + " for " + What());
    }
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    std::string token;
    if (j.is_object()) {
      for (const char* k : {"token", "access_token"}) {
        if (auto it = j.find(k); it != j.end() && it->is_string() && !it->get<std::string>().empty()) {
          token = it->get<std::string>();
          break;
        }
      }
    }
    if (token.empty()) return Fail("the token server " + realm + " sent no token for " + What());
    std::lock_guard<std::mutex> lock(mu);
    authorization = "Authorization: Bearer " + token;
    return Ok{};
  }

  // FetchOne downloads one blob into the cache, resuming a partial file, verifying it.
  Status FetchOne(CURL* c, const Descriptor& d, Cache& cache) {
    fs::path partial = cache.PartialPath(d.digest);
    std::error_code ec;
    fs::create_directories(partial.parent_path(), ec);
    if (ec) return Fail("cannot create " + partial.parent_path().string() + ": " + ec.message());
    const std::string what = What();
    struct Sink {
      CURL* h = nullptr;
      std::FILE* f = nullptr;
      fs::path path;
      std::uint64_t have = 0;   // bytes in the partial file
      std::uint64_t limit = 0;  // the descriptor's size
      bool checked = false;     // the status of this response was looked at
      bool discard = false;     // an error body: not blob bytes
      bool too_big = false;
      std::string error;  // why the partial file could not be opened or written
      const std::string* digest = nullptr;
      const ClientOptions* opt = nullptr;
    } sink;
    sink.limit = static_cast<std::uint64_t>(d.size);
    sink.digest = &d.digest;
    sink.opt = &opt;
    sink.path = partial;
    auto write = +[](char* data, size_t size, size_t n, void* user) -> size_t {
      auto* s = static_cast<Sink*>(user);
      std::size_t len = size * n;
      if (!s->checked) {
        s->checked = true;
        long status = 0;
        curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &status);
        s->discard = status != 200 && status != 206;
        if (status == 200 && s->have > 0) {
          // The server ignored the Range header and sends everything: start over.
          std::fclose(s->f);
          s->f = nullptr;
          s->have = 0;
          auto f = OpenForWriting(s->path, "wb");
          if (!f) {
            s->error = f.error();
            return 0;
          }
          s->f = *f;
        }
      }
      if (s->discard) return len;
      if (s->have + len > s->limit) {
        s->too_big = true;
        return 0;
      }
      if (std::fwrite(data, 1, len, s->f) != len) {
        s->error = "cannot write " + s->path.string() + ": " + std::generic_category().message(errno);
        return 0;
      }
      s->have += len;
      if (s->opt->progress) s->opt->progress(*s->digest, s->have);
      return len;
    };
    std::string range_header;
    auto prepare = [&](CURL* h, Response&) -> Status {
      if (sink.f) std::fclose(sink.f);
      sink.f = nullptr;
      std::error_code e2;
      sink.have = fs::exists(partial, e2) ? fs::file_size(partial, e2) : 0;
      if (sink.have >= sink.limit) {
        fs::remove(partial, e2);
        sink.have = 0;
      }
      auto f = OpenForWriting(partial, sink.have ? "ab" : "wb");
      if (!f) {
        sink.error = f.error();
        return Fail(f.error());
      }
      sink.f = *f;
      sink.h = h;
      sink.checked = false;
      sink.discard = false;
      curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write);
      curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
      if (sink.have) {
        // A Range header of our own, rather than curl's resume, so that a server that
        // answers 200 restarts the file instead of failing the transfer.
        range_header = std::to_string(sink.have) + "-";  // curl sends "Range: bytes=N-"
        curl_easy_setopt(h, CURLOPT_RANGE, range_header.c_str());
      }
      if (sink.have) {
        std::fprintf(stderr, "sprout: resuming blob %s of %s at byte %llu\n", d.digest.c_str(), what.c_str(),
                     static_cast<unsigned long long>(sink.have));
        if (opt.progress) opt.progress(d.digest, sink.have);
      }
      return Ok{};
    };
    auto r = Get(c, base + "/blobs/" + d.digest, {}, prepare);
    if (sink.f) {
      std::fclose(sink.f);
      sink.f = nullptr;
    }
    if (r && r->status == 416) {
      // The partial file does not fit what the server has: start that blob over.
      fs::remove(partial, ec);
      r = Get(c, base + "/blobs/" + d.digest, {}, prepare);
      if (sink.f) {
        std::fclose(sink.f);
        sink.f = nullptr;
      }
    }
    if (!sink.error.empty()) {
      // Not the network's fault: curl only saw the write callback give up.
      fs::remove(partial, ec);
      return Fail("cannot download blob " + d.digest + " of " + what + ": " + sink.error);
    }
    if (sink.too_big) {
      fs::remove(partial, ec);
      return Fail("blob " + d.digest + " of " + what + " is larger than its manifest says (" + std::to_string(d.size) +
                  " bytes); it was refused and nothing was cached");
    }
    if (!r) return Fail(r.error());
    if (r->status == 404) return Fail("registry " + registry + " has no blob " + d.digest + " in " + what);
    if (r->status != 200 && r->status != 206) {
      return Fail("registry " + registry + " answered HTTP " + std::to_string(r->status) + " for blob " + d.digest);
    }
    // The cache trusts a blob only at its descriptor's size: a short one is refused here.
    if (std::uintmax_t n = fs::file_size(partial, ec); !ec && n != static_cast<std::uintmax_t>(d.size)) {
      fs::remove(partial, ec);
      return Fail("blob " + d.digest + " of " + what + " is " + std::to_string(n) + " bytes, not the " +
                  std::to_string(d.size) + " its manifest says; it was refused and nothing was cached");
    }
    return cache.CommitPartial(d.digest, what);
  }

  std::string CurrentAuth() {
    std::lock_guard<std::mutex> lock(mu);
    return authorization;
  }

  // Get runs a GET with retries and auth; the body goes to sink (or into r.body).
  // prepare(Response&) runs before each attempt (to set Range and reopen files); its
  // error ends the request.
  Result<Response> Get(CURL* c, const std::string& url, const std::vector<std::string>& extra,
                       const std::function<Status(CURL*, Response&)>& prepare) {
    int auth_rounds = 0;
    for (int attempt = 0;; ++attempt) {
      Response r;
      curl_easy_reset(c);
      curl_slist* headers = nullptr;
      for (const auto& h : extra) headers = curl_slist_append(headers, h.c_str());
      std::string auth = CurrentAuth();
      if (!auth.empty()) headers = curl_slist_append(headers, auth.c_str());
      Setup(c, url, r, headers);
      curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, BodyToString);
      curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
      if (prepare) {
        if (auto s = prepare(c, r); !s) {
          curl_slist_free_all(headers);
          return Fail(s.error());
        }
      }
      r.curl = curl_easy_perform(c);
      curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
      curl_slist_free_all(headers);
      if (r.curl == CURLE_OK && r.status == 401) {
        // One auth round per request: a second 401 means the credentials are wrong.
        if (auto s = Auth(c, r.www_authenticate, auth_rounds > 0 ? auth : std::string()); !s) return Fail(s.error());
        ++auth_rounds;
        --attempt;  // an auth round is not a failed attempt
        continue;
      }
      if (Transient(r) && attempt + 1 < opt.attempts) {
        std::this_thread::sleep_for(std::chrono::milliseconds(opt.backoff_ms << std::min(attempt, 6)));
        continue;
      }
      if (r.curl != CURLE_OK) {
        std::string e = curl_easy_strerror(r.curl);
        if (r.curl == CURLE_PEER_FAILED_VERIFICATION || r.curl == CURLE_SSL_CACERT_BADFILE) {
          e += "; give the registry's CA with --ca-bundle (PEM)";
        }
        return Fail("cannot fetch " + url + ": " + e + " (after " + std::to_string(attempt + 1) + " attempts)");
      }
      return r;
    }
  }
};

RegistryClient::RegistryClient(std::string registry, std::string repository, ClientOptions options)
    : s_(std::make_unique<State>()) {
  static CurlGlobal global;
  s_->registry = std::move(registry);
  s_->repository = std::move(repository);
  s_->opt = std::move(options);
  s_->base = "https://" + s_->registry + "/v2/" + s_->repository;
}

RegistryClient::~RegistryClient() = default;

Result<FetchedManifest> RegistryClient::GetManifest(const std::string& tag_or_digest) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> c(curl_easy_init(), curl_easy_cleanup);
  auto r = s_->Get(c.get(), s_->base + "/manifests/" + tag_or_digest, {AcceptHeader()}, nullptr);
  if (!r) return Fail(r.error());
  if (r->status == 404) {
    return Fail("registry " + s_->registry + " has no manifest " + s_->What() + ":" + tag_or_digest +
                " (HTTP 404); check the repository and tag");
  }
  if (r->status != 200) {
    return Fail("registry " + s_->registry + " answered HTTP " + std::to_string(r->status) + " for the manifest " +
                s_->What() + ":" + tag_or_digest);
  }
  FetchedManifest m;
  m.bytes = std::move(r->body);
  m.content_type = r->content_type;
  m.digest = "sha256:" + Sha256Hex(m.bytes);
  if (IsSha256Digest(r->docker_digest) && r->docker_digest != m.digest) {
    return Fail(DigestMismatch(r->docker_digest, m.digest.substr(7), "manifest " + s_->What() + ":" + tag_or_digest));
  }
  if (IsSha256Digest(tag_or_digest) && m.digest != tag_or_digest) {
    return Fail(DigestMismatch(tag_or_digest, m.digest.substr(7), "manifest " + s_->What()));
  }
  return m;
}

Status RegistryClient::FetchBlobs(const std::vector<Descriptor>& blobs, Cache& cache) {
  std::vector<Descriptor> pending;
  for (const auto& b : blobs) {
    if (cache.Has(b.digest, b.size)) {
      if (s_->opt.progress) s_->opt.progress(b.digest, static_cast<std::uint64_t>(b.size));
    } else if (std::none_of(pending.begin(), pending.end(),
                            [&](const Descriptor& d) { return d.digest == b.digest; })) {
      pending.push_back(b);
    }
  }
  std::atomic<std::size_t> next{0};
  std::mutex err_mu;
  std::string first_error;
  auto worker = [&]() {
    std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> c(curl_easy_init(), curl_easy_cleanup);
    for (;;) {
      std::size_t i = next++;
      if (i >= pending.size()) return;
      {
        std::lock_guard<std::mutex> lock(err_mu);
        if (!first_error.empty()) return;
      }
      auto st = s_->FetchOne(c.get(), pending[i], cache);
      if (!st) {
        std::lock_guard<std::mutex> lock(err_mu);
        if (first_error.empty()) first_error = st.error();
      }
    }
  };
  std::vector<std::thread> threads;
  std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(std::max(1, s_->opt.parallel)), pending.size());
  for (std::size_t i = 0; i < n; ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (!first_error.empty()) return Fail(first_error);
  return Ok{};
}

}  // namespace sprout::oci
