// What goes onto the root besides the base: overlays (folders) and files (from the
// profile's folder or fetched by URL with their sha256).
#include <yaml-cpp/yaml.h>

#include "profile/layer.h"
#include "util/text.h"

namespace sprout {

namespace fs = std::filesystem;

void LayerParser::ParseFiles(const YAML::Node& root, Layer& layer) {
  if (auto n = root["overlays"]) {
    layer.overlays = Folders(n, "overlays", "an overlay", "overlay",
                             "an overlay is a folder whose tree is copied onto the root; relative paths start at the "
                             "profile's folder");
  }
  if (auto n = root["files"]) {
    for (const auto& item : Seq(n, "files")) ParseFile(item, layer);
  }
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

}  // namespace sprout
