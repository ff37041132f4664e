// The image's media and disk: formats, the sizes of the ESP, state and root partitions,
// and whether the state is encrypted at first boot (docs/secure-boot.md).
#include <yaml-cpp/yaml.h>

#include "profile/layer.h"
#include "util/text.h"

namespace sprout {

namespace fs = std::filesystem;

void LayerParser::ParseDisk(const YAML::Node& root, Layer& layer) {
  if (auto n = root["formats"]) ParseFormats(n, layer);
  if (auto n = root["disk"]) {
    if (ExpectMap(n, "disk")) {
      CheckKeys(n, "'disk'", {"espSize", "stateSize", "rootSize", "stateEncryption", "withoutTpm"});
      if (auto s = n["espSize"]) layer.esp_size = Size(s, "disk.espSize", 32ull << 20);
      if (auto s = n["stateSize"]) layer.state_size = Size(s, "disk.stateSize", 16ull << 20);
      if (auto s = n["rootSize"]) {
        if (s.IsScalar() && s.Scalar() == "auto") {
          layer.root_size = 0;
        } else {
          layer.root_size = Size(s, "disk.rootSize", 16ull << 20);
        }
      }
      if (auto s = n["stateEncryption"]) {
        layer.state_encryption = OneOf<StateEncryption>(
            s, "disk.stateEncryption", {{"none", StateEncryption::kNone}, {"tpm2", StateEncryption::kTpm2}},
            "tpm2 encrypts the state partition at first boot with a key sealed to the node's TPM; none keeps it "
            "plain ext4");
      }
      if (auto s = n["withoutTpm"]) {
        layer.without_tpm =
            OneOf<WithoutTpm>(s, "disk.withoutTpm", {{"refuse", WithoutTpm::kRefuse}, {"plain", WithoutTpm::kPlain}},
                              "what a node with no TPM does: refuse to start, or run with plain "
                              "state and a warning");
        layer.without_tpm_where = At(s);
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
