// LayerParser's sections: backup, formats, files, images and the cluster settings.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "oci/manifest.h"
#include "oci/reference.h"
#include "profile/layer.h"
#include "util/text.h"

namespace sprout {

namespace fs = std::filesystem;

void LayerParser::ParseBackup(const YAML::Node& n, Layer& layer) {
  if (!ExpectMap(n, "backup")) return;
  CheckKeys(n, "'backup'", {"dir", "interval", "keep"});
  BackupProfile b;
  b.present = true;
  bool ok = true;
  if (auto d = n["dir"]) {
    if (auto s = String(d, "backup.dir")) {
      if (s->starts_with("nfs://") ? s->find('?') != std::string::npos || s->find('@') != std::string::npos
                                   : !s->starts_with("/")) {
        diags_.Error(At(d),
                     "'backup.dir' must be an absolute folder on the node or nfs://HOST/PATH with nothing after "
                     "the path; got '" +
                         *s + "'",
                     "write e.g. /var/lib/sprout/backups or nfs://198.18.0.5/backups; a share's uid/gid go in "
                     "each node's sprout.backup-dir, not in the image");
        ok = false;
      } else {
        b.dir = *s;
      }
    } else {
      ok = false;
    }
  }
  if (auto i = n["interval"]) {
    auto s = String(i, "backup.interval");
    auto v = s ? ParseDuration(*s) : std::nullopt;
    if (s && (!v || *v < 1)) {
      diags_.Error(At(i), "'backup.interval' must be a duration of at least 1 s; got '" + *s + "'",
                   "write seconds or a number with s, m, h or d, such as 3600 or 1h");
    }
    if (v && *v >= 1) {
      b.interval = *v;
    } else {
      ok = false;
    }
  }
  if (auto k = n["keep"]) {
    auto s = String(k, "backup.keep");
    int v = 0;
    bool number = s && !s->empty() && s->size() < 6 &&
                  std::all_of(s->begin(), s->end(), [](char c) { return c >= '0' && c <= '9'; });
    if (number) v = std::stoi(*s);
    if (s && v < 1) {
      diags_.Error(At(k), "'backup.keep' must be a whole number of bundles, at least 1; got '" + *s + "'",
                   "write e.g. 'keep: 7'");
    }
    if (v >= 1) {
      b.keep = v;
    } else {
      ok = false;
    }
  }
  if (ok) layer.backup = b;
}

std::optional<std::int64_t> LayerParser::ParseDuration(const std::string& s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  std::int64_t unit = 1;
  std::string digits = s;
  switch (s.back()) {
    case 's':
      unit = 1;
      break;
    case 'm':
      unit = 60;
      break;
    case 'h':
      unit = 3600;
      break;
    case 'd':
      unit = 86400;
      break;
    default:
      break;
  }
  if (s.back() < '0' || s.back() > '9') digits.pop_back();
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(digits) * unit;
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

void LayerParser::ParseFile(const YAML::Node& item, Layer& layer) {
  if (!ExpectMap(item, "files[]")) return;
  CheckKeys(item, "a 'files' entry", {"path", "source", "content", "url", "sha256", "mode"});
  ProfileFile f;
  f.where = At(item);
  bool ok = true;
  if (auto p = item["path"]) {
    auto s = String(p, "files[].path");
    if (!s) {
      ok = false;
    } else if (s->empty() || s->front() != '/' || s->find("/../") != std::string::npos || s->ends_with("/..")) {
      diags_.Error(At(p), "'path' must be an absolute path inside the image, without '..'; got '" + *s + "'",
                   "write it as it appears on the booted node, such as /etc/motd");
      ok = false;
    } else if (s->starts_with("/var/") || *s == "/var") {
      diags_.Error(At(p), "'" + *s + "' lies under /var, which is the node's state partition, not the root",
                   "put defaults under /usr/share/factory/var/...; sprout copies them into /var at first boot");
      ok = false;
    } else {
      f.path = *s;
    }
  } else {
    diags_.Error(At(item), "a 'files' entry needs a 'path'", "add 'path: /where/on/the/node'");
    ok = false;
  }
  auto src = item["source"];
  auto content = item["content"];
  auto url = item["url"];
  if (!ParseFetched(item, f)) ok = false;
  if ((src ? 1 : 0) + (content ? 1 : 0) + (url ? 1 : 0) > 1) {
    diags_.Error(At(item), "a 'files' entry takes one of 'source', 'url' or 'content'", "keep one of them");
    ok = false;
  } else if (url) {
    // ParseFetched took it.
  } else if (src) {
    if (auto s = String(src, "files[].source")) {
      f.source = Resolve(*s);
      std::error_code ec;
      if (!fs::is_regular_file(f.source, ec)) {
        diags_.Error(At(src), "source file '" + *s + "' does not exist (looked for " + f.source.string() + ")",
                     "relative paths start at the profile's folder");
        ok = false;
      }
    } else {
      ok = false;
    }
  } else if (content) {
    if (auto s = String(content, "files[].content")) {
      f.content = *s;
    } else {
      ok = false;
    }
  } else {
    diags_.Error(At(item),
                 "a 'files' entry needs 'source' (a file next to the profile), 'url' (with 'sha256') or 'content' "
                 "(inline text)",
                 "add 'content: |' followed by the text, indented");
    ok = false;
  }
  if (auto m = item["mode"]) {
    if (auto s = String(m, "files[].mode")) {
      bool octal = !s->empty() && s->size() <= 4 &&
                   std::all_of(s->begin(), s->end(), [](char c) { return c >= '0' && c <= '7'; });
      if (octal) {
        f.mode = static_cast<std::uint32_t>(std::stoul(*s, nullptr, 8));
      } else {
        diags_.Error(At(m), "'mode' must be octal permissions such as 0644 or 0755; got '" + *s + "'",
                     "write the mode in octal, as chmod takes it");
        ok = false;
      }
    }
  }
  if (ok) layer.files.push_back(std::move(f));
}

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

bool LayerParser::ParseFetched(const YAML::Node& item, ProfileFile& f) {
  bool ok = true;
  if (auto h = item["sha256"]) {
    if (auto s = String(h, "sha256")) {
      std::string v = *s;
      if (v.rfind("sha256:", 0) == 0) v = v.substr(7);
      bool hex = v.size() == 64 && std::all_of(v.begin(), v.end(),
                                               [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
      if (hex) {
        f.sha256 = v;
      } else {
        diags_.Error(At(h), "'sha256' must be 64 lower-case hex digits; got '" + *s + "'",
                     "take it from 'sha256sum FILE'");
        ok = false;
      }
    }
  }
  if (auto u = item["url"]) {
    if (auto s = String(u, "url")) {
      if (!s->starts_with("http://") && !s->starts_with("https://") && !s->starts_with("file://")) {
        diags_.Error(At(u), "'url' must start with http://, https:// or file://; got '" + *s + "'",
                     "for a file next to the profile, use 'source:' instead");
        ok = false;
      } else {
        f.url = *s;
      }
      if (!item["sha256"]) {
        diags_.Error(At(u), "a fetched file needs its 'sha256'",
                     "add 'sha256: <64 hex digits>' so the build can check what it fetched");
        ok = false;
      }
    } else {
      ok = false;
    }
  }
  return ok;
}

void LayerParser::ParseCluster(const YAML::Node& root, Layer& layer) {
  if (auto n = root["shoot"]) {
    if (auto s = String(n, "shoot")) {
      fs::path p = Resolve(*s);
      std::error_code ec;
      if (!fs::is_regular_file(p, ec)) {
        diags_.Error(At(n), "Shoot manifest '" + *s + "' does not exist (looked for " + p.string() + ")",
                     "relative paths start at the profile's folder");
      } else {
        layer.shoot = p;
        layer.shoot_where = At(n);
      }
    }
  }
  if (auto n = root["staticPods"]) {
    layer.static_pods = Folders(n, "staticPods", "an item of staticPods", "staticPods folder",
                                "a folder of Pod manifests (NAME.yaml) that replace or add to sprout's templates");
  }
  if (auto n = root["withoutStaticPods"]) {
    for (const auto& item : Seq(n, "withoutStaticPods")) {
      auto s = String(item, "an item of withoutStaticPods");
      if (s) layer.without_static_pods.push_back(*s);
    }
  }
  if (auto n = root["podHost"]) {
    if (auto s = String(n, "podHost")) {
      if (*s == "podman") {
        layer.pod_host = PodHost::kPodman;
      } else if (*s == "kubelet") {
        layer.pod_host = PodHost::kKubelet;
      } else {
        diags_.Error(At(n), "'podHost' must be 'podman' or 'kubelet'; got '" + *s + "'",
                     "podman runs the static pods with podman-kube@.service; kubelet needs 'kubelet:' too");
      }
    }
  }
  if (auto n = root["backup"]) ParseBackup(n, layer);
  if (auto n = root["kubelet"]) {
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
}

}  // namespace sprout
