#include "image/manifest.h"

#include <nlohmann/json.hpp>

namespace sprout {

namespace {

nlohmann::ordered_json IdentityJson(const BuildIdentity& id) {
  return {{"serial", id.serial}, {"profile", id.profile}, {"role", id.role}, {"cluster", id.cluster}};
}

}  // namespace

BuildIdentity IdentityOfBuild(const Profile& p, std::int64_t epoch) {
  return {p.update_serial.value_or(epoch), p.update_profile.empty() ? p.name : p.update_profile, RoleName(p.role),
          p.shoot ? p.shoot->name : kDefaultClusterName};
}

std::string ImageMetadata(const std::string& profile_json, const BuildIdentity& identity, const std::string& root_hash,
                          const std::string& kernel, const std::string& seed, const std::string& images_json,
                          const std::string& workloads_json) {
  nlohmann::ordered_json j;
  j["sprout"] = SPROUT_VERSION;
  j["profile"] = nlohmann::json::parse(profile_json);
  j["update"] = IdentityJson(identity);
  j["rootHash"] = root_hash;
  j["kernel"] = kernel;
  j["seed"] = seed;
  j["images"] = nlohmann::json::parse(images_json.empty() ? "[]" : images_json);
  if (!workloads_json.empty()) j["workloads"] = nlohmann::ordered_json::parse(workloads_json);
  return j.dump(2) + "\n";
}

std::string SbomNamespace(const std::string& profile_name, const std::string& seed) {
  return "https://sprout.invalid/spdx/" + profile_name + "/" + seed;
}

std::string ManifestJson(const ManifestInputs& in) {
  nlohmann::ordered_json manifest;
  manifest["sprout"] = SPROUT_VERSION;
  manifest["profile"] = nlohmann::json::parse(in.profile_json);
  manifest["update"] = IdentityJson(in.identity);
  manifest["base"] = in.base_id;
  manifest["kernel"] = in.kernel_version;
  manifest["seed"] = in.seed;
  if (!in.inputs_json.empty()) manifest["inputs"] = nlohmann::json::parse(in.inputs_json);
  manifest["rootHash"] = in.plan->root_hash;
  manifest["disk"] = {{"diskGuid", in.plan->disk_guid.ToString()},
                      {"rootPartUuid", in.plan->root_uuid.ToString()},
                      {"verityPartUuid", in.plan->verity_uuid.ToString()},
                      {"configPartUuid", in.plan->config_uuid.ToString()},
                      {"statePartUuid", in.plan->state_uuid.ToString()}};
  manifest["images"] = nlohmann::json::parse(in.images_json);
  manifest["sbom"] = {
      {"file", in.sbom_file}, {"format", "SPDX-2.3"}, {"packages", in.sbom_packages}, {"sha256", in.sbom_sha256}};
  for (const auto& o : in.outputs) {
    nlohmann::ordered_json out = {{"file", o.file}, {"size", o.size}, {"sha256", o.sha256}};
    if (o.data_bytes != 0) out["dataBytes"] = o.data_bytes;
    if (!o.extents.empty()) {
      auto& runs = out["dataExtents"] = nlohmann::ordered_json::array();
      for (const auto& e : o.extents) runs.push_back({e.offset, e.length});
    }
    manifest["outputs"].push_back(out);
  }
  return manifest.dump(2) + "\n";
}

std::string RenderSha256Sums(const std::vector<SumLine>& lines) {
  std::string out;
  for (const auto& l : lines) out += l.sha256 + "  " + l.file + "\n";
  return out;
}

}  // namespace sprout
