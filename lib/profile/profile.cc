#include "profile/profile.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "oci/manifest.h"
#include "oci/reference.h"
#include "util/text.h"

namespace sprout {

namespace fs = std::filesystem;

const char* RoleName(Role role) { return role == Role::kWorker ? "worker" : "control-plane"; }

const char* ArchName(Arch arch) { return arch == Arch::kArm64 ? "arm64" : "amd64"; }

std::optional<Arch> ParseArchName(const std::string& name) {
  for (Arch a : {Arch::kAmd64, Arch::kArm64}) {
    if (name == ArchName(a)) return a;
  }
  return std::nullopt;
}

std::string ArchHint(const std::string& name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "x86_64" || lower == "x86-64" || lower == "x64" || lower == "amd64") {
    return "did you mean 'amd64'? sprout uses Debian's architecture names";
  }
  if (lower == "aarch64" || lower == "arm64" || lower == "armv8") {
    return "did you mean 'arm64'? sprout uses Debian's architecture names";
  }
  return "architectures are: amd64, arm64";
}

const char* FormatName(Format format) {
  switch (format) {
    case Format::kRaw:
      return "raw";
    case Format::kIso:
      return "iso";
    case Format::kPxe:
      return "pxe";
    case Format::kQcow2:
      return "qcow2";
  }
  return "raw";
}

std::optional<Format> ParseFormatName(const std::string& name) {
  for (Format f : {Format::kRaw, Format::kIso, Format::kPxe, Format::kQcow2}) {
    if (name == FormatName(f)) return f;
  }
  return std::nullopt;
}

namespace {

// Layer is what one profile file says by itself, before merging with what it extends.
struct Layer {
  fs::path file;
  std::optional<fs::path> extends;
  Location extends_where;
  std::optional<std::string> name, description, hostname;
  std::optional<fs::path> base;
  Location base_where;
  std::optional<Role> role;
  std::optional<Arch> arch;
  Location arch_where;
  std::optional<std::vector<Format>> formats;
  std::vector<std::string> cmdline;
  std::vector<fs::path> overlays;
  std::vector<ProfileFile> files;
  std::vector<ProfileImage> images;
  std::optional<std::uint64_t> esp_size, state_size, root_size;
  std::optional<std::int64_t> source_date_epoch;
  std::optional<fs::path> shoot;
  Location shoot_where;
  std::vector<fs::path> static_pods;
  std::vector<std::string> without_static_pods;
  std::optional<PodHost> pod_host;
  std::optional<KubeletSettings> kubelet;
  std::optional<BackupProfile> backup;
};

const char* KindName(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Null:
      return "nothing";
    default:
      return "an undefined value";
  }
}

// LayerParser turns one file's YAML into a Layer, recording every problem.
class LayerParser {
 public:
  // file is the name messages show; dir is the absolute folder relative paths start at.
  LayerParser(fs::path file, fs::path dir, Diagnostics& diags)
      : file_(std::move(file)), dir_(std::move(dir)), diags_(diags) {}

