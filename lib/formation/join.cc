#include "formation/join.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "formation/daemon.h"
#include "util/fs.h"

namespace sprout::formation {

namespace {

constexpr std::string_view kPskLabel = "sprout join psk v1";
constexpr const char* kPskIdentity = "sprout-join-v1";
constexpr const char* kWorkerPskIdentity = "sprout-join-worker-v1";
constexpr std::size_t kMaxResponse = 1 << 20;

bool ValidName(const std::string& n) {
  if (n.empty() || n.size() > 63) return false;
  for (char c : n) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
    if (!ok) return false;
  }
  return true;
}

bool ValidAddress(const std::string& a) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, a.c_str(), buf) == 1 || ::inet_pton(AF_INET6, a.c_str(), buf) == 1;
}

// CA file names a control-plane response carries, as in pki::CAFiles.
const char* const kCaFiles[] = {
    "ca.crt", "ca.key", "etcd/ca.crt", "etcd/ca.key", "front-proxy-ca.crt", "front-proxy-ca.key", "sa.key", "sa.pub"};

}  // namespace

const char* JoinAuthorityName(JoinAuthority authority) {
  return authority == JoinAuthority::kControlPlane ? "control-plane" : "worker";
}

std::string RenderJoinRequest(const JoinRequest& r) {
  nlohmann::json j{{"version", r.version},
                   {"role", r.control_plane ? "control-plane" : "worker"},
                   {"name", r.name},
                   {"address", r.address}};
  if (r.copy) j["copy"] = {{"bundle", r.copy->bundle}, {"size", r.copy->size}};
  return j.dump() + "\n";
}

bool ValidBundleFileName(std::string_view n) {
  constexpr std::string_view kSuffix = ".sprout-backup";
  if (n.size() <= kSuffix.size() || n.size() > 200 || n.front() == '.' || !n.ends_with(kSuffix)) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_';
  });
}

Status MayStoreCopy(const JoinRequest& request, JoinAuthority authority, bool keeps_copies) {
  if (!request.copy) return Fail("not a backup copy");
  if (authority != JoinAuthority::kControlPlane) {
    return Fail("a backup copy is taken only from a control-plane node (this sender proved the worker key)");
  }
  if (!keeps_copies) return Fail("this node keeps no backup copies");
  return Ok{};
}

