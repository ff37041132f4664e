// `kubelet:` the kubelet binary (a recipe, a URL or a file with its sha256) and its
// configuration.
#include <yaml-cpp/yaml.h>

#include "profile/layer.h"

namespace sprout {

namespace fs = std::filesystem;

void LayerParser::ParseKubelet(const YAML::Node& n, Layer& layer) {
  if (!ExpectMap(n, "kubelet")) return;
  CheckKeys(n, "'kubelet'", {"url", "source", "sha256", "config", "recipe"});
  KubeletSettings k;
  k.present = true;
  k.binary.path = "/usr/bin/kubelet";
  k.binary.mode = 0755;
  k.binary.where = At(n);
  bool ok = ParseFetched(n, k.binary);
  if (auto src = n["source"]) {
    if (auto s = String(src, "kubelet.source")) {
      k.binary.source = Resolve(*s);
      std::error_code ec;
      if (!fs::is_regular_file(k.binary.source, ec)) {
        diags_.Error(At(src), "kubelet binary '" + *s + "' does not exist",
                     "relative paths start at the profile's folder");
        ok = false;
      }
    }
    if (!n["sha256"]) {
      diags_.Error(At(src), "the kubelet binary needs its 'sha256'", "add 'sha256: <64 hex digits>'");
      ok = false;
    }
  }
  if (auto r = n["recipe"]) {
    if (auto s = String(r, "kubelet.recipe")) {
      k.recipe = Resolve(*s);
      std::error_code ec;
      if (!fs::is_regular_file(k.recipe / "host.sh", ec)) {
        diags_.Error(At(r), "kubelet recipe '" + *s + "' has no host.sh",
                     "name a folder like ../images/kubernetes, whose host.sh builds the host binaries");
        ok = false;
      }
    }
    if (n["url"] || n["source"]) {
      diags_.Error(At(r), "'kubelet' takes 'recipe' or 'url'/'source', not both", "keep one of them");
      ok = false;
    }
  } else if (!n["url"] && !n["source"]) {
    diags_.Error(At(n), "'kubelet' needs 'recipe', or 'url' or 'source' with 'sha256'",
                 "'recipe: ../images/kubernetes' compiles it from Debian's kubernetes source package");
    ok = false;
  }
  if (auto c = n["config"]) {
    if (ExpectMap(c, "kubelet.config")) {
      YAML::Emitter e;
      e << c;
      k.config_yaml = e.c_str();
    }
  }
  if (ok) layer.kubelet = k;
}

}  // namespace sprout
