#include "firstboot/update.h"

#include <cxxopts.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "firstboot/update_node.h"
#include "update/checks.h"
#include "util/fs.h"

namespace sprout::firstboot {

namespace fs = std::filesystem;
using update_cmd::Options;

std::string SlotStatusText(const std::string& state_dir) {
  auto text = ReadFile(fs::path(state_dir) / "update.json");
  if (!text) return "";
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object()) return "";
  return j.value("slots", "") + "  (as seen by `sprout-firstboot " + j.value("recordedBy", "?") +
         "`; `sprout-firstboot update status` reads the disk now)\n";
}

int UpdateMain(int argc, char** argv) {
  cxxopts::Options options("sprout-firstboot update", "A/B updates of this node (docs/updates.md).\n");
  options.add_options()("command", "apply | status | gate | bless", cxxopts::value<std::string>())(
      "source", "apply: the build: a folder or an http(s) URL holding manifest.json, sha256sums and the raw image",
      cxxopts::value<std::string>()->default_value(""))(
      "key",
      "apply: trusted Ed25519 public key (default: the node's trust root /etc/sprout/update.pub, which an image "
      "built with sprout build --sign carries)",
      cxxopts::value<std::string>()->default_value(""))(
      "insecure-unsigned",
      "apply: on a node without a trust root, install a build without checking who made it (logged as a warning)")(
      "allow-downgrade",
      "apply: install a build whose serial is not above the running build's (an older build, or the same serial)")(
      "allow-cross-profile",
      "apply: install a build of another profile, role or cluster than the running build's (update.profile, role, "
      "the Shoot's name)")("min-free",
                           "apply: bytes the state partition must keep free for etcd while the build is copied there",
                           cxxopts::value<std::uint64_t>()->default_value(std::to_string(update::kEtcdFloor)))(
      "ca-file", "apply: CA bundle (PEM) an https build server's certificate must chain to (default: the system's)",
      cxxopts::value<std::string>()->default_value(""))(
      "root", "apply: the running root file system, which holds the trust root etc/sprout/update.pub",
      cxxopts::value<std::string>()->default_value("/"))("reboot", "apply: reboot into the new slot at the end")(
      "tries", "apply: boots the new slot gets before it falls back", cxxopts::value<int>()->default_value("3"))(
      "timeout", "gate: seconds to wait for health", cxxopts::value<int>()->default_value("900"))(
      "cmdline", "the kernel command line file", cxxopts::value<std::string>()->default_value("/proc/cmdline"))(
      "disk", "the disk with the slots (default: the running root's disk)",
      cxxopts::value<std::string>()->default_value(""))(
      "esp", "a folder with the ESP's files (default: the disk's ESP, mounted)",
      cxxopts::value<std::string>()->default_value(""))(
      "state-dir", "where update.json records the slots for `sprout-firstboot status`",
      cxxopts::value<std::string>()->default_value("/var/lib/sprout"))("h,help", "show this help");
  options.parse_positional({"command", "source"});
  options.positional_help("apply DIR|URL | status | gate | bless");
  cxxopts::ParseResult args;
  try {
    args = options.parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "sprout-firstboot update: " << e.what() << "\n" << options.help();
    return 2;
  }
  if (args.count("help") || !args.count("command")) {
    std::cout << options.help();
    return args.count("help") ? 0 : 2;
  }
  Options o;
  o.cmdline = args["cmdline"].as<std::string>();
  o.disk = args["disk"].as<std::string>();
  o.esp = args["esp"].as<std::string>();
  o.state_dir = args["state-dir"].as<std::string>();
  o.key = args["key"].as<std::string>();
  o.root = args["root"].as<std::string>();
  o.ca_file = args["ca-file"].as<std::string>();
  o.insecure_unsigned = args.count("insecure-unsigned") > 0;
  o.allow_downgrade = args.count("allow-downgrade") > 0;
  o.allow_cross_profile = args.count("allow-cross-profile") > 0;
  o.min_free = args["min-free"].as<std::uint64_t>();
  o.tries = args["tries"].as<int>();
  o.timeout = args["timeout"].as<int>();
  o.reboot = args.count("reboot") > 0;
  const std::string command = args["command"].as<std::string>();
  if (o.tries < 1 || o.tries > 9) {
    std::cerr << "sprout-firstboot update: --tries must be 1 to 9\n";
    return 2;
  }
  if (command == "apply") return update_cmd::Apply(o, args["source"].as<std::string>());
  if (command == "status") return update_cmd::ShowStatus(o);
  if (command == "gate") return update_cmd::Gate(o);
  if (command == "bless") return update_cmd::Bless(o);
  std::cerr << "sprout-firstboot update: unknown command '" << command << "'; use apply, status, gate or bless\n";
  return 2;
}

}  // namespace sprout::firstboot
