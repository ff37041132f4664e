#include "profile/profile.h"

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

const char* StateEncryptionName(StateEncryption encryption) {
  return encryption == StateEncryption::kTpm2 ? "tpm2" : "none";
}

const char* WithoutTpmName(WithoutTpm without_tpm) { return without_tpm == WithoutTpm::kPlain ? "plain" : "refuse"; }

namespace {

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
  Location without_tpm_where;  // the withoutTpm in force, if one is
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
    for (auto& w : l.workloads) {  // a later profile replaces a workload with the same name
      auto same = std::find_if(p.workloads.begin(), p.workloads.end(),
                               [&](const ProfileWorkload& g) { return g.name == w.name; });
      if (same != p.workloads.end()) {
        *same = w;
      } else {
        p.workloads.push_back(w);
      }
    }
    if (l.esp_size) p.esp_size = *l.esp_size;
    if (l.state_size) p.state_size = *l.state_size;
    if (l.root_size) p.root_size = *l.root_size;
    if (l.state_encryption) {
      p.state_encryption = *l.state_encryption;
      // A child's `none` turns off what its parent asked for, withoutTpm with it.
      if (p.state_encryption == StateEncryption::kNone) {
        p.without_tpm = WithoutTpm::kRefuse;
        without_tpm_where = {};
      }
    }
    if (l.without_tpm) {
      p.without_tpm = *l.without_tpm;
      without_tpm_where = l.without_tpm_where;
    }
    if (l.source_date_epoch) p.source_date_epoch = *l.source_date_epoch;
    if (l.update_serial) p.update_serial = *l.update_serial;
    if (l.update_profile) p.update_profile = *l.update_profile;
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
    if (l.cert_validity) p.cert_validity_seconds = *l.cert_validity;
  }
  if (!p.shoot_file.empty()) {
    p.shoot = LoadShoot(p.shoot_file, diags);
  }
  if (p.pod_host == PodHost::kKubelet && !p.kubelet.present && !layers.empty()) {
    diags.Error({fs::path(path).string(), 0, 0}, "'podHost: kubelet' needs a 'kubelet:' entry",
                "add 'kubelet:' with 'url' or 'source' and 'sha256' of the kubelet binary");
  }
  if (p.state_encryption == StateEncryption::kNone && !without_tpm_where.file.empty()) {
    diags.Error(without_tpm_where,
                "'disk.withoutTpm' only applies with 'disk.stateEncryption: tpm2', and the state is not encrypted",
                "add 'stateEncryption: tpm2' to encrypt the state partition (docs/secure-boot.md), or remove "
                "'withoutTpm'");
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
  // Only when on, so the record of a profile that does not ask stays as it was.
  if (p.state_encryption != StateEncryption::kNone) {
    j["disk"]["stateEncryption"] = StateEncryptionName(p.state_encryption);
    j["disk"]["withoutTpm"] = WithoutTpmName(p.without_tpm);
  }
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
  // Only when there are any, so the record of a profile without workloads stays as it was.
  if (!p.workloads.empty()) {
    j["workloads"] = nlohmann::json::array();
    for (const auto& w : p.workloads) {
      nlohmann::ordered_json e{{"name", w.name}};
      if (w.type == ProfileWorkload::Type::kChart) {
        e["chart"] = rel(w.chart);
        e["release"] = w.release;
      } else {
        e["manifests"] = nlohmann::json::array();
        for (const auto& m : w.manifests) e["manifests"].push_back(rel(m));
      }
      e["namespace"] = w.ns;
      if (!w.values.empty()) {
        e["values"] = nlohmann::json::array();
        for (const auto& v : w.values) e["values"].push_back(rel(v));
      }
      if (!w.set_json.empty()) e["set"] = nlohmann::ordered_json::parse(w.set_json);
      j["workloads"].push_back(e);
    }
  }
  j["reproducible"]["sourceDateEpoch"] = p.source_date_epoch;
  // Only when set, so the record (and the inputs, and the seed) of a profile that sets
  // neither stays as it was.
  if (p.update_serial) j["update"]["serial"] = *p.update_serial;
  if (!p.update_profile.empty()) j["update"]["profile"] = p.update_profile;
  if (!p.hostname.empty()) j["hostname"] = p.hostname;
  if (!p.shoot_file.empty()) j["shoot"] = rel(p.shoot_file);
  if (!p.without_static_pods.empty()) j["withoutStaticPods"] = p.without_static_pods;
  if (!p.static_pods.empty()) {
    j["staticPods"] = nlohmann::json::array();
    for (const auto& d : p.static_pods) j["staticPods"].push_back(rel(d));
  }
  j["podHost"] = p.pod_host == PodHost::kKubelet ? "kubelet" : "podman";
  if (p.backup.present) j["backup"] = {{"dir", p.backup.dir}, {"interval", p.backup.interval}, {"keep", p.backup.keep}};
  if (p.cert_validity_seconds != 0) j["certificates"]["validitySeconds"] = p.cert_validity_seconds;
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
