// The host's network links, read from the kernel (getifaddrs).
#pragma once

#include <optional>
#include <string>

namespace sprout {

// LinkWithAddress names the network link that holds ip (an IPv4 or IPv6 address as
// text, "198.18.0.11"), if one does.
std::optional<std::string> LinkWithAddress(const std::string& ip);

}  // namespace sprout