Result<JoinRequest> ParseJoinRequest(std::string_view text) {
  if (text.size() > kMaxJoinRequest) {
    return Fail("join request of " + std::to_string(text.size()) + " bytes is over the limit of " +
                std::to_string(kMaxJoinRequest));
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Fail("join request is not a JSON object");
  JoinRequest r;
  auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer() || version->get<long long>() != kJoinVersion) {
    return Fail("join request has no \"version\": " + std::to_string(kJoinVersion) + "; update the joining node");
  }
  auto field = [&](const char* key) -> std::string {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::string role = field("role");
  if (role != "control-plane" && role != "worker") {
    return Fail("join request \"role\" must be \"control-plane\" or \"worker\", not \"" + role.substr(0, 32) + "\"");
  }
  r.control_plane = role == "control-plane";
  r.name = field("name");
  if (!ValidName(r.name)) return Fail("join request \"name\" must be 1-63 characters of [A-Za-z0-9._-]");
  r.address = field("address");
  if (!ValidAddress(r.address)) return Fail("join request \"address\" must be an IPv4 or IPv6 address");
  if (auto copy = j.find("copy"); copy != j.end()) {
    if (!copy->is_object()) return Fail("join request \"copy\" must be an object");
    auto bundle = copy->find("bundle");
    auto size = copy->find("size");
    BackupCopyOffer offer;
    if (bundle == copy->end() || !bundle->is_string() || !ValidBundleFileName(bundle->get<std::string>())) {
      return Fail("backup copy \"bundle\" must be a bundle's file name (NAME.sprout-backup, [A-Za-z0-9._-])");
    }
    offer.bundle = bundle->get<std::string>();
    if (size == copy->end() || !size->is_number_unsigned() || size->get<std::uint64_t>() == 0 ||
        size->get<std::uint64_t>() > kMaxBackupCopy) {
      return Fail("backup copy \"size\" must be 1 to " + std::to_string(kMaxBackupCopy) + " bytes");
    }
    offer.size = size->get<std::uint64_t>();
    if (!r.control_plane) return Fail("a backup copy comes from a control-plane node (role control-plane)");
    r.copy = offer;
  }
  return r;
}

JoinResponse AnswerJoin(const JoinRequest& request, JoinAuthority authority, const Credentials& served,
                        std::int64_t now) {
  JoinResponse out;
  if (request.control_plane && authority != JoinAuthority::kControlPlane) {
    out.error =
        "control-plane credentials need the cluster secret, and this joiner proved only the worker secret; a worker "
        "joins with role worker";
    return out;
  }
  // A control-plane joiner gets the base token (it makes the worker tokens' Secrets
  // itself); a worker only the worker token of this window, which expires.
  std::string token = served.bootstrap_token;
  if (!request.control_plane) {
    auto worker = WorkerToken(served.bootstrap_token, WorkerTokenWindow(now));
    if (!worker) {
      out.error = "this node cannot derive the worker token: " + worker.error();
      return out;
    }
    token = *worker;
  }
  out.ok = true;
  out.control_plane = request.control_plane;
  out.bootstrap_token = token;
  out.api_endpoints = served.api_endpoints;
  if (request.control_plane) {
    for (const auto& f : pki::CAFiles(served.cas)) out.ca[f.path] = f.content;
  } else {
    out.ca_bundle = served.cas.kubernetes_ca.cert_pem;
  }
  return out;
}

std::string RenderJoinResponse(const JoinResponse& r) {
  nlohmann::json j{{"ok", r.ok}};
  if (!r.ok) {
    j["error"] = r.error;
    return j.dump();
  }
  j["role"] = r.control_plane ? "control-plane" : "worker";
  j["bootstrap_token"] = r.bootstrap_token;
  j["api_endpoints"] = r.api_endpoints;
  if (r.control_plane) {
    j["ca"] = r.ca;
  } else {
    j["ca_bundle"] = r.ca_bundle;
  }
  return j.dump();
}

Result<JoinResponse> ParseJoinResponse(std::string_view text) {
  try {
    auto j = nlohmann::json::parse(text);
    JoinResponse r;
    r.ok = j.at("ok").get<bool>();
    if (!r.ok) {
      r.error = j.value("error", "no reason given");
      return r;
    }
    r.control_plane = j.at("role").get<std::string>() == "control-plane";
    r.bootstrap_token = j.at("bootstrap_token").get<std::string>();
    r.api_endpoints = j.at("api_endpoints").get<std::vector<std::string>>();
    if (r.control_plane) {
      r.ca = j.at("ca").get<std::map<std::string, std::string>>();
    } else {
      r.ca_bundle = j.at("ca_bundle").get<std::string>();
    }
    if (!ValidBootstrapToken(r.bootstrap_token)) return Fail("the join response carries a malformed bootstrap token");
    return r;
  } catch (const std::exception& e) {
    return Fail(std::string("the join response is not what this version expects: ") + e.what());
  }
}

Result<Credentials> CredentialsFrom(const JoinResponse& r) {
  if (!r.ok || !r.control_plane) return Fail("the join response carries no control-plane credentials");
  for (const char* name : kCaFiles) {
    if (r.ca.count(name) == 0) return Fail(std::string("the join response lacks ") + name);
  }
  Credentials c;
  c.cas.kubernetes_ca = {r.ca.at("ca.crt"), r.ca.at("ca.key")};
  c.cas.etcd_ca = {r.ca.at("etcd/ca.crt"), r.ca.at("etcd/ca.key")};
  c.cas.front_proxy_ca = {r.ca.at("front-proxy-ca.crt"), r.ca.at("front-proxy-ca.key")};
  c.cas.service_account = {r.ca.at("sa.key"), r.ca.at("sa.pub")};
  // The encryption key comes with the CAs, from a founder that made one; a cluster
  // founded before sprout made one has none (docs/control-plane.md).
  if (auto key = r.ca.find(pki::kEncryptionKeyFile); key != r.ca.end()) {
    std::string k = key->second;
    while (!k.empty() && (k.back() == '\n' || k.back() == '\r')) k.pop_back();
    if (!pki::ValidEncryptionKey(k)) return Fail("the encryption key in the join response is not base64 of 32 bytes");
    c.cas.encryption_key = k;
  }
  for (const auto* ck : {&c.cas.kubernetes_ca, &c.cas.etcd_ca, &c.cas.front_proxy_ca}) {
    if (!pki::KeyMatches(ck->cert_pem, ck->key_pem)) return Fail("a CA key in the join response does not match");
  }
  c.bootstrap_token = r.bootstrap_token;
  c.api_endpoints = r.api_endpoints;
  return c;
}

Result<std::string> MakeBootstrapToken() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char raw[22];
  if (RAND_bytes(raw, sizeof raw) != 1) return Fail("no randomness for the bootstrap token");
  std::string out;
  for (std::size_t i = 0; i < sizeof raw; ++i) {
    if (i == 6) out += '.';
    out += kAlphabet[raw[i] % 36];  // a slight bias of 256 % 36; the token has 113 bits
  }
  return out;
}

