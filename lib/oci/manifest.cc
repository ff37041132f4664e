#include "oci/manifest.h"

#include <nlohmann/json.hpp>

#include "oci/reference.h"
#include "util/text.h"

namespace sprout::oci {

namespace {

using nlohmann::json;

Result<Descriptor> ReadDescriptor(const json& j, const std::string& where) {
  if (!j.is_object()) return Fail(where + " is not an object");
  Descriptor d;
  if (auto it = j.find("mediaType"); it != j.end()) {
    if (!it->is_string()) return Fail(where + ".mediaType is not a string");
    d.media_type = it->get<std::string>();
  }
  auto dg = j.find("digest");
  if (dg == j.end() || !dg->is_string()) return Fail(where + " has no digest");
  d.digest = dg->get<std::string>();
  if (!IsSha256Digest(d.digest)) {
    return Fail(where + ".digest '" + d.digest + "' is not sha256: and 64 lower-case hex digits");
  }
  auto sz = j.find("size");
  if (sz == j.end() || !sz->is_number_integer() || sz->get<std::int64_t>() < 0) {
    return Fail(where + " has no size (a non-negative integer)");
  }
  d.size = sz->get<std::int64_t>();
  if (auto p = j.find("platform"); p != j.end()) {
    if (!p->is_object()) return Fail(where + ".platform is not an object");
    auto str = [&](const char* k) -> std::string {
      auto f = p->find(k);
      return (f != p->end() && f->is_string()) ? f->get<std::string>() : std::string();
    };
    d.platform = {str("os"), str("architecture"), str("variant")};
    d.has_platform = true;
  }
  return d;
}

// ReadDescriptors reads the list of descriptors at key of document (the "index" or the
// "manifest", as errors name it).
Result<std::vector<Descriptor>> ReadDescriptors(const json& j, const std::string& key, const std::string& document) {
  auto list = j.find(key);
  if (list == j.end() || !list->is_array()) return Fail("the " + document + " has no '" + key + "' list");
  std::vector<Descriptor> out;
  for (std::size_t i = 0; i < list->size(); ++i) {
    auto d = ReadDescriptor((*list)[i], key + "[" + std::to_string(i) + "]");
    if (!d) return Fail(d.error());
    out.push_back(*d);
  }
  return out;
}

}  // namespace

std::string AcceptHeader() {
  return "Accept: " + std::string(kOciIndex) + ", " + std::string(kDockerList) + ", " + std::string(kOciManifest) +
         ", " + std::string(kDockerManifest);
}

Result<Parsed> ParseManifest(std::string_view bytes, std::string_view header_type) {
  json j = json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Fail("the manifest is not valid JSON");
  if (!j.is_object()) return Fail("the manifest is not a JSON object");
  Parsed p;
  if (auto sv = j.find("schemaVersion"); sv == j.end() || !sv->is_number_integer() || sv->get<int>() != 2) {
    return Fail("the manifest's schemaVersion is not 2 (schema 1 manifests are not supported)");
  }
  std::string type(header_type);
  if (auto mt = j.find("mediaType"); mt != j.end()) {
    if (!mt->is_string()) return Fail("the manifest's mediaType is not a string");
    type = mt->get<std::string>();
  }
  if (auto semi = type.find(';'); semi != std::string::npos) type = std::string(Trim(type.substr(0, semi)));
  if (type.empty() || type == "application/json") {
    // OCI allows leaving mediaType out; the fields tell the kinds apart.
    if (j.contains("manifests")) {
      type = kOciIndex;
    } else if (j.contains("layers")) {
      type = kOciManifest;
    } else {
      return Fail("the document has neither 'layers' nor 'manifests', so it is no manifest or index");
    }
  }
  p.media_type = type;
  if (type == kOciIndex || type == kDockerList) {
    p.is_index = true;
    auto manifests = ReadDescriptors(j, "manifests", "index");
    if (!manifests) return Fail(manifests.error());
    p.layers = *manifests;
    return p;
  }
  if (type != kOciManifest && type != kDockerManifest) {
    return Fail("unsupported manifest media type '" + type + "'");
  }
  auto c = j.find("config");
  if (c == j.end()) return Fail("the manifest has no 'config'");
  auto cd = ReadDescriptor(*c, "config");
  if (!cd) return Fail(cd.error());
  p.config = *cd;
  auto layers = ReadDescriptors(j, "layers", "manifest");
  if (!layers) return Fail(layers.error());
  p.layers = *layers;
  return p;
}

Platform HostPlatform() {
#if defined(__aarch64__)
  return {"linux", "arm64", ""};
#else
  return {"linux", "amd64", ""};
#endif
}

Result<Platform> ParsePlatform(std::string_view text) {
  auto parts = Split(text, '/');
  if (parts.size() < 2 || parts.size() > 3 || parts[0].empty() || parts[1].empty()) {
    return Fail("platform '" + std::string(text) + "' must be os/architecture[/variant], such as linux/arm64");
  }
  return Platform{parts[0], parts[1], parts.size() == 3 ? parts[2] : ""};
}

std::string PlatformString(const Platform& p) {
  return p.os + "/" + p.architecture + (p.variant.empty() ? "" : "/" + p.variant);
}

Result<Descriptor> SelectPlatform(const Parsed& index, const Platform& want) {
  std::vector<std::string> offered;
  const Descriptor* loose = nullptr;
  for (const auto& d : index.layers) {
    if (!d.has_platform) continue;
    // Attestation manifests ("unknown/unknown") are not images to run.
    offered.push_back(PlatformString(d.platform));
    if (d.platform.os != want.os || d.platform.architecture != want.architecture) continue;
    if (want.variant.empty() || d.platform.variant.empty() || d.platform.variant == want.variant) {
      if (d.platform.variant == want.variant) return d;
      if (!loose) loose = &d;
    }
  }
  if (loose) return *loose;
  return Fail("the index has no image for " + PlatformString(want) + "; it offers " +
              (offered.empty() ? std::string("no platforms") : Join(offered, ", ")));
}

}  // namespace sprout::oci
