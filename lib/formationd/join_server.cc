// The join endpoint's server (formation/join.h): one thread accepts, each connection
// is served in its own thread within the limits, over TLS-PSK (join_tls.h).
#include <netinet/in.h>
#include <openssl/err.h>
#include <poll.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "formation/join.h"
#include "formationd/join_net.h"
#include "formationd/join_tls.h"
#include "formationd/journal.h"
#include "util/fs.h"

namespace sprout::formation {

using join_tls::Ctx;
using join_tls::NewCtx;
using join_tls::PeerText;
using join_tls::ReadExactly;
using join_tls::ReadUntil;
using join_tls::ServerPsk;
using join_tls::SetTimeouts;
using join_tls::SockAddr;
using join_tls::Ssl;
using join_tls::SslErrors;
using join_tls::SteadyMs;
using join_tls::WriteAll;

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
                    " ms for the whole exchange, plus 30 s and 4 s a MiB for a backup copy)",
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
      // The copy's allowance beyond the usual deadline (BackupCopyAllowanceMs), granted
      // only to a proved control-plane peer; the copy is bounded by kMaxBackupCopy.
      conn.deadline_ms = SteadyMs() + limits_.deadline_ms + BackupCopyAllowanceMs(request->copy->size);
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

}  // namespace sprout::formation
