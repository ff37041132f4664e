#include "util/links.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

namespace sprout {

std::optional<std::string> LinkWithAddress(const std::string& ip) {
  struct ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return std::nullopt;
  std::optional<std::string> link;
  for (const struct ifaddrs* a = list; a != nullptr && !link; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = nullptr;
    if (a->ifa_addr->sa_family == AF_INET) {
      raw = &reinterpret_cast<const struct sockaddr_in*>(a->ifa_addr)->sin_addr;
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      raw = &reinterpret_cast<const struct sockaddr_in6*>(a->ifa_addr)->sin6_addr;
    }
    if (raw != nullptr && ::inet_ntop(a->ifa_addr->sa_family, raw, text, sizeof text) != nullptr && ip == text) {
      link = a->ifa_name;
    }
  }
  ::freeifaddrs(list);
  return link;
}

}  // namespace sprout