bool ValidBootstrapToken(std::string_view t) {
  if (t.size() != 23 || t[6] != '.') return false;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (i == 6) continue;
    char c = t[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

std::int64_t WorkerTokenWindow(std::int64_t unix_seconds) {
  // Floor division: a clock before 1970 still gives a consistent window.
  std::int64_t w = unix_seconds / kWorkerTokenWindowSeconds;
  if (unix_seconds % kWorkerTokenWindowSeconds < 0) --w;
  return w;
}

std::int64_t WorkerTokenExpiry(std::int64_t window) { return (window + 2) * kWorkerTokenWindowSeconds; }

Result<std::string> WorkerToken(const std::string& base, std::int64_t window) {
  if (!ValidBootstrapToken(base)) return Fail("the bootstrap token is not of the form [a-z0-9]{6}.[a-z0-9]{16}");
  const std::string label = "sprout worker bootstrap token v1 " + std::to_string(window);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), base.data(), static_cast<int>(base.size()),
           reinterpret_cast<const unsigned char*>(label.data()), label.size(), mac, &len) == nullptr ||
      len < 22)
    return Fail("HMAC-SHA256 failed while deriving the worker token");
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string out;
  for (unsigned int i = 0; i < 22; ++i) {
    if (i == 6) out += '.';
    out += kAlphabet[mac[i] % 36];  // a slight bias of 256 % 36, as MakeBootstrapToken
  }
  OPENSSL_cleanse(mac, sizeof mac);
  return out;
}

Key JoinPsk(const Key& formation_key) {
  std::span<const std::uint8_t> label(reinterpret_cast<const std::uint8_t*>(kPskLabel.data()), kPskLabel.size());
  Mac m = ComputeMac(formation_key, label);
  Key out{};
  std::copy(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(out.size()), out.begin());
  return out;
}

namespace {

// StoreCopy runs the backup-copy store on a connection's thread, where an exception
// would end the daemon (std::terminate): one becomes the refusal the sender is told.
Status StoreCopy(const BackupCopyStore& store, const BackupCopy& copy) {
  try {
    return store(copy);
  } catch (const std::exception& e) {
    return Fail(std::string("the store failed: ") + e.what());
  } catch (...) {
    return Fail("the store failed");
  }
}

std::string SslErrors() {
  std::string out;
  unsigned long e = 0;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out.empty() ? std::string("connection closed") : out;
}

// PskSession makes the TLS 1.3 session that carries the external PSK.
SSL_SESSION* PskSession(SSL* ssl, const Key& psk) {
  static const unsigned char kAes128GcmSha256[] = {0x13, 0x01};
  const SSL_CIPHER* cipher = SSL_CIPHER_find(ssl, kAes128GcmSha256);
  SSL_SESSION* s = SSL_SESSION_new();
  if (cipher == nullptr || s == nullptr || SSL_SESSION_set1_master_key(s, psk.data(), psk.size()) != 1 ||
      SSL_SESSION_set_cipher(s, cipher) != 1 || SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION) != 1) {
    SSL_SESSION_free(s);
    return nullptr;
  }
  return s;
}

