#include "nodeconfig/apply.h"

#include "util/fs.h"
#include "util/process.h"

namespace sprout {

namespace fs = std::filesystem;

std::string NetworkUnit(const NodeConfig& c) {
  if (!c.address) return "";
  std::string unit =
      "# Written by sprout-firstboot from the node's settings (sprout personalize --address).\n"
      "[Match]\n"
      "Type=ether\n"
      "# Only the machine's own network cards: a pod's veth, a bridge or any other virtual\n"
      "# link has a kind, and must keep the address its owner (the CNI plugins) gives it.\n"
      "Kind=!*\n"
      "\n"
      "[Network]\n"
      "Address=" +
      *c.address + "\n";
  if (c.gateway) unit += "Gateway=" + *c.gateway + "\n";
  // Formation beacons are multicast on this link.
  unit += "MulticastDNS=no\nLinkLocalAddressing=no\n\n[Link]\nMulticast=yes\n";
  return unit;
}

namespace {

// WriteIfChanged writes contents to path unless it already holds exactly that.
Result<bool> WriteIfChanged(const fs::path& path, const std::string& contents, fs::perms mode) {
  auto current = ReadFile(path);
  if (current && *current == contents) return false;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return Fail("cannot create " + path.parent_path().string() + ": " + ec.message());
  if (auto s = WriteFileAtomic(path, contents, mode); !s) return Fail(s.error());
  return true;
}

}  // namespace

ApplyReport ApplyNodeConfig(const NodeConfig& c, const ApplyPaths& p) {
  ApplyReport r;
  if (c.ssh_authorized_key) {
    std::error_code ec;
    fs::create_directories(p.ssh_dir, ec);
    fs::permissions(p.ssh_dir, fs::perms::owner_all, ec);
    auto w = WriteIfChanged(p.ssh_dir / "authorized_keys", *c.ssh_authorized_key + "\n", fs::perms(0600));
    if (!w) {
      r.problems.push_back(w.error());
    } else if (*w) {
      r.done.emplace_back("SSH authorized key installed");
    }
  }
  std::string unit = NetworkUnit(c);
  if (!unit.empty()) {
    auto w = WriteIfChanged(p.network_dir / "10-sprout-static.network", unit, fs::perms(0644));
    if (!w) {
      r.problems.push_back(w.error());
    } else if (*w) {
      r.done.push_back("static address " + *c.address + " configured");
      if (p.reload_networkd) {
        auto reload = Run({{"networkctl", "reload"}});
        if (!reload || reload->exit_code != 0) {
          r.problems.push_back("networkctl reload failed: " + (reload ? reload->output : reload.error()));
        }
      }
    }
  }
  return r;
}

}  // namespace sprout