  Layer Parse(const YAML::Node& root) {
    Layer layer;
    layer.file = file_;
    if (!root.IsMap()) {
      diags_.Error(At(root),
                   std::string("a profile must be a mapping of settings, but this file holds ") + KindName(root),
                   "start with 'name: my-image' and see docs/profiles.md for every setting");
      return layer;
    }
    CheckKeys(root, "the profile",
              {"extends", "name",       "description",       "base",    "role",         "arch",     "formats",
               "kernel",  "disk",       "overlays",          "files",   "reproducible", "hostname", "images",
               "shoot",   "staticPods", "withoutStaticPods", "podHost", "kubelet",      "backup"});
    ParseCluster(root, layer);
    if (auto n = root["extends"]) {
      if (auto s = String(n, "extends")) {
        layer.extends = Resolve(*s);
        layer.extends_where = At(n);
      }
    }
    if (auto n = root["name"]) {
      if (auto s = String(n, "name")) {
        if (ValidName(*s)) {
          layer.name = *s;
        } else {
          diags_.Error(
              At(n),
              "'name' must be 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit; got '" + *s + "'",
              "the name ends up in file names and volume labels, so keep it plain, like 'edge-rack'");
        }
      }
    }
    if (auto n = root["description"]) layer.description = String(n, "description");
    if (auto n = root["hostname"]) {
      if (auto s = String(n, "hostname")) {
        if (ValidName(*s)) {
          layer.hostname = *s;
        } else {
          diags_.Error(At(n), "'hostname' must be a DNS label (a-z, 0-9, '-'); got '" + *s + "'",
                       "leave it out to have each node generate a unique hostname at first boot");
        }
      }
    }
    if (auto n = root["base"]) {
      if (auto s = String(n, "base")) {
        fs::path p = Resolve(*s);
        layer.base_where = At(n);
        std::error_code ec;
        if (!fs::exists(p, ec)) {
          diags_.Error(At(n), "base '" + *s + "' does not exist (looked for " + p.string() + ")",
                       "name a base recipe directory (like ../images/base), a root tarball, or a root directory; "
                       "relative paths start at the profile's folder");
        } else {
          layer.base = p;
        }
      }
    }
    if (auto n = root["role"]) {
      if (auto s = String(n, "role")) {
        if (*s == "control-plane") {
          layer.role = Role::kControlPlane;
        } else if (*s == "worker") {
          layer.role = Role::kWorker;
        } else {
          auto guess = ClosestMatch(*s, {"control-plane", "worker"});
          diags_.Error(At(n), "'role' must be 'control-plane' or 'worker'; got '" + *s + "'",
                       guess ? "did you mean '" + *guess + "'?"
                             : "control-plane nodes run etcd and the API server; workers run only workloads");
        }
      }
    }
    if (auto n = root["arch"]) {
      if (auto s = String(n, "arch")) {
        if (auto a = ParseArchName(*s)) {
          layer.arch = *a;
          layer.arch_where = At(n);
        } else {
          diags_.Error(At(n), "'arch' must be 'amd64' or 'arm64'; got '" + *s + "'", ArchHint(*s));
        }
      }
    }
    if (auto n = root["formats"]) ParseFormats(n, layer);
    if (auto n = root["kernel"]) {
      if (ExpectMap(n, "kernel")) {
        CheckKeys(n, "'kernel'", {"cmdline"});
        if (auto c = n["cmdline"]) {
          for (auto& s : StringList(c, "kernel.cmdline")) layer.cmdline.push_back(s);
        }
      }
    }
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
    if (auto n = root["overlays"]) {
      for (const auto& item : Seq(n, "overlays")) {
        auto s = String(item, "an overlay");
        if (!s) continue;
        fs::path p = Resolve(*s);
        std::error_code ec;
        if (!fs::is_directory(p, ec)) {
          diags_.Error(At(item), "overlay '" + *s + "' is not a directory (looked for " + p.string() + ")",
                       "an overlay is a folder whose tree is copied onto the root; relative paths start at the "
                       "profile's folder");
        } else {
          layer.overlays.push_back(p);
        }
      }
    }
    if (auto n = root["files"]) {
      for (const auto& item : Seq(n, "files")) ParseFile(item, layer);
    }
    if (auto n = root["images"]) {
      for (const auto& item : Seq(n, "images")) ParseImage(item, layer);
    }
    if (auto n = root["reproducible"]) {
      if (ExpectMap(n, "reproducible")) {
        CheckKeys(n, "'reproducible'", {"sourceDateEpoch"});
        if (auto s = n["sourceDateEpoch"]) {
          if (auto v = String(s, "reproducible.sourceDateEpoch")) {
            try {
              std::size_t used = 0;
              long long e = std::stoll(*v, &used);
              if (used != v->size() || e < 0) throw std::invalid_argument("bad");
              layer.source_date_epoch = e;
            } catch (const std::exception&) {
              diags_.Error(
                  At(s), "'reproducible.sourceDateEpoch' must be a non-negative number of seconds; got '" + *v + "'",
                  "use a Unix time such as 1700000000; the SOURCE_DATE_EPOCH environment variable overrides it");
            }
          }
        }
      }
    }
    return layer;
  }

