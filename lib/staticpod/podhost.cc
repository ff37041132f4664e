#include "staticpod/podhost.h"

#include <algorithm>
#include <cstdio>
#include <regex>

#include "util/fs.h"

namespace sprout {

namespace fs = std::filesystem;

std::string SystemdEscapePath(std::string_view path) {
  // Collapse duplicate slashes and strip the leading and trailing ones, as systemd does.
  std::string norm;
  for (char c : path) {
    if (c == '/' && (norm.empty() || norm.back() == '/')) continue;
    norm += c;
  }
  while (!norm.empty() && norm.back() == '/') norm.pop_back();
  if (norm.empty()) return "-";
  std::string out;
  for (size_t i = 0; i < norm.size(); ++i) {
    const char c = norm[i];
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                       (c == '.' && i > 0) || c == ':';
    if (c == '/') {
      out += '-';
    } else if (plain) {
      out += c;
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
      out += buf;
    }
  }
  return out;
}

std::string PodmanKubeUnit(const fs::path& manifest) {
  return "podman-kube@" + SystemdEscapePath(manifest.string()) + ".service";
}

Result<NodeManifests> WriteNodeManifests(const fs::path& templates_dir, const fs::path& out_dir,
                                         const StaticPodInput& in, bool for_podman,
                                         const std::vector<std::string>& only) {
  std::vector<fs::path> templates;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(templates_dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".yaml") templates.push_back(e.path());
  }
  if (ec) return Fail("cannot list the static-pod templates in " + templates_dir.string() + ": " + ec.message());
  std::sort(templates.begin(), templates.end());
  fs::create_directories(out_dir, ec);
  if (ec) return Fail("cannot create " + out_dir.string() + ": " + ec.message());
  const auto values = TemplateValues(in);
  static const std::regex kImage(R"(\{\{\s*(image_[A-Za-z0-9_]+)\s*\}\})");
  NodeManifests out;
  for (const auto& t : templates) {
    const std::string name = t.stem().string();
    if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
    auto text = ReadFile(t);
    if (!text) return Fail(text.error());
    std::string missing;
    for (std::sregex_iterator it(text->begin(), text->end(), kImage), end; it != end; ++it) {
      if (values.count((*it)[1].str()) == 0) missing = (*it)[1].str();
    }
    if (!missing.empty()) {
      out.skipped.push_back(name + ": no preloaded image (" + missing + ")");
      continue;
    }
    auto pod = RenderStaticPod(*text, in, t.string());
    if (!pod) return Fail(pod.error());
    std::string body = *pod;
    if (for_podman) {
      auto adapted = ForPodman(body);
      if (!adapted) return Fail(adapted.error());
      body = *adapted;
    }
    const fs::path target = out_dir / (name + ".yaml");
    auto before = ReadFile(target);
    if (!before || *before != body) out.changed.push_back(name);
    if (auto w = WriteFileAtomic(target, body, fs::perms(0600)); !w) return Fail(w.error());
    out.written.push_back({name, target});
  }
  return out;
}

}  // namespace sprout
