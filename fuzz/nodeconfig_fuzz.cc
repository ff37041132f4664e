// libFuzzer target for the per-node settings parsers: the config area and fw_cfg text
// (ParseNodeConfig) and the kernel command line (ParseCmdline). A node reads them at
// every boot from media anyone with the disk or the hypervisor can write, including
// the worker secret, the cluster secret and a worker's CA pin. Neither may crash, leak or read out of
// bounds, and accepted settings render and parse back to the same settings.
// Seeds: fuzz/corpus/nodeconfig_fuzz/.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "nodeconfig/nodeconfig.h"

namespace {

bool Same(const sprout::NodeConfig& a, const sprout::NodeConfig& b) {
  return a.cluster_secret == b.cluster_secret && a.worker_secret == b.worker_secret && a.hostname == b.hostname &&
         a.role == b.role && a.address == b.address && a.gateway == b.gateway && a.peers == b.peers &&
         a.ssh_authorized_key == b.ssh_authorized_key && a.ca_cert_hash == b.ca_cert_hash;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = sprout::ParseNodeConfig(text, "fuzz");
  if (config) {
    auto again = sprout::ParseNodeConfig(sprout::RenderNodeConfig(*config), "rendered");
    if (!again || !Same(*again, *config)) __builtin_trap();
  }
  (void)sprout::ParseCmdline(text);
  return 0;
}
