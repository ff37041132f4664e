#include "kube/api.h"

#include <curl/curl.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>

#include "util/fs.h"
#include "util/text.h"

namespace sprout::kube {

namespace {

// Entry is the first element of a kubeconfig list ("clusters", "users"): its name and
// the map under inner ("cluster", "user"). where ("clusters[0] (NAME)") goes into errors.
struct Entry {
  std::string name;
  std::string where;
  YAML::Node map;
};

Result<Entry> First(const YAML::Node& root, const char* list, const char* inner) {
  const YAML::Node seq = root[list];
  if (!seq || !seq.IsSequence() || seq.size() == 0) return Fail(std::string("the kubeconfig has no ") + list);
  const YAML::Node first = seq[0];
  Entry e;
  e.where = std::string(list) + "[0]";
  if (!first.IsMap()) return Fail("the kubeconfig's " + e.where + " is not a mapping");
  if (first["name"] && first["name"].IsScalar()) e.name = first["name"].Scalar();
  if (!e.name.empty()) e.where += " (" + e.name + ")";
  e.map = first[inner];
  if (!e.map || !e.map.IsMap()) return Fail("the kubeconfig's " + e.where + " has no " + inner + " mapping");
  return e;
}

// Scalar is e.map[key] as text; absent or null is "".
Result<std::string> Scalar(const Entry& e, const char* key) {
  const YAML::Node v = e.map[key];
  if (!v || v.IsNull()) return std::string();
  if (!v.IsScalar()) return Fail("the kubeconfig's " + e.where + ": " + key + " is not a string");
  return v.Scalar();
}

// Decoded is a …-data field: base64, which may be wrapped over lines.
Result<std::string> Decoded(const Entry& e, const char* key, const std::string& text) {
  std::string compact;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) == 0) compact += c;
  }
  auto bytes = Base64Decode(compact);
  if (!bytes) return Fail("the kubeconfig's " + e.where + ": " + key + " is not base64");
  return *bytes;
}

// PemBlocks keeps the PEM blocks of text whose label is CERTIFICATE (or, with keys,
// ends in PRIVATE KEY), so a file holding both yields a clean certificate and key.
std::string PemBlocks(const std::string& text, bool keys) {
  std::string out;
  std::size_t at = 0;
  while ((at = text.find("-----BEGIN ", at)) != std::string::npos) {
    const std::size_t label_end = text.find("-----", at + 11);
    if (label_end == std::string::npos) break;
    const std::string label = text.substr(at + 11, label_end - at - 11);
    const std::string end_line = "-----END " + label + "-----";
    const std::size_t end = text.find(end_line, label_end);
    if (end == std::string::npos) break;
    const bool wanted = keys ? label.ends_with("PRIVATE KEY") : label == "CERTIFICATE";
    if (wanted) out += text.substr(at, end + end_line.size() - at) + "\n";
    at = end + end_line.size();
  }
  return out;
}

// PemFile reads the PEM blocks of one kind from the file a kubeconfig field names.
Result<std::string> PemFile(const Entry& e, const char* key, const std::string& path, bool keys) {
  const std::string where = "the kubeconfig's " + e.where + ": " + key + " " + path;
  // Relative paths are relative to the kubeconfig's folder, which a string has not got.
  if (!std::filesystem::path(path).is_absolute()) return Fail(where + " is not an absolute path");
  auto text = ReadFile(path);
  if (!text) return Fail(where + ": " + text.error());
  std::string pem = PemBlocks(*text, keys);
  if (pem.empty()) return Fail(where + " holds no " + (keys ? "PEM private key" : "PEM CERTIFICATE"));
  return pem;
}

// Credential is one of the data/file pairs: key-data inline, or key naming a file.
Result<std::string> Credential(const Entry& e, const std::string& key, bool keys) {
  const std::string data_key = key + "-data";
  auto data = Scalar(e, data_key.c_str());
  if (!data) return Fail(data.error());
  if (!data->empty()) return Decoded(e, data_key.c_str(), *data);
  auto file = Scalar(e, key.c_str());
  if (!file) return Fail(file.error());
  if (file->empty()) return std::string();
  return PemFile(e, key.c_str(), *file, keys);
}

}  // namespace

