#include "nodeconfig/sources.h"

#include <fstream>
#include <sstream>

#include "util/fs.h"
#include "util/text.h"

namespace sprout {

namespace {

// ReadPrefix reads at most limit bytes: the config area is a whole partition.
std::optional<std::string> ReadPrefix(const std::filesystem::path& p, std::size_t limit) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::string data(limit, '\0');
  in.read(data.data(), static_cast<std::streamsize>(limit));
  data.resize(static_cast<std::size_t>(in.gcount()));
  return data;
}

}  // namespace

LoadedConfig LoadNodeConfig(const SystemPaths& paths) {
  LoadedConfig out;
  std::vector<NodeConfig> layers;
  auto cmdline_file = ReadFile(paths.cmdline);
  std::string cmdline = cmdline_file ? *cmdline_file : "";

  for (const auto& word : Split(Trim(cmdline), ' ')) {
    if (!word.starts_with("sprout.config=PARTUUID=")) continue;
    std::string uuid = word.substr(std::string("sprout.config=PARTUUID=").size());
    auto area = ReadPrefix(paths.by_partuuid / uuid, 1 << 20);
    if (!area) {
      out.problems.push_back("config area PARTUUID=" + uuid + " cannot be read");
      continue;
    }
    auto parsed = ParseNodeConfig(*area, "config area");
    if (parsed) {
      layers.push_back(*parsed);
    } else {
      out.problems.push_back(parsed.error());
    }
  }
  std::error_code ec;
  if (std::filesystem::exists(paths.fw_cfg, ec)) {
    auto fw = ReadPrefix(paths.fw_cfg, 1 << 20);
    auto parsed = fw ? ParseNodeConfig(*fw, "fw_cfg") : Result<NodeConfig>(Fail("fw_cfg: cannot be read"));
    if (parsed) {
      layers.push_back(*parsed);
    } else {
      out.problems.push_back(parsed.error());
    }
  }
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
