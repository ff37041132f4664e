// Shoot: the fields of a Gardener Shoot manifest that shape an autonomous cluster.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/diag.h"

namespace sprout {

// WorkerPool is one entry of spec.provider.workers.
struct WorkerPool {
  std::string name;
  bool control_plane = false;  // the pool carries `controlPlane: {}`
  int minimum = 0;
  int maximum = 0;
  Location where;
};

// Shoot is what sprout takes from a core.gardener.cloud/v1beta1 Shoot (docs/shoot.md).
struct Shoot {
  std::string file;
  std::string name;
  std::string ns;
  std::string kubernetes_version;
  std::string pods_cidr;
  std::string services_cidr;
  std::string nodes_cidr;
  WorkerPool control_plane;         // the one pool with controlPlane: {}
  std::vector<WorkerPool> workers;  // every other pool, in file order

  // ExpectedControlPlanes is the voting etcd member count formation waits for.
  int ExpectedControlPlanes() const { return control_plane.minimum; }
};

// ParseShoot reads a Shoot from text (named file in messages). Every problem goes into
// diags: errors for what makes the Shoot unusable, warnings for fields sprout ignores and
// for an even control-plane count. Returns the Shoot when there were no errors.
std::optional<Shoot> ParseShoot(std::string_view text, const std::string& file, Diagnostics& diags);

// LoadShoot reads and parses a Shoot file.
std::optional<Shoot> LoadShoot(const std::filesystem::path& path, Diagnostics& diags);

// Cidr is a parsed IPv4 or IPv6 network.
struct Cidr {
  bool v6 = false;
  unsigned char addr[16] = {};
  int prefix = 0;
};

// ParseCidr parses "10.0.0.0/16" or "fd00::/64"; host bits must be zero, and the prefix
// length is decimal with no leading zero ("/026" is refused: iproute2 reads it as octal 22).
std::optional<Cidr> ParseCidr(std::string_view text);

// FormatCidr is a network's canonical spelling: the address as inet_ntop writes it (IPv6
// compressed, lower case), a slash and the decimal prefix length. A CIDR whose text is
// not its own canonical spelling is written another way than the kernel will show it.
std::string FormatCidr(const Cidr& cidr);

// CidrsOverlap says whether two networks of the same family share an address.
bool CidrsOverlap(const Cidr& a, const Cidr& b);

// NthAddress returns the n-th address of a network as text (n=1: the first host, which
// Kubernetes gives the `kubernetes` service). Empty if n is outside the network.
std::string NthAddress(const Cidr& net, unsigned n);

// ShootToJson renders the Shoot's fields for /usr/share/sprout/cluster.json.
std::string ShootToJson(const Shoot& shoot);

}  // namespace sprout