const char* IdentityOf(JoinAuthority authority) {
  return authority == JoinAuthority::kControlPlane ? kPskIdentity : kWorkerPskIdentity;
}

int UsePsk(SSL* ssl, const EVP_MD* md, const unsigned char** id, std::size_t* idlen, SSL_SESSION** sess) {
  const auto* key = static_cast<const JoinKey*>(SSL_get_app_data(ssl));
  if (md != nullptr && md != EVP_sha256()) {
    *sess = nullptr;
    return 1;
  }
  *sess = PskSession(ssl, key->psk);
  const char* identity = IdentityOf(key->authority);
  *id = reinterpret_cast<const unsigned char*>(identity);
  *idlen = std::strlen(identity);
  return *sess != nullptr ? 1 : 0;
}

// ServerPsk is what one server connection's PSK callback reads (both keys) and writes
// (which identity it handed a session for).
struct ServerPsk {
  const JoinKeys* keys = nullptr;
  std::optional<JoinAuthority> chosen;
};

int FindPsk(SSL* ssl, const unsigned char* identity, std::size_t len, SSL_SESSION** sess) {
  auto* server = static_cast<ServerPsk*>(SSL_get_app_data(ssl));
  std::string_view id(reinterpret_cast<const char*>(identity), len);
  *sess = nullptr;  // an unknown identity: the handshake fails (no certificate to fall back to)
  if (id == kPskIdentity) {
    server->chosen = JoinAuthority::kControlPlane;
    *sess = PskSession(ssl, server->keys->control_plane);
  } else if (id == kWorkerPskIdentity) {
    server->chosen = JoinAuthority::kWorker;
    *sess = PskSession(ssl, server->keys->worker);
  } else {
    return 1;
  }
  // OpenSSL stops at the first identity it gets a usable session for and checks that
  // one's binder (a failed binder fails the handshake), so the last identity chosen
  // here is the PSK the handshake used.
  return *sess != nullptr ? 1 : 0;
}

using Ctx = std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)>;
using Ssl = std::unique_ptr<SSL, decltype(&SSL_free)>;

Ctx NewCtx(bool server) {
  Ctx ctx(SSL_CTX_new(server ? TLS_server_method() : TLS_client_method()), SSL_CTX_free);
  if (!ctx) return ctx;
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx.get(), TLS1_3_VERSION);
  SSL_CTX_set_ciphersuites(ctx.get(), "TLS_AES_128_GCM_SHA256");
  // Only the PSK authenticates: a certificate, which a fake server could send, is
  // never accepted (no trust anchors), and a ticket is never issued or used.
  SSL_CTX_set_num_tickets(ctx.get(), 0);
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  if (server) {
    static const unsigned char kContext[] = "sprout-join";
    SSL_CTX_set_session_id_context(ctx.get(), kContext, sizeof kContext - 1);
    SSL_CTX_set_psk_find_session_callback(ctx.get(), FindPsk);
  } else {
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    SSL_CTX_set_psk_use_session_callback(ctx.get(), UsePsk);
  }
  return ctx;
}

