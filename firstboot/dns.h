// `sprout-firstboot dns`: the cluster DNS controller of a node (docs/dns.md). It lists
// and watches Services, EndpointSlices and Pods through the API with the node's own
// credentials, renders the zones (lib/dns, pure), writes each changed zone file
// atomically and has the node's knotd reload it; it checks that knotd answers and
// writes dns.json in the state folder for `sprout-firstboot status`.
#pragma once

#include <filesystem>
#include <string>

namespace sprout::firstboot {

struct DnsOptions {
  std::filesystem::path config = "/usr/lib/sprout/dns/dns.json";      // domain, zones, listen (baked)
  std::filesystem::path kubeconfig = "/etc/kubernetes/kubelet.conf";  // waited for at first boot
  std::filesystem::path zones_dir = "/var/lib/sprout/dns/zones";      // knotd's zone files
  std::filesystem::path run_dir = "/run/sprout-dns";                  // knotd's control socket
  std::filesystem::path state_dir = "/var/lib/sprout";                // dns.json
  std::string knotc = "knotc";
  int debounce_ms = 200;  // how long after a change the zones are rendered
};

// DnsMain parses `dns`'s flags (argv[0] is "dns") and runs the controller until
// SIGTERM or SIGINT.
int DnsMain(int argc, char** argv);

// DnsStatusLines is the "dns:" part of `sprout-firstboot status`, from dns.json in
// state_dir; "" when the node runs no DNS controller.
std::string DnsStatusLines(const std::filesystem::path& state_dir);

}  // namespace sprout::firstboot
