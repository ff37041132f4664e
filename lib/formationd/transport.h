// UDP transport for formation frames: one socket that receives multicast and unicast,
// sends to the IPv4 multicast group and to a static peer list. Frames are opaque bytes
// here; sealing and opening them is the Sealer's and the Gate's job.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "formation/wire.h"  // Datagram
#include "util/result.h"

namespace sprout::formation {

// kDefaultGroup and kDefaultPort are the formation multicast group and UDP port:
// 239.255.0.0/16 is the IPv4 organization-local scope, so routers never forward it.
inline constexpr const char* kDefaultGroup = "239.255.77.77";
inline constexpr std::uint16_t kDefaultPort = 7777;

// TransportConfig says where to listen and whom to reach.
struct TransportConfig {
  std::string listen;                 // this node's IPv4 address: multicast goes out of its interface
  std::uint16_t port = kDefaultPort;  // the UDP port of every node
  std::string group = kDefaultGroup;  // multicast group; empty disables multicast
  std::vector<std::string> peers;     // static peer IPv4 addresses, reached by unicast
};

// ParseIPv4 turns dotted-quad text into an address, or nothing.
std::optional<in_addr> ParseIPv4(const std::string& text);
// FormatAddress renders an address as "a.b.c.d:port".
std::string FormatAddress(const sockaddr_in& a);

// UdpTransport owns the socket.
class UdpTransport {
 public:
  // Open binds the port on all addresses, joins the group on the listen interface and
  // turns multicast loopback off; errors name the step and the address.
  static Result<UdpTransport> Open(const TransportConfig& config);
  UdpTransport(UdpTransport&& other) noexcept;
  UdpTransport& operator=(UdpTransport&&) = delete;
  UdpTransport(const UdpTransport&) = delete;
  UdpTransport& operator=(const UdpTransport&) = delete;
  ~UdpTransport();

  // fd is the socket, for poll().
  int fd() const { return fd_; }
  // SendTo sends one datagram to one address; false if the kernel refused it.
  bool SendTo(const std::vector<std::uint8_t>& bytes, const sockaddr_in& to);
  // SendAll sends one datagram to the group and to every static peer; returns how
  // many sends the kernel refused.
  int SendAll(const std::vector<std::uint8_t>& bytes);
  // Receive returns one waiting datagram without blocking, or nothing.
  std::optional<Datagram> Receive();

 private:
  UdpTransport(int fd, std::vector<sockaddr_in> targets) : fd_(fd), targets_(std::move(targets)) {}
  int fd_ = -1;
  std::vector<sockaddr_in> targets_;  // group first (if any), then peers
};

}  // namespace sprout::formation
