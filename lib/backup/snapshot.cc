#include "backup/snapshot.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "backup/bundle.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/sha256.h"
#include "util/text.h"

namespace sprout::backup {

namespace {

// JsonNumber reads a number the gateway may send as a string (64-bit integers are).
std::uint64_t JsonNumber(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return 0;
  const auto& v = j.at(key);
  if (v.is_string()) return std::stoull(v.get<std::string>());
  return v.get<std::uint64_t>();
}

Result<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) return Fail("a snapshot chunk is not base64");
  std::string out(text.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return Fail("a snapshot chunk is not base64");
  std::size_t pad = 0;
  if (!text.empty() && text.back() == '=') ++pad;
  if (text.size() > 1 && text[text.size() - 2] == '=') ++pad;
  out.resize(static_cast<std::size_t>(n) - pad);
  return out;
}

struct Curl {
  CURL* h = curl_easy_init();
  curl_slist* headers = nullptr;
  ~Curl() {
    curl_slist_free_all(headers);
    if (h != nullptr) curl_easy_cleanup(h);
  }
};

// Prepare sets up a POST of body to url with the client certificate.
void Prepare(Curl& c, const std::string& url, const std::string& body, const formation::EtcdClientTls& tls,
             long total_ms) {
  c.headers = curl_slist_append(nullptr, "Content-Type: application/json");
  curl_easy_setopt(c.h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c.h, CURLOPT_HTTPHEADER, c.headers);
  curl_easy_setopt(c.h, CURLOPT_COPYPOSTFIELDS, body.c_str());
  curl_easy_setopt(c.h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  curl_easy_setopt(c.h, CURLOPT_TIMEOUT_MS, total_ms);
  curl_easy_setopt(c.h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c.h, CURLOPT_CAINFO, tls.ca_file.c_str());
  curl_easy_setopt(c.h, CURLOPT_SSLCERT, tls.cert_file.c_str());
  curl_easy_setopt(c.h, CURLOPT_SSLKEY, tls.key_file.c_str());
}

std::size_t Collect(char* data, std::size_t size, std::size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

struct StreamState {
  SnapshotStream stream;
  std::string error;
  long status = 0;
  CURL* h = nullptr;
};

std::size_t FeedStream(char* data, std::size_t size, std::size_t n, void* user) {
  auto* s = static_cast<StreamState*>(user);
  if (s->status == 0) curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &s->status);
  if (s->status != 200) {
    s->error.append(data, size * n);  // etcd's error body, quoted below
    return size * n;
  }
  if (auto st = s->stream.Feed(std::string_view(data, size * n)); !st) {
    s->error = st.error();
    return 0;  // stops the transfer
  }
  return size * n;
}

}  // namespace

Result<EtcdStatus> ParseEtcdStatus(std::string_view json) {
  try {
    auto j = nlohmann::json::parse(json);
    EtcdStatus s;
    s.member_id = j.at("header").at("member_id").get<std::string>();
    s.leader = j.value("leader", std::string());
    s.revision = JsonNumber(j.at("header"), "revision");
    return s;
  } catch (const std::exception& e) {
    return Fail(std::string("etcd's status answer is not what etcd 3.4 sends: ") + e.what());
  }
}

Status SnapshotStream::Feed(std::string_view bytes) {
  pending_.append(bytes);
  std::size_t start = 0;
  for (std::size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1) {
    if (auto s = Line(std::string_view(pending_).substr(start, nl - start)); !s) return s;
  }
  pending_.erase(0, start);
  return Ok{};
}

Status SnapshotStream::Line(std::string_view line) {
  if (line.find_first_not_of(" \r\t") == std::string_view::npos) return Ok{};
  try {
    auto j = nlohmann::json::parse(line);
    if (j.contains("error")) {
      const auto& e = j.at("error");
      return Fail("etcd stopped the snapshot: " + (e.is_object() ? e.value("message", e.dump()) : e.dump()));
    }
    const auto& r = j.at("result");
    if (!r.contains("blob")) return Ok{};
    auto chunk = Base64Decode(r.at("blob").get<std::string>());
    if (!chunk) return Fail(chunk.error());
    data_ += *chunk;
    return Ok{};
  } catch (const std::exception& e) {
    return Fail(std::string("etcd's snapshot stream is not what etcd 3.4 sends: ") + e.what());
  }
}

Result<std::string> SnapshotStream::Finish() {
  if (!pending_.empty()) {
    if (auto s = Line(pending_); !s) return Fail(s.error());
    pending_.clear();
  }
  if (auto s = CheckEtcdHash(data_); !s) return Fail(s.error());
  return std::move(data_);
}

Result<SnapshotStatus> ParseSnapshotStatus(std::string_view json) {
  try {
    auto j = nlohmann::json::parse(json);
    SnapshotStatus s;
    s.hash = JsonNumber(j, "hash");
    s.revision = JsonNumber(j, "revision");
    s.keys = JsonNumber(j, "totalKey");
    s.size = JsonNumber(j, "totalSize");
    return s;
  } catch (const std::exception& e) {
    return Fail(std::string("etcdctl snapshot status printed no JSON: ") + e.what());
  }
}

Result<EtcdStatus> GetEtcdStatus(const std::string& client_url, const formation::EtcdClientTls& tls) {
  Curl c;
  if (c.h == nullptr) return Fail("cannot initialize libcurl");
  std::string response;
  std::string url = client_url + "/v3/maintenance/status";
  Prepare(c, url, "{}", tls, 10000L);
  curl_easy_setopt(c.h, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(c.h, CURLOPT_WRITEDATA, &response);
  CURLcode rc = curl_easy_perform(c.h);
  long status = 0;
  curl_easy_getinfo(c.h, CURLINFO_RESPONSE_CODE, &status);
  if (rc != CURLE_OK) return Fail(url + ": " + curl_easy_strerror(rc));
  if (status != 200) return Fail(url + ": HTTP " + std::to_string(status) + ": " + response);
  return ParseEtcdStatus(response);
}

Result<std::string> FetchSnapshot(const std::string& client_url, const formation::EtcdClientTls& tls) {
  Curl c;
  if (c.h == nullptr) return Fail("cannot initialize libcurl");
  std::string url = client_url + "/v3/maintenance/snapshot";
  StreamState state;
  state.h = c.h;
  Prepare(c, url, "{}", tls, 600000L);
  curl_easy_setopt(c.h, CURLOPT_WRITEFUNCTION, FeedStream);
  curl_easy_setopt(c.h, CURLOPT_WRITEDATA, &state);
  CURLcode rc = curl_easy_perform(c.h);
  if (state.status != 0 && state.status != 200)
    return Fail(url + ": HTTP " + std::to_string(state.status) + ": " + state.error);
  if (!state.error.empty()) return Fail(url + ": " + state.error);
  if (rc != CURLE_OK) return Fail(url + ": " + curl_easy_strerror(rc));
  auto data = state.stream.Finish();
  if (!data) return Fail(url + ": " + data.error());
  return data;
}

namespace {
constexpr uint64_t kMiB = uint64_t{1024} * 1024;
}  // namespace

uint64_t RestoreSpaceNeeded(uint64_t snapshot_size) {
  return snapshot_size + 72 * kMiB;  // etcd's 64 MiB write-ahead log segment and 8 MiB of slack
}

std::string RestoreSpaceProblem(uint64_t snapshot_size, uint64_t free_bytes, const std::string& folder) {
  uint64_t needed = RestoreSpaceNeeded(snapshot_size);
  if (free_bytes >= needed) return "";
  auto mib = [](uint64_t b) { return std::to_string((b + kMiB - 1) / kMiB); };
  return "restoring the " + mib(snapshot_size) + " MiB snapshot needs about " + mib(needed) + " MiB free in " + folder +
         " (the database and etcd's 64 MiB write-ahead log), and it has " + std::to_string(free_bytes / kMiB) +
         " MiB: free space there, or give the node a larger disk (the state partition grows to the end of the "
         "disk at first boot) or the profile a larger disk.stateSize";
}

// SnapshotTool is the program for `snapshot restore` and `snapshot status`: etcdutl
// beside etcdctl (in its folder, or on PATH for a bare "etcdctl") when there is one,
// since etcd 3.6 moved both commands there (3.5 deprecated them in etcdctl); else
// etcdctl itself (etcd 3.4, which has no etcdutl). The flags are the same.
std::string SnapshotTool(const std::string& etcdctl) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path given(etcdctl);
  if (given.filename() != "etcdctl") return etcdctl;
  std::vector<fs::path> dirs;
  if (given.has_parent_path()) {
    dirs.push_back(given.parent_path());
  } else if (const char* path = std::getenv("PATH")) {
    for (const auto& d : Split(path, ':')) {
      if (!d.empty()) dirs.emplace_back(d);
    }
  }
  for (const auto& d : dirs) {
    const fs::path utl = d / "etcdutl";
    if (fs::is_regular_file(utl, ec) && ::access(utl.c_str(), X_OK) == 0) return utl.string();
  }
  return etcdctl;
}

Status RestoreSnapshot(const RestoreArgs& a) {
  // Either call failing leaves the check to etcdctl.
  std::error_code space_ec, size_ec;
  auto folder = a.data_dir.parent_path();
  auto space = std::filesystem::space(folder, space_ec);
  auto size = std::filesystem::file_size(a.snapshot, size_ec);
  if (!space_ec && !size_ec) {
    if (auto problem = RestoreSpaceProblem(size, space.available, folder.string()); !problem.empty()) {
      return Fail(problem);
    }
  }
  Command cmd;
  cmd.argv = {SnapshotTool(a.etcdctl),
              "snapshot",
              "restore",
              a.snapshot.string(),
              "--data-dir",
              a.data_dir.string(),
              "--name",
              a.name,
              "--initial-cluster",
              a.initial_cluster,
              "--initial-cluster-token",
              a.token,
              "--initial-advertise-peer-urls",
              a.peer_url};
  cmd.env["ETCDCTL_API"] = "3";
  auto r = RunChecked(cmd);
  if (!r) return Fail("etcdctl snapshot restore of " + a.snapshot.string() + " failed: " + r.error());
  return Ok{};
}

Result<SnapshotStatus> StatusOfSnapshot(const std::string& etcdctl, const std::filesystem::path& file) {
  Command cmd;
  cmd.argv = {SnapshotTool(etcdctl), "snapshot", "status", file.string(), "-w", "json"};
  cmd.env["ETCDCTL_API"] = "3";
  auto r = RunChecked(cmd);
  if (!r) return Fail("etcdctl snapshot status of " + file.string() + " failed: " + r.error());
  // etcdctl may log before the JSON; the JSON is the last line.
  std::string out = *r;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  auto nl = out.rfind('\n');
  return ParseSnapshotStatus(nl == std::string::npos ? out : out.substr(nl + 1));
}

Result<SnapshotStatus> TestRestore(const std::string& etcdctl, const std::filesystem::path& snapshot,
                                   const std::filesystem::path& scratch) {
  auto before = StatusOfSnapshot(etcdctl, snapshot);
  if (!before) return before;
  std::error_code ec;
  std::filesystem::create_directories(scratch, ec);
  TempDir dir(scratch, "test-restore");
  RestoreArgs a;
  a.etcdctl = etcdctl;
  a.snapshot = snapshot;
  a.data_dir = dir.path() / "data";
  a.name = "test-restore";
  // Loopback URLs: the restored member is never started, only read.
  a.peer_url = "https://127.0.0.1:2380";
  a.initial_cluster = a.name + "=" + a.peer_url;
  a.token = "sprout-test-restore";
  if (auto s = RestoreSnapshot(a); !s) return Fail("test restore: " + s.error());
  auto after = StatusOfSnapshot(etcdctl, a.data_dir / "member" / "snap" / "db");
  if (!after) return Fail("test restore: " + after.error());
  if (auto problem = RestoredProblem(*before, *after); !problem.empty()) return Fail("test restore: " + problem);
  return before;
}

std::string RestoredProblem(const SnapshotStatus& snapshot, const SnapshotStatus& restored) {
  if (restored.revision == snapshot.revision) return "";
  return "the restored database is at revision " + std::to_string(restored.revision) + ", the snapshot at " +
         std::to_string(snapshot.revision) + ": etcdctl did not restore the snapshot's data";
}

}  // namespace sprout::backup
