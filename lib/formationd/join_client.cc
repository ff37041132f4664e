// The join endpoint's client side (formation/join.h): fetching credentials, pushing a
// backup copy, and saving a worker's credentials.
#include <fcntl.h>
#include <openssl/err.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "formation/join.h"
#include "formationd/join_net.h"
#include "formationd/join_tls.h"
#include "util/fs.h"
#include "util/json_field.h"

namespace sprout::formation {

using join_tls::Ctx;
using join_tls::NewCtx;
using join_tls::ReadUntil;
using join_tls::SetTimeouts;
using join_tls::SockAddr;
using join_tls::Ssl;
using join_tls::SslErrors;
using join_tls::WriteAll;

namespace {

constexpr std::size_t kMaxResponse = 1 << 20;

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
  // The peer answers only once it has checked and kept the copy, which takes time on a
  // busy node: each read and write may wait the copy's allowance too.
  SetTimeouts(c.fd, static_cast<int>(timeout_ms + BackupCopyAllowanceMs(bytes.size())));
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
  if (!j["ok"].get<bool>()) return Fail(where + " refused the copy: " + JsonString(j, "error").value_or("no reason"));
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