Result<Kubeconfig> ParseKubeconfig(const std::string& yaml) {
  try {
    const YAML::Node root = YAML::Load(yaml);
    if (!root.IsMap()) return Fail("the kubeconfig is not a YAML mapping");
    Kubeconfig k;

    auto cluster = First(root, "clusters", "cluster");
    if (!cluster) return Fail(cluster.error());
    k.cluster_name = cluster->name;
    auto server = Scalar(*cluster, "server");
    if (!server) return Fail(server.error());
    if (!server->starts_with("https://")) {
      return Fail("the kubeconfig's " + cluster->where + ": server '" + *server + "' is not an https:// URL");
    }
    k.server = *server;
    auto ca = Credential(*cluster, "certificate-authority", false);
    if (!ca) return Fail(ca.error());
    if (ca->empty()) {
      return Fail("the kubeconfig's " + cluster->where +
                  " has neither certificate-authority-data nor certificate-authority; without the cluster CA the "
                  "server cannot be verified");
    }
    k.ca_pem = *ca;

    auto user = First(root, "users", "user");
    if (!user) return Fail(user.error());
    k.user = user->name;
    for (const char* unsupported : {"exec", "auth-provider", "tokenFile", "username"}) {
      if (user->map[unsupported])
        return Fail("the kubeconfig's " + user->where + " uses " + unsupported +
                    ", which sprout does not support; use a client certificate or a token");
    }
    auto cert = Credential(*user, "client-certificate", false);
    if (!cert) return Fail(cert.error());
    auto key = Credential(*user, "client-key", true);
    if (!key) return Fail(key.error());
    auto token = Scalar(*user, "token");
    if (!token) return Fail(token.error());
    if (cert->empty() != key->empty()) {
      return Fail("the kubeconfig's " + user->where + " has a client " + (cert->empty() ? "key" : "certificate") +
                  " but no client " + (cert->empty() ? "certificate" : "key"));
    }
    if (cert->empty() && token->empty()) {
      return Fail("the kubeconfig's " + user->where + " has neither a client certificate nor a token");
    }
    k.cert_pem = *cert;
    k.key_pem = *key;
    k.token = *token;
    return k;
  } catch (const YAML::Exception& e) {
    // Parse errors, and subscripts into a scalar where a mapping was expected.
    return Fail("the kubeconfig is not valid: line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

std::string ConnectProblem(const std::string& server, int os_errno) {
  std::string why;
  switch (os_errno) {
    case ECONNREFUSED:
      why = "connection refused (nothing listens there: its apiserver is not running, or still starting)";
      break;
    case EHOSTUNREACH:
    case ENETUNREACH:
      why = "no route to it (" + std::string(std::strerror(os_errno)) + "; is the node's link up?)";
      break;
    case 0:
      why = "no connection";
      break;
    default:
      why = std::strerror(os_errno);
  }
  return "cannot connect to " + server + ": " + why;
}

namespace {

struct CurlCleanup {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistFree {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

std::size_t Append(char* data, std::size_t size, std::size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

// Blob hands a PEM to libcurl, which copies it (CURL_BLOB_COPY) before the call returns.
curl_blob Blob(const std::string& pem) {
  return curl_blob{const_cast<char*>(pem.data()), pem.size(), CURL_BLOB_COPY};  // NOLINT(*-const-cast)
}

}  // namespace

namespace {

// Transfer is what one call hands libcurl besides the request: where the body goes and
// a check, called about once a second, that may end the transfer.
struct Transfer {
  curl_write_callback write = nullptr;
  void* write_data = nullptr;
  const std::function<bool()>* keep_going = nullptr;
};

int Progress(void* data, curl_off_t /*dltotal*/, curl_off_t /*dlnow*/, curl_off_t /*ultotal*/, curl_off_t /*ulnow*/) {
  const auto* keep_going = static_cast<const std::function<bool()>*>(data);
  return (*keep_going)() ? 0 : 1;
}

// Call sends method k.server+path with k's credentials and returns the HTTP status.
Result<long> Call(const Kubeconfig& k, const std::string& method, const std::string& path, const std::string& body,
                  const std::string& content_type, int timeout_seconds, const Transfer& t) {
  std::string server = k.server;
  while (server.ends_with('/')) server.pop_back();
  const std::string url = server + path;
  // Without the cluster CA, curl would fall back to the public web PKI and might hand
  // the node's credentials to whoever holds a public certificate for the address.
  if (k.ca_pem.empty()) return Fail("cannot call " + url + ": the kubeconfig has no cluster CA to verify it with");

  std::unique_ptr<CURL, CurlCleanup> curl(curl_easy_init());
  if (!curl) return Fail("libcurl failed to start");
  CURL* c = curl.get();
  char err[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, t.write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, t.write_data);
  if (t.keep_going != nullptr) {
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, Progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, t.keep_going);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  }
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // timeouts without SIGALRM, safe in threads
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
  // 0 would mean no limit at all to libcurl; a caller on a boot path never wants that.
  curl_easy_setopt(c, CURLOPT_TIMEOUT, static_cast<long>(std::max(timeout_seconds, 1)));

  curl_blob ca = Blob(k.ca_pem);
  curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca);
  curl_easy_setopt(c, CURLOPT_CAPATH, nullptr);  // the cluster CA only, not the system's
  curl_blob cert = Blob(k.cert_pem);
  curl_blob key = Blob(k.key_pem);
  if (k.token.empty() && !k.cert_pem.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
  }

  std::unique_ptr<curl_slist, SlistFree> headers;
  bool out_of_memory = false;
  auto add = [&](const std::string& h) {
    curl_slist* list = curl_slist_append(headers.get(), h.c_str());  // the same head once there is one
    if (list == nullptr) {
      out_of_memory = true;
      return;
    }
    (void)headers.release();
    headers.reset(list);
  };
  add("Accept: application/json");
  add("Expect:");  // no 100-continue round trip before a large body
  if (!k.token.empty()) add("Authorization: Bearer " + k.token);

  if (method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (method != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
    add("Content-Type: " + content_type);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
  }
  if (out_of_memory) return Fail("cannot call " + url + ": out of memory for the request headers");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());

  const CURLcode code = curl_easy_perform(c);
  if (code == CURLE_COULDNT_CONNECT) {
    long os_errno = 0;
    curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &os_errno);
    return Fail(ConnectProblem(server, static_cast<int>(os_errno)));
  }
  if (code != CURLE_OK) {
    return Fail(method + " " + url + " failed: " + (err[0] != 0 ? std::string(err) : curl_easy_strerror(code)));
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

// Lines hands each complete line of a stream to its callback; a false answer (or a
// line past the limit) ends the transfer.
struct Lines {
  const std::function<bool(const std::string&)>* on_line;
  std::string pending;
  bool stopped = false;
};

std::size_t SplitLines(char* data, std::size_t size, std::size_t count, void* user) {
  auto* l = static_cast<Lines*>(user);
  l->pending.append(data, size * count);
  std::size_t start = 0;
  for (std::size_t nl; (nl = l->pending.find('\n', start)) != std::string::npos; start = nl + 1) {
    if (!(*l->on_line)(l->pending.substr(start, nl - start))) {
      l->stopped = true;
      return 0;  // ends the transfer
    }
  }
  l->pending.erase(0, start);
  // One watch event is one object; 64 MiB without a newline is no event.
  if (l->pending.size() > (64U << 20)) {
    l->stopped = true;
    return 0;
  }
  return size * count;
}

}  // namespace

Result<ApiResponse> ApiRequest(const Kubeconfig& k, const std::string& method, const std::string& path,
                               const std::string& body, const std::string& content_type, int timeout_seconds) {
  ApiResponse response;
  auto status = Call(k, method, path, body, content_type, timeout_seconds, {Append, &response.body, nullptr});
  if (!status) return Fail(status.error());
  response.status = *status;
  return response;
}

Result<long> ApiStream(const Kubeconfig& k, const std::string& path,
                       const std::function<bool(const std::string& line)>& on_line,
                       const std::function<bool()>& keep_going, int timeout_seconds) {
  Lines lines{&on_line, {}, false};
  auto status = Call(k, "GET", path, "", "application/json", timeout_seconds, {SplitLines, &lines, &keep_going});
  if (lines.stopped || !keep_going()) return 0L;  // ended by the caller: not a failure
  return status;
}

}  // namespace sprout::kube
