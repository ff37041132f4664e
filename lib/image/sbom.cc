#include "image/sbom.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "util/text.h"

namespace sprout {

std::vector<DebPackage> ParseDpkgStatus(std::string_view status) {
  std::vector<DebPackage> out;
  DebPackage cur;
  bool installed = false;
  auto flush = [&] {
    if (installed && !cur.name.empty()) out.push_back(cur);
    cur = DebPackage{};
    installed = false;
  };
  for (const auto& raw : Split(status, '\n')) {
    std::string_view line = raw;
    if (Trim(line).empty()) {
      flush();
      continue;
    }
    if (line.front() == ' ' || line.front() == '\t') continue;  // continuation lines
    auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = line.substr(0, colon);
    std::string value(Trim(line.substr(colon + 1)));
    if (key == "Package") cur.name = value;
    if (key == "Version") cur.version = value;
    if (key == "Architecture") cur.architecture = value;
    if (key == "Source") cur.source = value.substr(0, value.find(' '));
    if (key == "Status") installed = value.ends_with(" installed");
  }
  flush();
  std::sort(out.begin(), out.end(), [](const DebPackage& a, const DebPackage& b) { return a.name < b.name; });
  return out;
}

std::string SpdxJson(const std::vector<DebPackage>& packages, const std::string& name,
                     const std::string& document_namespace, std::int64_t created) {
  const std::string when = UtcTime(created, "%Y-%m-%dT%H:%M:%SZ");
  nlohmann::ordered_json doc;
  doc["spdxVersion"] = "SPDX-2.3";
  doc["dataLicense"] = "CC0-1.0";
  doc["SPDXID"] = "SPDXRef-DOCUMENT";
  doc["name"] = name;
  doc["documentNamespace"] = document_namespace;
  doc["creationInfo"] = {{"created", when}, {"creators", {std::string("Tool: sprout-") + SPROUT_VERSION}}};
  doc["packages"] = nlohmann::json::array();
  doc["relationships"] = nlohmann::json::array();
  for (const auto& p : packages) {
    std::string id = "SPDXRef-deb-" + p.name;
    for (auto& c : id) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '-';
    }
    nlohmann::ordered_json pkg;
    pkg["name"] = p.name;
    pkg["SPDXID"] = id;
    pkg["versionInfo"] = p.version;
    pkg["supplier"] = "Organization: Debian";
    pkg["downloadLocation"] = "NOASSERTION";
    pkg["filesAnalyzed"] = false;
    pkg["licenseConcluded"] = "NOASSERTION";
    pkg["licenseDeclared"] = "NOASSERTION";
    pkg["copyrightText"] = "NOASSERTION";
    if (!p.source.empty()) pkg["sourceInfo"] = "built from Debian source package " + p.source;
    pkg["externalRefs"] = {{{"referenceCategory", "PACKAGE-MANAGER"},
                            {"referenceType", "purl"},
                            {"referenceLocator", "pkg:deb/debian/" + p.name + "@" + p.version +
                                                     "?arch=" + p.architecture + "&distro=debian-12"}}};
    doc["packages"].push_back(pkg);
    doc["relationships"].push_back(
        {{"spdxElementId", "SPDXRef-DOCUMENT"}, {"relationshipType", "DESCRIBES"}, {"relatedSpdxElement", id}});
  }
  return doc.dump(2) + "\n";
}

}  // namespace sprout