void SetTimeouts(int fd, int ms) {
  timeval tv{ms / 1000, static_cast<suseconds_t>(ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// ReadAll reads until EOF or limit; false when the peer misbehaved.
bool ReadUntil(SSL* ssl, std::string& out, std::size_t limit, bool line) {
  char buf[4096];
  for (;;) {
    int n = SSL_read(ssl, buf, sizeof buf);
    if (n <= 0) return SSL_get_error(ssl, n) == SSL_ERROR_ZERO_RETURN || !line;
    out.append(buf, static_cast<std::size_t>(n));
    // A line may be followed by more (a backup copy's bytes): the limit is the line's.
    if (line) {
      if (auto nl = out.find('\n'); nl != std::string::npos) return nl <= limit;
    }
    if (out.size() > limit) return false;
  }
}

bool WriteAll(SSL* ssl, std::string_view data) {
  std::size_t done = 0;
  while (done < data.size()) {
    int n = SSL_write(ssl, data.data() + done, static_cast<int>(std::min<std::size_t>(data.size() - done, 1 << 14)));
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// ReadExactly appends to out until it holds want bytes; false on EOF or an error first.
bool ReadExactly(SSL* ssl, std::string& out, std::uint64_t want) {
  char buf[1 << 14];
  while (out.size() < want) {
    const auto room = static_cast<int>(std::min<std::uint64_t>(sizeof buf, want - out.size()));
    int n = SSL_read(ssl, buf, room);
    if (n <= 0) return false;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return true;
}

std::int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// SockAddr fills a sockaddr for address:port (IPv4 or IPv6); false if it is neither.
bool SockAddr(const std::string& address, std::uint16_t port, sockaddr_storage& ss, socklen_t& len) {
  std::memset(&ss, 0, sizeof ss);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (::inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    len = sizeof *v4;
    return true;
  }
  if (::inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    len = sizeof *v6;
    return true;
  }
  return false;
}

std::string PeerText(const sockaddr_storage& ss) {
  char text[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, text, sizeof text);
  } else if (ss.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, text, sizeof text);
  }
  return text;
}

}  // namespace

Status JoinServer::Start(const std::string& address, std::uint16_t port, const JoinKeys& keys) {
  if (running()) return Ok{};
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (!SockAddr(address, port, ss, len)) return Fail("join endpoint: '" + address + "' is not an IP address");
  int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Fail(std::string("join endpoint: socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(fd, 16) != 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    return Fail("join endpoint: cannot listen on " + address + ":" + std::to_string(port) + ": " + why);
  }
  listen_fd_ = fd;
  sockaddr_storage bound{};
  socklen_t blen = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &blen);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  keys_ = keys;
  stop_ = false;
  thread_ = std::thread([this] { Serve(); });
  return Ok{};
}

void JoinServer::SetCredentials(const Credentials& credentials) {
  auto c = std::make_shared<const Credentials>(credentials);
  std::lock_guard<std::mutex> lock(mu_);
  credentials_ = std::move(c);
}

void JoinServer::SetBackupStore(BackupCopyStore store) {
  auto st = store ? std::make_shared<const BackupCopyStore>(std::move(store)) : nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  store_ = std::move(st);
}

JoinServer::~JoinServer() { Stop(); }

void JoinServer::Stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  thread_.join();
  ::close(listen_fd_);
  listen_fd_ = -1;
}

void JoinServer::Serve() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    int ready = ::poll(&p, 1, 100);
    Reap(false);
    if (ready > 0) Accept();
  }
  Reap(true);
}

// Accept takes one connection and serves it in its own thread, unless the limits say no.
void JoinServer::Accept() {
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
  if (fd < 0) return;
  std::string from = PeerText(peer);
  auto same = std::count_if(connections_.begin(), connections_.end(), [&](const auto& c) { return c->from == from; });
  if (static_cast<int>(connections_.size()) >= limits_.max_connections || same >= limits_.per_source) {
    ::close(fd);
    // Logged once per burst, not per connection: a flood must not flood the journal too.
    if (turned_away_++ % 100 == 0) {
      Journal(LOG_WARNING,
              "join: turned away a connection from " + from + ": " + std::to_string(connections_.size()) +
                  " connections open, " + std::to_string(same) + " from that address (limits " +
                  std::to_string(limits_.max_connections) + " and " + std::to_string(limits_.per_source) + ")",
              {{"JOIN_REFUSED_FROM", from}, {"JOIN_TURNED_AWAY_TOTAL", std::to_string(turned_away_.load())}});
    }
    return;
  }
  SetTimeouts(fd, limits_.io_timeout_ms);
  auto c = std::make_unique<Connection>();
  c->fd = fd;
  c->from = from;
  c->deadline_ms = SteadyMs() + limits_.deadline_ms;
  Connection* raw = c.get();
  c->thread = std::thread([this, raw] {
    Handle(*raw);
    raw->done = true;
  });
  connections_.push_back(std::move(c));
}

