#include "formationd/join_tls.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <sys/time.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace sprout::formation::join_tls {

namespace {

constexpr const char* kPskIdentity = "sprout-join-v1";
constexpr const char* kWorkerPskIdentity = "sprout-join-worker-v1";

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

}  // namespace

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

}  // namespace sprout::formation::join_tls
