// The image's media and disk: formats, and the sizes of the ESP, state and root partitions.
#include <yaml-cpp/yaml.h>

#include "profile/layer.h"
#include "util/text.h"

namespace sprout {

namespace fs = std::filesystem;

void LayerParser::ParseDisk(const YAML::Node& root, Layer& layer) {
  if (auto n = root["formats"]) ParseFormats(n, layer);
  if (auto n = root["disk"]) {
    if (ExpectMap(n, "disk")) {
      CheckKeys(n, "'disk'", {"espSize", "stateSize", "rootSize"});
      if (auto s = n["espSize"]) layer.esp_size = Size(s, "disk.espSize", 32ull << 20);
      if (auto s = n["stateSize"]) layer.state_size = Size(s, "disk.stateSize", 16ull << 20);
      if (auto s = n["rootSize"]) {
        if (s.IsScalar() && s.Scalar() == "auto") {
          layer.root_size = 0;
        } else {
          layer.root_size = Size(s, "disk.rootSize", 16ull << 20);
        }
      }
    }
  }
}

void LayerParser::ParseFormats(const YAML::Node& n, Layer& layer) {
  std::vector<Format> formats;
  for (const auto& item : Seq(n, "formats")) {
    auto s = String(item, "a format");
    if (!s) continue;
    static const std::vector<std::string> kKnown{"raw", "iso", "pxe", "qcow2"};
    if (auto f = ParseFormatName(*s)) {
      formats.push_back(*f);
    } else {
      auto guess = ClosestMatch(*s, kKnown);
      diags_.Error(At(item), "unknown format '" + *s + "'",
                   guess ? "did you mean '" + *guess + "'?" : "formats are: raw, iso, pxe, qcow2");
    }
  }
  if (n.IsSequence() && n.size() == 0) {
    diags_.Error(At(n), "'formats' is empty, so the build would make nothing",
                 "list at least one format, such as [raw]");
  }
  layer.formats = formats;
}

}  // namespace sprout