// Reap closes finished connections and cuts off those past their deadline (or all of
// them, when stopping): shutdown wakes their thread's blocked read or write.
void JoinServer::Reap(bool all) {
  const std::int64_t now = SteadyMs();
  for (auto& c : connections_) {
    if (!c->done && !c->cut && (all || now >= c->deadline_ms.load())) {
      c->cut = true;
      ::shutdown(c->fd, SHUT_RDWR);
      if (!all) {
        ++cut_off_;
        Journal(LOG_WARNING,
                "join: cut off a connection from " + c->from + " at its deadline (" +
                    std::to_string(limits_.deadline_ms) +
                    " ms for the whole exchange, plus a second per MiB of a backup copy)",
                {{"JOIN_REFUSED_FROM", c->from}});
      }
    }
  }
  std::erase_if(connections_, [all](auto& c) {
    if (!c->done && !all) return false;
    c->thread.join();
    ::close(c->fd);
    return true;
  });
}

void JoinServer::Handle(Connection& conn) {
  const int fd = conn.fd;
  const std::string& from = conn.from;
  Ctx ctx = NewCtx(true);
  Ssl ssl(ctx ? SSL_new(ctx.get()) : nullptr, SSL_free);
  if (!ssl) return;
  ServerPsk psk{&keys_, std::nullopt};
  SSL_set_app_data(ssl.get(), &psk);
  SSL_set_fd(ssl.get(), fd);
  ERR_clear_error();
  if (SSL_accept(ssl.get()) != 1 || SSL_session_reused(ssl.get()) != 1 || !psk.chosen) {
    ++refused_;
    Journal(LOG_WARNING,
            "join: refused a connection from " + from +
                ": TLS handshake failed, the joiner holds neither this cluster's secret nor its worker secret (" +
                SslErrors() + ")",
            {{"JOIN_REFUSED_FROM", from}, {"JOIN_REFUSED_TOTAL", std::to_string(refused_.load())}});
    return;
  }
  const JoinAuthority proved = *psk.chosen;
  std::string line;
  JoinResponse response;
  if (!ReadUntil(ssl.get(), line, kMaxJoinRequest, true)) {
    response.error = "the join request is missing or over " + std::to_string(kMaxJoinRequest) + " bytes";
  } else if (auto request = ParseJoinRequest(line.substr(0, line.find('\n'))); !request) {
    response.error = request.error();
  } else if (request->copy) {
    std::shared_ptr<const BackupCopyStore> store;
    {
      std::lock_guard<std::mutex> lock(mu_);
      store = store_;
    }
    if (auto may = MayStoreCopy(*request, proved, store != nullptr); !may) {
      response.error = may.error();
    } else {
      // A second per MiB beyond the usual deadline: 1 MiB/s is far below any link a
      // control plane runs on, and the copy is bounded by kMaxBackupCopy.
      const auto extra = static_cast<std::int64_t>(request->copy->size >> 20) * 1000;
      conn.deadline_ms = SteadyMs() + limits_.deadline_ms + extra;
      std::string bytes = line.substr(line.find('\n') + 1);
      if (bytes.size() > request->copy->size || !ReadExactly(ssl.get(), bytes, request->copy->size)) {
        response.error =
            "the backup copy's bytes did not arrive as offered (" + std::to_string(request->copy->size) + " bytes)";
      } else if (auto stored = StoreCopy(*store, BackupCopy{request->name, request->copy->bundle, std::move(bytes)});
                 !stored) {
        response.error = "backup copy " + request->copy->bundle + " not kept: " + stored.error();
      } else {
        response.ok = true;
        Journal(LOG_INFO, "join: kept backup copy " + request->copy->bundle + " from " + request->name,
                {{"BACKUP_COPY", request->copy->bundle}, {"BACKUP_COPY_FROM", request->name}});
      }
    }
    if (!response.ok) {
      Journal(LOG_WARNING, "join: refused a backup copy from " + from + ": " + response.error,
              {{"JOIN_REFUSED_FROM", from}, {"JOIN_PROVED", JoinAuthorityName(proved)}});
    }
    nlohmann::json answer{{"ok", response.ok}};
    if (!response.ok) answer["error"] = response.error;
    WriteAll(ssl.get(), answer.dump());
    SSL_shutdown(ssl.get());
    // A refused sender is still sending: what it sends is read and dropped (until its
    // offered size, or the connection's deadline), so that closing with unread bytes
    // does not reset the connection before it has read why.
    if (!response.ok) {
      char sink[1 << 14];
      for (std::uint64_t left = request->copy->size; left > 0;) {
        int n = SSL_read(ssl.get(), sink, static_cast<int>(std::min<std::uint64_t>(sizeof sink, left)));
        if (n <= 0) break;
        left -= static_cast<std::uint64_t>(n);
      }
    }
    return;
  } else {
    std::shared_ptr<const Credentials> served;
    {
      std::lock_guard<std::mutex> lock(mu_);
      served = credentials_;
    }
    if (!served) {
      response.error = "this node has no cluster credentials yet; try another member or later";
    } else {
      const auto now =
          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
      response = AnswerJoin(*request, proved, *served, now);
      if (response.ok) {
        Journal(LOG_INFO,
                "join: gave " + std::string(request->control_plane ? "control-plane" : "worker") + " credentials to " +
                    request->name + " (" + request->address + ", connected from " + from + ", proved the " +
                    JoinAuthorityName(proved) + " key)",
                {{"JOIN_NODE", request->name},
                 {"JOIN_ROLE", request->control_plane ? "control-plane" : "worker"},
                 {"JOIN_PROVED", JoinAuthorityName(proved)}});
      } else {
        ++overreached_;
      }
    }
  }
  if (!response.ok) {
    Journal(LOG_WARNING,
            "join: refused a request from " + from + " (proved the " + JoinAuthorityName(proved) +
                " key): " + response.error,
            {{"JOIN_REFUSED_FROM", from}, {"JOIN_PROVED", JoinAuthorityName(proved)}});
  }
  WriteAll(ssl.get(), RenderJoinResponse(response));
  SSL_shutdown(ssl.get());
}

