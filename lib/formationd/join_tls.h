// The join endpoint's transport, shared by its server (join_server.cc) and its client
// (join_client.cc) and private to them: TLS 1.3 authenticated only by an external PSK
// (no certificates, no tickets), and bounded socket reads and writes.
#pragma once

#include <openssl/ssl.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "formation/join.h"

namespace sprout::formation::join_tls {

// SslErrors drains OpenSSL's error queue into one line ("connection closed" if empty).
std::string SslErrors();

// ServerPsk is what one server connection's PSK callback reads (both keys) and writes
// (which identity it handed a session for).
struct ServerPsk {
  const JoinKeys* keys = nullptr;
  std::optional<JoinAuthority> chosen;
};

using Ctx = std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)>;
using Ssl = std::unique_ptr<SSL, decltype(&SSL_free)>;

// NewCtx makes a TLS 1.3 context for one side: the server finds the PSK by the client's
// identity (ServerPsk as the connection's app data), the client offers its JoinKey's.
Ctx NewCtx(bool server);

// SetTimeouts bounds each blocking read and write on fd to ms milliseconds.
void SetTimeouts(int fd, int ms);

// ReadUntil reads until EOF or limit (with line, until the first newline, the limit
// being the line's); false when the peer misbehaved.
bool ReadUntil(SSL* ssl, std::string& out, std::size_t limit, bool line);

// WriteAll writes all of data; false on an error.
bool WriteAll(SSL* ssl, std::string_view data);

// ReadExactly appends to out until it holds want bytes; false on EOF or an error first.
bool ReadExactly(SSL* ssl, std::string& out, std::uint64_t want);

// SteadyMs is the monotonic clock in milliseconds.
std::int64_t SteadyMs();

// SockAddr fills a sockaddr for address:port (IPv4 or IPv6); false if it is neither.
bool SockAddr(const std::string& address, std::uint16_t port, sockaddr_storage& ss, socklen_t& len);

// PeerText is the address of a peer as text.
std::string PeerText(const sockaddr_storage& ss);

}  // namespace sprout::formation::join_tls
