// The container images a profile preloads (`images:`, docs/images.md).
#include <yaml-cpp/yaml.h>

#include "oci/manifest.h"
#include "oci/reference.h"
#include "profile/layer.h"
#include "util/text.h"

namespace sprout {

namespace fs = std::filesystem;

template <typename Check>
std::optional<std::string> LayerParser::Checked(const YAML::Node& n, const std::string& what, Check check,
                                                const std::string& hint) {
  auto s = String(n, what);
  if (!s) return std::nullopt;
  if (auto parsed = check(*s); !parsed) {
    diags_.Error(At(n), parsed.error(), hint);
    return std::nullopt;
  }
  return s;
}

void LayerParser::ParseImage(const YAML::Node& item, Layer& layer) {
  if (!ExpectMap(item, "images[]")) return;
  CheckKeys(item, "an 'images' entry", {"ref", "source", "credentials", "platform"});
  ProfileImage img;
  img.where = At(item);
  bool ok = true;
  if (auto r = item["ref"]) {
    if (auto s = Checked(r, "images[].ref", oci::ParseReference,
                         "write it as registry[:port]/repository:tag or ...@sha256:DIGEST")) {
      img.ref = *s;
    } else {
      ok = false;
    }
  } else {
    diags_.Error(At(item), "an 'images' entry needs a 'ref'", "add 'ref: registry.example/etcd:3.5'");
    ok = false;
  }
  if (auto src = item["source"]) {
    if (auto s = String(src, "images[].source")) {
      auto colon = s->find(':');
      std::string kind = s->substr(0, colon);
      const std::vector<std::string> kinds{"recipe", "oci", "oci-archive", "docker-archive"};
      if (colon == std::string::npos || std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
        diags_.Error(At(src), "image source '" + *s + "' is not KIND:PATH with a known kind",
                     "use recipe:DIR, oci:DIR, oci-archive:TAR or docker-archive:TAR; leave it out to pull from "
                     "the registry");
        ok = false;
      } else {
        fs::path p = Resolve(s->substr(colon + 1));
        std::error_code ec;
        if (!fs::exists(p, ec)) {
          diags_.Error(At(src), "image source " + p.string() + " does not exist",
                       "relative paths start at the profile's folder");
          ok = false;
        }
        img.source = kind + ":" + p.string();
      }
    } else {
      ok = false;
    }
  }
  if (auto c = item["credentials"]) {
    if (auto s = String(c, "images[].credentials")) {
      img.credentials = Resolve(*s);
      std::error_code ec;
      if (!fs::is_regular_file(img.credentials, ec)) {
        diags_.Error(At(c), "credentials file " + img.credentials.string() + " does not exist",
                     "name a docker-style config.json; credentials are never written into the profile");
        ok = false;
      }
    } else {
      ok = false;
    }
  }
  if (auto pl = item["platform"]) {
    if (auto s = Checked(pl, "images[].platform", oci::ParsePlatform, "such as linux/amd64 or linux/arm64")) {
      img.platform = *s;
    } else {
      ok = false;
    }
  }
  if (ok) layer.images.push_back(std::move(img));
}

}  // namespace sprout