namespace {

// ClientSession is a client's TLS-PSK connection to a join endpoint.
struct ClientSession {
  int fd = -1;
  Ssl ssl{nullptr, SSL_free};
  Ctx ctx{nullptr, SSL_CTX_free};
  JoinKey key;
  ClientSession() = default;
  ClientSession(const ClientSession&) = delete;
  ClientSession& operator=(const ClientSession&) = delete;
  ~ClientSession() {
    ssl.reset();
    if (fd >= 0) ::close(fd);
  }
};

// Connect opens a session to address:port and completes the handshake with key.
Status Connect(ClientSession& c, const std::string& address, std::uint16_t port, const JoinKey& key, int timeout_ms) {
  std::string where = address + ":" + std::to_string(port);
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (!SockAddr(address, port, ss, len)) return Fail("join endpoint '" + address + "' is not an IP address");
  c.fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (c.fd < 0) return Fail(std::string("socket: ") + std::strerror(errno));
  if (::connect(c.fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 && errno != EINPROGRESS) {
    return Fail("join endpoint " + where + ": " + std::strerror(errno));
  }
  pollfd p{c.fd, POLLOUT, 0};
  if (::poll(&p, 1, timeout_ms) != 1) return Fail("join endpoint " + where + ": connect timed out");
  int err = 0;
  socklen_t elen = sizeof err;
  ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &elen);
  if (err != 0) return Fail("join endpoint " + where + ": " + std::strerror(err));
  ::fcntl(c.fd, F_SETFL, ::fcntl(c.fd, F_GETFL) & ~O_NONBLOCK);
  SetTimeouts(c.fd, timeout_ms);
  c.ctx = NewCtx(false);
  c.ssl.reset(c.ctx ? SSL_new(c.ctx.get()) : nullptr);
  if (!c.ssl) return Fail("cannot set up TLS: " + SslErrors());
  c.key = key;
  SSL_set_app_data(c.ssl.get(), &c.key);
  SSL_set_fd(c.ssl.get(), c.fd);
  ERR_clear_error();
  if (SSL_connect(c.ssl.get()) != 1 || SSL_session_reused(c.ssl.get()) != 1) {
    return Fail("join endpoint " + where + " refused the TLS handshake (is the " +
                (key.authority == JoinAuthority::kControlPlane ? "cluster secret" : "worker secret") +
                " the same?): " + SslErrors());
  }
  return Ok{};
}

}  // namespace

