#include "image/inputs.h"

#include <nlohmann/json.hpp>

#include "shoot/shoot.h"

namespace sprout {

namespace fs = std::filesystem;

Result<std::string> InputsJson(const Profile& profile, std::int64_t epoch, const std::string& base_id,
                               const DigestFn& digest) {
  Profile p = profile;
  p.source_date_epoch = epoch;
  auto j = nlohmann::ordered_json::parse(ProfileToJson(p));
  std::string error;
  auto of = [&](const fs::path& path) -> std::string {
    auto d = digest(path);
    if (!d) {
      if (error.empty()) error = d.error();
      return "";
    }
    return *d;
  };
  j["base"] = base_id;
  for (std::size_t i = 0; i < p.overlays.size(); ++i) j["overlays"][i] = of(p.overlays[i]);
  for (std::size_t i = 0; i < p.files.size(); ++i) {
    const ProfileFile& f = p.files[i];
    auto& e = j["files"][i];
    if (f.content || !f.url.empty()) continue;  // the content, or the url's pinned sha256, is there already
    e.erase("source");
    e["sha256"] = of(f.source);
  }
  for (std::size_t i = 0; i < p.images.size(); ++i) {
    const ProfileImage& img = p.images[i];
    auto& e = j["images"][i];
    e.erase("credentials");
    if (img.source.empty()) continue;  // a registry: the pulled digests are in manifest.json's "images"
    auto colon = img.source.find(':');
    e["source"] = img.source.substr(0, colon + 1) + of(img.source.substr(colon + 1));
  }
  for (std::size_t i = 0; i < p.workloads.size(); ++i) {
    const ProfileWorkload& w = p.workloads[i];
    auto& e = j["workloads"][i];
    if (w.type == ProfileWorkload::Type::kChart) {
      e["chart"] = of(w.chart);
    } else {
      for (std::size_t k = 0; k < w.manifests.size(); ++k) e["manifests"][k] = of(w.manifests[k]);
    }
    for (std::size_t k = 0; k < w.values.size(); ++k) e["values"][k] = of(w.values[k]);
  }
  if (p.shoot) {
    j["shoot"] = nlohmann::ordered_json::parse(ShootToJson(*p.shoot));
  } else {
    j.erase("shoot");
  }
  for (std::size_t i = 0; i < p.static_pods.size(); ++i) j["staticPods"][i] = of(p.static_pods[i]);
  if (p.kubelet.present) {
    if (!p.kubelet.recipe.empty()) {
      j["kubelet"]["recipe"] = of(p.kubelet.recipe);
    } else if (p.kubelet.binary.url.empty()) {
      j["kubelet"]["binary"] = of(p.kubelet.binary.source);
    }
  }
  j.erase("extends");
  if (!error.empty()) return Fail("cannot digest the build's inputs: " + error);
  return j.dump(2);
}

}  // namespace sprout