 private:
  Location At(const YAML::Node& n) const {
    auto m = n.Mark();
    if (m.line < 0) return {file_.string(), 0, 0};
    return {file_.string(), m.line + 1, m.column + 1};
  }

  fs::path Resolve(const std::string& s) const {
    fs::path p(s);
    return (p.is_absolute() ? p : dir_ / p).lexically_normal();
  }

  static bool ValidName(const std::string& s) {
    if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
    return std::all_of(s.begin(), s.end(),
                       [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
  }

  void CheckKeys(const YAML::Node& map, const std::string& context, const std::vector<std::string>& allowed) {
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      if (!it->first.IsScalar()) {
        diags_.Error(At(it->first), "keys in " + context + " must be plain words", "write 'key: value'");
        continue;
      }
      const std::string key = it->first.Scalar();
      if (!seen.insert(key).second) {
        diags_.Error(At(it->first), "'" + key + "' appears twice in " + context,
                     "keep one of them; YAML keeps only one");
        continue;
      }
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      auto guess = ClosestMatch(key, allowed);
      diags_.Error(At(it->first), "unknown key '" + key + "' in " + context,
                   guess ? "did you mean '" + *guess + "'?" : "allowed keys here: " + Join(allowed, ", "));
    }
  }

  bool ExpectMap(const YAML::Node& n, const std::string& what) {
    if (n.IsMap()) return true;
    diags_.Error(At(n), "'" + what + "' must be a mapping of settings, but it is " + KindName(n),
                 "indent its settings below it, as in docs/profiles.md");
    return false;
  }

  std::optional<std::string> String(const YAML::Node& n, const std::string& what) {
    if (n.IsScalar()) return n.Scalar();
    diags_.Error(At(n), "'" + what + "' must be a single value, but it is " + KindName(n),
                 n.IsNull() ? "give it a value, or remove the key" : "write it on one line, as 'key: value'");
    return std::nullopt;
  }

  std::vector<YAML::Node> Seq(const YAML::Node& n, const std::string& what) {
    std::vector<YAML::Node> out;
    if (!n.IsSequence()) {
      diags_.Error(At(n), "'" + what + "' must be a list, but it is " + KindName(n),
                   "write one item per line, each starting with '- '");
      return out;
    }
    for (const auto& item : n) out.push_back(item);
    return out;
  }

  std::vector<std::string> StringList(const YAML::Node& n, const std::string& what) {
    std::vector<std::string> out;
    for (const auto& item : Seq(n, what)) {
      if (auto s = String(item, "an item of " + what)) out.push_back(*s);
    }
    return out;
  }

  std::optional<std::uint64_t> Size(const YAML::Node& n, const std::string& what, std::uint64_t minimum) {
    auto s = String(n, what);
    if (!s) return std::nullopt;
    auto v = ParseSize(*s);
    if (!v) {
      diags_.Error(At(n), "'" + what + "' must be a size; got '" + *s + "'",
                   "write a number with a unit, such as 64MiB or 2GiB");
      return std::nullopt;
    }
    if (*v < minimum) {
      diags_.Error(At(n), "'" + what + "' is " + HumanSize(*v) + ", below the minimum of " + HumanSize(minimum),
                   "raise it to at least " + HumanSize(minimum));
      return std::nullopt;
    }
    return v;
  }

  // ParseBackup reads `backup: {dir, interval, keep}`.
  void ParseBackup(const YAML::Node& n, Layer& layer) {
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

  // ParseDuration reads seconds ("3600") or a number with one unit: s, m, h, d.
  static std::optional<std::int64_t> ParseDuration(const std::string& s) {
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

  void ParseFormats(const YAML::Node& n, Layer& layer) {
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

  void ParseFile(const YAML::Node& item, Layer& layer) {
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

  // ParseImage reads one `images:` entry (docs/images.md).
  void ParseImage(const YAML::Node& item, Layer& layer) {
    if (!ExpectMap(item, "images[]")) return;
    CheckKeys(item, "an 'images' entry", {"ref", "source", "credentials", "platform"});
    ProfileImage img;
    img.where = At(item);
    bool ok = true;
    if (auto r = item["ref"]) {
      if (auto s = String(r, "images[].ref")) {
        if (auto parsed = oci::ParseReference(*s); !parsed) {
          diags_.Error(At(r), parsed.error(), "write it as registry[:port]/repository:tag or ...@sha256:DIGEST");
          ok = false;
        } else {
          img.ref = *s;
        }
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
      if (auto s = String(pl, "images[].platform")) {
        if (auto p = oci::ParsePlatform(*s); !p) {
          diags_.Error(At(pl), p.error(), "such as linux/amd64 or linux/arm64");
          ok = false;
        } else {
          img.platform = *s;
        }
      } else {
        ok = false;
      }
    }
    if (ok) layer.images.push_back(std::move(img));
  }

  // ParseFetched reads the 'url' and 'sha256' of a files entry (or of kubelet).
  bool ParseFetched(const YAML::Node& item, ProfileFile& f) {
    bool ok = true;
    if (auto h = item["sha256"]) {
      if (auto s = String(h, "sha256")) {
        std::string v = *s;
        if (v.rfind("sha256:", 0) == 0) v = v.substr(7);
        bool hex = v.size() == 64 && std::all_of(v.begin(), v.end(), [](char c) {
                     return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                   });
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

  void ParseCluster(const YAML::Node& root, Layer& layer) {
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
      for (const auto& item : Seq(n, "staticPods")) {
        auto s = String(item, "an item of staticPods");
        if (!s) continue;
        fs::path p = Resolve(*s);
        std::error_code ec;
        if (!fs::is_directory(p, ec)) {
          diags_.Error(At(item), "staticPods folder '" + *s + "' is not a directory (looked for " + p.string() + ")",
                       "a folder of Pod manifests (NAME.yaml) that replace or add to sprout's templates");
        } else {
          layer.static_pods.push_back(p);
        }
      }
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

  fs::path file_;
  fs::path dir_;
  Diagnostics& diags_;
};

// RealProfilePath is a profile's absolute path with symlinks resolved: relative paths in
// a profile start at the folder the file really sits in, however it was reached.
fs::path RealProfilePath(const fs::path& path) {
  std::error_code ec;
  fs::path real = fs::weakly_canonical(fs::absolute(path), ec);
  return ec ? fs::absolute(path).lexically_normal() : real;
}

// LoadLayers reads path and its ancestors, root first.
std::vector<Layer> LoadLayers(const fs::path& path, Diagnostics& diags) {
  std::vector<Layer> layers;
  std::vector<fs::path> seen;
  fs::path current = RealProfilePath(path);
  Location from;  // the `extends:` that led here
  for (;;) {
    if (std::find(seen.begin(), seen.end(), current) != seen.end()) {
      diags.Error(from, "'extends' makes a cycle: " + current.string() + " is already in the chain",
                  "a profile may extend another only if that one does not lead back to it");
      break;
    }
    seen.push_back(current);
    std::error_code ec;
    if (!fs::is_regular_file(current, ec)) {
      if (from.file.empty()) {
        diags.Error({path.string(), 0, 0}, "cannot read the profile: no such file",
                    "give the path of a .yaml profile, such as profiles/default.yaml");
      } else {
        diags.Error(from, "the profile to extend, " + current.string() + ", does not exist",
                    "relative paths in 'extends' start at this profile's folder");
      }
      break;
    }
    YAML::Node root;
    // Show paths as the user gave them where possible.
    fs::path shown = current.lexically_relative(fs::current_path());
    if (shown.empty() || shown.string().starts_with("..")) shown = current;
    try {
      root = YAML::LoadFile(current.string());
    } catch (const YAML::ParserException& e) {
      diags.Error({shown.string(), e.mark.line + 1, e.mark.column + 1}, "this is not valid YAML: " + e.msg,
                  "check the indentation and quoting around this place");
      break;
    } catch (const YAML::Exception& e) {
      diags.Error({shown.string(), 0, 0}, std::string("cannot read the profile: ") + e.what(), "");
      break;
    }
    LayerParser parser(shown, current.parent_path(), diags);
    Layer layer = parser.Parse(root);
    layer.file = current;
    auto next = layer.extends;
    from = layer.extends_where;
    layers.push_back(std::move(layer));
    if (!next) break;
    current = RealProfilePath(*next);
  }
  std::reverse(layers.begin(), layers.end());
  return layers;
}

}  // namespace

std::optional<Profile> LoadProfile(const fs::path& path, Diagnostics& diags) {
  int errors_before = diags.error_count();
  std::vector<Layer> layers = LoadLayers(path, diags);
  Profile p;
  p.file = RealProfilePath(path);
  Location shoot_where;
  bool have_name = false, have_base = false;
  for (auto& l : layers) {
    p.chain.push_back(l.file);
    if (l.name) {
      p.name = *l.name;
      have_name = true;
    }
    if (l.description) p.description = *l.description;
    if (l.hostname) p.hostname = *l.hostname;
    if (l.base) {
      p.base = *l.base;
      p.base_where = l.base_where;
      have_base = true;
    }
    if (l.role) p.role = *l.role;
    if (l.arch) {
      p.arch = *l.arch;
      p.arch_where = l.arch_where;
    }
    if (l.formats) p.formats = *l.formats;
    p.cmdline.insert(p.cmdline.end(), l.cmdline.begin(), l.cmdline.end());
    p.overlays.insert(p.overlays.end(), l.overlays.begin(), l.overlays.end());
    for (auto& f : l.files) {
      auto same = std::find_if(p.files.begin(), p.files.end(), [&](const ProfileFile& g) { return g.path == f.path; });
      if (same != p.files.end()) {
        *same = f;
      } else {
        p.files.push_back(f);
      }
    }
    for (auto& img : l.images) {  // a later profile replaces an image with the same ref
      auto same =
          std::find_if(p.images.begin(), p.images.end(), [&](const ProfileImage& g) { return g.ref == img.ref; });
      if (same != p.images.end()) {
        *same = img;
      } else {
        p.images.push_back(img);
      }
    }
    if (l.esp_size) p.esp_size = *l.esp_size;
    if (l.state_size) p.state_size = *l.state_size;
    if (l.root_size) p.root_size = *l.root_size;
    if (l.source_date_epoch) p.source_date_epoch = *l.source_date_epoch;
    if (l.shoot) {
      p.shoot_file = *l.shoot;
      shoot_where = l.shoot_where;
    }
    p.static_pods.insert(p.static_pods.end(), l.static_pods.begin(), l.static_pods.end());
    p.without_static_pods.insert(p.without_static_pods.end(), l.without_static_pods.begin(),
                                 l.without_static_pods.end());
    if (l.pod_host) p.pod_host = *l.pod_host;
    if (l.kubelet) p.kubelet = *l.kubelet;
    if (l.backup) p.backup = *l.backup;
  }
  if (!p.shoot_file.empty()) {
    p.shoot = LoadShoot(p.shoot_file, diags);
  }
  if (p.pod_host == PodHost::kKubelet && !p.kubelet.present && !layers.empty()) {
    diags.Error({fs::path(path).string(), 0, 0}, "'podHost: kubelet' needs a 'kubelet:' entry",
                "add 'kubelet:' with 'url' or 'source' and 'sha256' of the kubelet binary");
  }
  if (!layers.empty() && diags.error_count() == errors_before) {
    std::string top = fs::path(path).string();
    if (!have_name)
      diags.Error({top, 0, 0}, "the profile has no 'name'", "add 'name: my-image' (or extend a profile that has one)");
    if (!have_base) {
      diags.Error({top, 0, 0}, "the profile has no 'base'",
                  "add 'base: ../images/base' to build on sprout's Debian base recipe");
    }
  }
  if (diags.error_count() != errors_before) return std::nullopt;
  return p;
}

std::string RecordedPath(const fs::path& path, const fs::path& dir) {
  if (path.empty()) return "";
  fs::path r = path.lexically_normal().lexically_relative(dir.lexically_normal());
  // Only a path that is not absolute while dir is (a caller's slip) has no relative form;
  // it is recorded by name alone rather than by where it sits on the host.
  if (r.empty()) return path.filename().string();
  return r.string();
}

std::string ProfileToJson(const Profile& p) {
  const fs::path base_dir = p.file.parent_path();
  auto rel = [&](const fs::path& x) { return RecordedPath(x, base_dir); };
  nlohmann::ordered_json j;
  j["name"] = p.name;
  j["description"] = p.description;
  j["base"] = rel(p.base);
  j["role"] = RoleName(p.role);
  j["arch"] = ArchName(p.arch);
  j["formats"] = nlohmann::json::array();
  for (auto f : p.formats) j["formats"].push_back(FormatName(f));
  j["kernel"]["cmdline"] = p.cmdline;
  j["disk"]["espSize"] = p.esp_size;
  j["disk"]["stateSize"] = p.state_size;
  j["disk"]["rootSize"] = p.root_size;
  j["overlays"] = nlohmann::json::array();
  for (const auto& o : p.overlays) j["overlays"].push_back(rel(o));
  j["files"] = nlohmann::json::array();
  for (const auto& f : p.files) {
    nlohmann::ordered_json e;
    e["path"] = f.path;
    if (f.content) {
      e["content"] = *f.content;
    } else if (!f.url.empty()) {
      e["url"] = f.url;
    } else {
      e["source"] = rel(f.source);
    }
    if (!f.sha256.empty()) e["sha256"] = f.sha256;
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", f.mode);
    e["mode"] = mode;
    j["files"].push_back(e);
  }
  if (!p.images.empty()) {
    j["images"] = nlohmann::json::array();
    for (const auto& img : p.images) {
      nlohmann::ordered_json e{{"ref", img.ref}};
      if (!img.source.empty()) {
        auto colon = img.source.find(':');
        e["source"] = img.source.substr(0, colon + 1) + rel(img.source.substr(colon + 1));
      }
      if (!img.credentials.empty()) e["credentials"] = rel(img.credentials);
      if (!img.platform.empty()) e["platform"] = img.platform;
      j["images"].push_back(e);
    }
  }
  j["reproducible"]["sourceDateEpoch"] = p.source_date_epoch;
  if (!p.hostname.empty()) j["hostname"] = p.hostname;
  if (!p.shoot_file.empty()) j["shoot"] = rel(p.shoot_file);
  if (!p.without_static_pods.empty()) j["withoutStaticPods"] = p.without_static_pods;
  if (!p.static_pods.empty()) {
    j["staticPods"] = nlohmann::json::array();
    for (const auto& d : p.static_pods) j["staticPods"].push_back(rel(d));
  }
  j["podHost"] = p.pod_host == PodHost::kKubelet ? "kubelet" : "podman";
  if (p.backup.present) j["backup"] = {{"dir", p.backup.dir}, {"interval", p.backup.interval}, {"keep", p.backup.keep}};
  if (p.kubelet.present) {
    if (!p.kubelet.recipe.empty()) {
      j["kubelet"]["recipe"] = rel(p.kubelet.recipe);
    } else {
      j["kubelet"]["binary"] = p.kubelet.binary.url.empty() ? rel(p.kubelet.binary.source) : p.kubelet.binary.url;
      j["kubelet"]["sha256"] = p.kubelet.binary.sha256;
    }
  }
  j["extends"] = nlohmann::json::array();
  for (const auto& c : p.chain) j["extends"].push_back(rel(c));
  return j.dump(2);
}

}  // namespace sprout