Result<JoinResponse> FetchJoin(const std::string& address, std::uint16_t port, const JoinKey& psk,
                               const JoinRequest& request, int timeout_ms) {
  std::string where = address + ":" + std::to_string(port);
  ClientSession c;
  if (auto s = Connect(c, address, port, psk, timeout_ms); !s) return Fail(s.error());
  if (!WriteAll(c.ssl.get(), RenderJoinRequest(request))) return Fail("join endpoint " + where + ": write failed");
  std::string body;
  if (!ReadUntil(c.ssl.get(), body, kMaxResponse, false) || body.empty()) {
    return Fail("join endpoint " + where + " closed without an answer (a wrong cluster secret shows up so)");
  }
  auto response = ParseJoinResponse(body);
  if (!response) return Fail("join endpoint " + where + ": " + response.error());
  if (!response->ok) return Fail("join endpoint " + where + " refused: " + response->error);
  return response;
}

Status PushBackupCopy(const std::string& address, std::uint16_t port, const JoinKey& key, const JoinRequest& from,
                      const std::string& name, std::string_view bytes, int timeout_ms) {
  std::string where = address + ":" + std::to_string(port);
  if (!ValidBundleFileName(name)) return Fail("'" + name + "' is not a bundle's file name");
  if (bytes.empty() || bytes.size() > kMaxBackupCopy) {
    return Fail("a backup copy is 1 to " + std::to_string(kMaxBackupCopy) + " bytes, not " +
                std::to_string(bytes.size()));
  }
  JoinRequest request = from;
  request.control_plane = true;
  request.copy = BackupCopyOffer{name, bytes.size()};
  ClientSession c;
  if (auto s = Connect(c, address, port, key, timeout_ms); !s) return s;
  // A peer that refuses the offer answers without reading the bytes: its answer is
  // read even when sending them failed.
  const bool sent = WriteAll(c.ssl.get(), RenderJoinRequest(request)) && WriteAll(c.ssl.get(), bytes);
  std::string body;
  if (!ReadUntil(c.ssl.get(), body, kMaxResponse, false) || body.empty()) {
    return Fail("join endpoint " + where + (sent ? " closed without an answer" : ": the copy could not be sent"));
  }
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ok") || !j["ok"].is_boolean()) {
    return Fail("join endpoint " + where + " answered the copy with something this version does not read");
  }
  if (!j["ok"].get<bool>()) return Fail(where + " refused the copy: " + j.value("error", std::string("no reason")));
  return Ok{};
}

Status SaveWorkerCredentials(const std::filesystem::path& dir, const JoinResponse& r) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Fail("cannot create " + dir.string() + ": " + ec.message());
  std::string endpoints;
  for (const auto& e : r.api_endpoints) endpoints += e + "\n";
  if (auto s = WriteFileAtomic(dir / "ca.crt", r.ca_bundle, std::filesystem::perms(0644)); !s) return s;
  if (auto s = WriteFileAtomic(dir / "api-endpoints", endpoints, std::filesystem::perms(0644)); !s) return s;
  return WriteFileAtomic(dir / "bootstrap-token", r.bootstrap_token + "\n", std::filesystem::perms(0600));
}

}  // namespace sprout::formation
