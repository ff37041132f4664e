#include "nodeconfig/sources.h"

#include <fstream>
#include <sstream>

#include "util/fs.h"
#include "util/text.h"

namespace sprout {

namespace {

// kAreaLimit bounds every read of a text source: the config area is a whole partition.
constexpr std::size_t kAreaLimit = 1 << 20;

// ReadPrefix reads at most limit bytes.
std::optional<std::string> ReadPrefix(const std::filesystem::path& p, std::size_t limit) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::string data(limit, '\0');
  in.read(data.data(), static_cast<std::streamsize>(limit));
  data.resize(static_cast<std::size_t>(in.gcount()));
  return data;
}

// Keep adds a parsed source as the next layer, or its error as a problem: a broken
// source is skipped.
void Keep(const Result<NodeConfig>& parsed, std::vector<NodeConfig>& layers, LoadedConfig& out) {
  if (parsed) {
    layers.push_back(parsed.value());
  } else {
    out.problems.push_back(parsed.error());
  }
}

// KeepFile reads the source at path, if there is one, named source in its problems.
void KeepFile(const std::filesystem::path& path, const std::string& source, std::vector<NodeConfig>& layers,
              LoadedConfig& out) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return;
  auto text = ReadPrefix(path, kAreaLimit);
  Keep(text ? ParseNodeConfig(*text, source) : Result<NodeConfig>(Fail(source + ": cannot be read")), layers, out);
}

}  // namespace

std::optional<std::filesystem::path> PartitionOnRootDisk(const SystemPaths& paths, const std::string& cmdline,
                                                         const std::string& name) {
  namespace fs = std::filesystem;
  const std::string key = "sprout.verity.data=PARTUUID=";
  std::string uuid;
  for (const auto& word : Split(Trim(cmdline), ' ')) {
    if (word.starts_with(key)) uuid = word.substr(key.size());
  }
  if (uuid.empty()) return std::nullopt;
  std::error_code ec;
  const fs::path data = fs::canonical(paths.by_partuuid / uuid, ec);
  if (ec) return std::nullopt;
  // /sys/class/block/vda2 links into the disk's own folder, which holds one folder per
  // partition, each with a "partition" file and a uevent naming its GPT name.
  const fs::path disk = fs::canonical(paths.sys_class_block / data.filename(), ec).parent_path();
  if (ec) return std::nullopt;
  for (const auto& entry : fs::directory_iterator(disk, ec)) {
    if (!fs::exists(entry.path() / "partition", ec)) continue;
    auto uevent = ReadPrefix(entry.path() / "uevent", 4096);
    if (!uevent) continue;
    std::string devname;
    bool named = false;
    for (const auto& line : Split(*uevent, '\n')) {
      if (line == "PARTNAME=" + name) named = true;
      if (line.starts_with("DEVNAME=")) devname = line.substr(8);
    }
    if (named && !devname.empty()) return paths.dev / devname;
  }
  return std::nullopt;
}

LoadedConfig LoadNodeConfig(const SystemPaths& paths) {
  LoadedConfig out;
  std::vector<NodeConfig> layers;
  auto cmdline_file = ReadFile(paths.cmdline);
  std::string cmdline = cmdline_file ? *cmdline_file : "";

  // Lowest first: the area's contents the initrd moved into the encrypted state before
  // wiping the area (docs/secure-boot.md), so the area, if written again, wins.
  KeepFile(paths.saved_area, "config area (kept in the encrypted state)", layers, out);

  for (const auto& word : Split(Trim(cmdline), ' ')) {
    if (!word.starts_with("sprout.config=")) continue;
    const std::string spec = word.substr(std::string("sprout.config=").size());
    std::optional<std::filesystem::path> device;
    if (spec.starts_with("PARTUUID=")) device = paths.by_partuuid / spec.substr(std::string("PARTUUID=").size());
    if (spec.starts_with("PARTLABEL=")) {
      device = PartitionOnRootDisk(paths, cmdline, spec.substr(std::string("PARTLABEL=").size()));
    }
    auto area = device ? ReadPrefix(*device, kAreaLimit) : std::nullopt;
    if (!area) {
      out.problems.push_back("config area " + spec + " cannot be read" +
                             (device ? " (" + device->string() + ")" : std::string(" (not found on the root's disk)")));
      continue;
    }
    Keep(ParseNodeConfig(*area, "config area"), layers, out);
  }
  KeepFile(paths.fw_cfg, "fw_cfg", layers, out);
  auto from_cmdline = ParseCmdline(cmdline);
  if (from_cmdline) {
    // /proc/cmdline is readable by every process on the node and inside every
    // container, and PXE sends it in clear: a secret there would be no secret.
    // The worker secret too: with it a pod could pose as a worker and fetch the
    // cluster's bootstrap token.
    auto refuse = [&](std::optional<std::string>& secret, const std::string& key) {
      if (!secret) return;
      secret.reset();
      from_cmdline->origin.erase(key);
      out.problems.push_back(
          "kernel command line: sprout." + key +
          " is ignored: /proc/cmdline is readable by every process and container on the node (and PXE sends it in "
          "clear); give the secret through the config area (sprout personalize) or QEMU's fw_cfg");
    };
    refuse(from_cmdline->cluster_secret, "cluster-secret");
    refuse(from_cmdline->worker_secret, "worker-secret");
    layers.push_back(*from_cmdline);
  } else {
    out.problems.push_back(from_cmdline.error());
  }
  out.config = MergeNodeConfig(layers);
  return out;
}

}  // namespace sprout
