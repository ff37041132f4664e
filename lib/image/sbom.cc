#include "image/sbom.h"

#include <algorithm>
#include <map>
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

Result<std::vector<GoModule>> ParseGoModules(std::string_view text) {
  auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("sets") || !doc["sets"].is_array()) {
    return Fail("modules.json is not an object with a \"sets\" list");
  }
  std::map<std::pair<std::string, std::string>, GoModule> by;
  for (const auto& set : doc["sets"]) {
    if (!set.is_object() || !set.contains("binaries") || !set["binaries"].is_array()) {
      return Fail("modules.json: a set without a \"binaries\" list");
    }
    for (const auto& bin : set["binaries"]) {
      const std::string binary = bin.is_object() && bin.contains("binary") && bin["binary"].is_string()
                                     ? bin["binary"].get<std::string>()
                                     : "";
      if (binary.empty()) return Fail("modules.json: a binary without a name in set '" + set.value("set", "?") + "'");
      // The binary's main module (k8s.io/kubernetes for the Kubernetes programs), then the
      // modules it links; a main module built from its own folder is "(devel)" and is
      // not a module of anyone else's (pause).
      std::vector<nlohmann::json> mods;
      if (const auto main = bin.find("main");
          main != bin.end() && main->is_object() && main->value("Version", std::string()) != "(devel)") {
        mods.push_back(*main);
      }
      if (bin.contains("modules") && !bin["modules"].is_null()) {
        if (!bin["modules"].is_array()) return Fail("modules.json: " + binary + "'s \"modules\" is not a list");
        for (const auto& m : bin["modules"]) mods.push_back(m);
      }
      for (const auto& m : mods) {
        if (!m.is_object()) return Fail("modules.json: a module of " + binary + " is not an object");
        // A field may be missing or null (jq writes null for what go version -m leaves out).
        auto str = [](const nlohmann::json& o, const char* key, const char* alt, const std::string& otherwise) {
          for (const char* k : {key, alt}) {
            if (const auto f = o.find(k); f != o.end() && f->is_string() && !f->get<std::string>().empty()) {
              return f->get<std::string>();
            }
          }
          return otherwise;
        };
        std::string path = str(m, "path", "Path", ""), version = str(m, "version", "Version", "");
        std::string sum = str(m, "sum", "Sum", "");
        if (const auto r = m.find("replace"); r != m.end() && r->is_object()) {
          path = str(*r, "Path", "path", path);
          version = str(*r, "Version", "version", version);
          sum = str(*r, "Sum", "sum", sum);
        }
        if (path.empty() || version.empty()) {
          return Fail("modules.json: a module of " + binary + " has no path or no version");
        }
        auto& g = by[{path, version}];
        g.path = path;
        g.version = version;
        if (g.sum.empty()) g.sum = sum;
        g.binaries.push_back(binary);
      }
    }
  }
  std::vector<GoModule> out;
  for (auto& [key, g] : by) {
    std::sort(g.binaries.begin(), g.binaries.end());
    g.binaries.erase(std::unique(g.binaries.begin(), g.binaries.end()), g.binaries.end());
    out.push_back(std::move(g));
  }
  return out;
}

std::string SpdxJson(const std::vector<DebPackage>& packages, const std::string& name,
                     const std::string& document_namespace, std::int64_t created,
                     const std::vector<GoModule>& go_modules) {
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
  for (const auto& g : go_modules) {
    std::string id = "SPDXRef-gomod-" + g.path + "-" + g.version;
    for (auto& c : id) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '-';
    }
    nlohmann::ordered_json pkg;
    pkg["name"] = g.path;
    pkg["SPDXID"] = id;
    pkg["versionInfo"] = g.version;
    pkg["downloadLocation"] = "NOASSERTION";
    pkg["filesAnalyzed"] = false;
    pkg["licenseConcluded"] = "NOASSERTION";
    pkg["licenseDeclared"] = "NOASSERTION";
    pkg["copyrightText"] = "NOASSERTION";
    pkg["sourceInfo"] = "Go module linked into " + Join(g.binaries, ", ");
    if (!g.sum.empty()) pkg["comment"] = "go.sum hash " + g.sum;
    pkg["externalRefs"] = {{{"referenceCategory", "PACKAGE-MANAGER"},
                            {"referenceType", "purl"},
                            {"referenceLocator", "pkg:golang/" + g.path + "@" + g.version}}};
    doc["packages"].push_back(pkg);
    doc["relationships"].push_back(
        {{"spdxElementId", "SPDXRef-DOCUMENT"}, {"relationshipType", "DESCRIBES"}, {"relatedSpdxElement", id}});
  }
  return doc.dump(2) + "\n";
}

}  // namespace sprout
