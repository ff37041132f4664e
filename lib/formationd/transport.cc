#include "formationd/transport.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace sprout::formation {

namespace {

// kMaxDatagram is larger than any frame: names, URLs and 64 members stay far below it.
constexpr std::size_t kMaxDatagram = 65536;

sockaddr_in MakeAddress(in_addr ip, std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr = ip;
  return a;
}

}  // namespace

std::optional<in_addr> ParseIPv4(const std::string& text) {
  in_addr a{};
  if (::inet_pton(AF_INET, text.c_str(), &a) != 1) return std::nullopt;
  return a;
}

std::string FormatAddress(const sockaddr_in& a) {
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
  return std::string(buf) + ":" + std::to_string(ntohs(a.sin_port));
}

Result<UdpTransport> UdpTransport::Open(const TransportConfig& config) {
  auto listen = ParseIPv4(config.listen);
  if (!listen) return Fail("listen address '" + config.listen + "' is not an IPv4 address");
  std::vector<sockaddr_in> targets;
  std::optional<in_addr> group;
  if (!config.group.empty()) {
    group = ParseIPv4(config.group);
    if (!group || (ntohl(group->s_addr) >> 28) != 0xe) {
      return Fail("multicast group '" + config.group + "' is not an IPv4 multicast address (224.0.0.0/4)");
    }
    targets.push_back(MakeAddress(*group, config.port));
  }
  for (const auto& p : config.peers) {
    auto ip = ParseIPv4(p);
    if (!ip) return Fail("peer '" + p + "' is not an IPv4 address");
    if (ip->s_addr == listen->s_addr) continue;  // the static list may name this node too
    targets.push_back(MakeAddress(*ip, config.port));
  }

  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Fail(std::string("cannot create a UDP socket: ") + std::strerror(errno));
  auto fail = [fd](const std::string& what) {
    std::string err = what + ": " + std::strerror(errno);
    ::close(fd);
    return Fail(err);
  };
  int one = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) return fail("cannot set SO_REUSEADDR");
  // Bound to any address: a socket bound to the unicast address would not see the group.
  sockaddr_in bind_to = MakeAddress(in_addr{htonl(INADDR_ANY)}, config.port);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&bind_to), sizeof bind_to) != 0) {
    return fail("cannot bind UDP port " + std::to_string(config.port));
  }
  if (group) {
    ip_mreq mreq{};
    mreq.imr_multiaddr = *group;
    mreq.imr_interface = *listen;
    if (::setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq, sizeof mreq) != 0) {
      return fail("cannot join multicast group " + config.group + " on " + config.listen);
    }
    if (::setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &*listen, sizeof *listen) != 0) {
      return fail("cannot send multicast from " + config.listen);
    }
    unsigned char off = 0;
    unsigned char ttl = 1;  // the node network only
    if (::setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &off, sizeof off) != 0 ||
        ::setsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl) != 0) {
      return fail("cannot set multicast options");
    }
  }
  return UdpTransport(fd, std::move(targets));
}

UdpTransport::UdpTransport(UdpTransport&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), targets_(std::move(other.targets_)) {}

UdpTransport::~UdpTransport() {
  if (fd_ >= 0) ::close(fd_);
}

bool UdpTransport::SendTo(const std::vector<std::uint8_t>& bytes, const sockaddr_in& to) {
  ssize_t n = ::sendto(fd_, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to);
  return n == static_cast<ssize_t>(bytes.size());
}

int UdpTransport::SendAll(const std::vector<std::uint8_t>& bytes) {
  int refused = 0;
  for (const auto& t : targets_) refused += SendTo(bytes, t) ? 0 : 1;
  return refused;
}

std::optional<Datagram> UdpTransport::Receive() {
  Datagram d;
  d.bytes.resize(kMaxDatagram);
  socklen_t len = sizeof d.from;
  ssize_t n = ::recvfrom(fd_, d.bytes.data(), d.bytes.size(), 0, reinterpret_cast<sockaddr*>(&d.from), &len);
  if (n < 0) return std::nullopt;
  d.bytes.resize(static_cast<std::size_t>(n));
  return d;
}

}  // namespace sprout::formation
