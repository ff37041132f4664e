// LayerParser: one profile file's top level and the helpers its sections share.
#include "profile/layer.h"

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

Layer LayerParser::Parse(const YAML::Node& root) {
  Layer layer;
  layer.file = file_;
  if (!root.IsMap()) {
    diags_.Error(At(root),
                 std::string("a profile must be a mapping of settings, but this file holds ") + KindName(root),
                 "start with 'name: my-image' and see docs/profiles.md for every setting");
    return layer;
  }
  CheckKeys(root, "the profile",
            {"extends",      "name",       "description",       "base",    "role",         "arch",     "formats",
             "kernel",       "disk",       "overlays",          "files",   "reproducible", "hostname", "images",
             "shoot",        "staticPods", "withoutStaticPods", "podHost", "kubelet",      "backup",   "update",
             "certificates", "workloads"});
  ParseCluster(root, layer);
  if (auto n = root["extends"]) {
    if (auto s = String(n, "extends")) {
      layer.extends = Resolve(*s);
      layer.extends_where = At(n);
    }
  }
  ParseIdentity(root, layer);
  ParseDisk(root, layer);
  ParseFiles(root, layer);
  if (auto n = root["images"]) {
    for (const auto& item : Seq(n, "images")) ParseImage(item, layer);
  }
  if (auto n = root["workloads"]) {
    for (const auto& item : Seq(n, "workloads")) ParseWorkload(item, layer);
  }
  return layer;
}

void LayerParser::ReportNotOneOf(const YAML::Node& n, const std::string& what, const std::string& got,
                                 const std::vector<std::string>& known, const std::string& hint) {
  std::string list;
  for (std::size_t i = 0; i < known.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == known.size() ? " or " : ", ") + ("'" + known[i] + "'");
  }
  auto guess = ClosestMatch(got, known);
  diags_.Error(At(n), "'" + what + "' must be " + list + "; got '" + got + "'",
               guess ? "did you mean '" + *guess + "'?" : hint);
}

Location LayerParser::At(const YAML::Node& n) const {
  auto m = n.Mark();
  if (m.line < 0) return {file_.string(), 0, 0};
  return {file_.string(), m.line + 1, m.column + 1};
}

fs::path LayerParser::Resolve(const std::string& s) const {
  fs::path p(s);
  return (p.is_absolute() ? p : dir_ / p).lexically_normal();
}

bool LayerParser::ValidName(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

void LayerParser::CheckKeys(const YAML::Node& map, const std::string& context,
                            const std::vector<std::string>& allowed) {
  std::set<std::string> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (!it->first.IsScalar()) {
      diags_.Error(At(it->first), "keys in " + context + " must be plain words", "write 'key: value'");
      continue;
    }
    const std::string key = it->first.Scalar();
    if (!seen.insert(key).second) {
      diags_.Error(At(it->first), "'" + key + "' appears twice in " + context, "keep one of them; YAML keeps only one");
      continue;
    }
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    auto guess = ClosestMatch(key, allowed);
    diags_.Error(At(it->first), "unknown key '" + key + "' in " + context,
                 guess ? "did you mean '" + *guess + "'?" : "allowed keys here: " + Join(allowed, ", "));
  }
}

bool LayerParser::ExpectMap(const YAML::Node& n, const std::string& what) {
  if (n.IsMap()) return true;
  diags_.Error(At(n), "'" + what + "' must be a mapping of settings, but it is " + KindName(n),
               "indent its settings below it, as in docs/profiles.md");
  return false;
}

std::optional<std::string> LayerParser::String(const YAML::Node& n, const std::string& what) {
  if (n.IsScalar()) return n.Scalar();
  diags_.Error(At(n), "'" + what + "' must be a single value, but it is " + KindName(n),
               n.IsNull() ? "give it a value, or remove the key" : "write it on one line, as 'key: value'");
  return std::nullopt;
}

std::vector<YAML::Node> LayerParser::Seq(const YAML::Node& n, const std::string& what) {
  std::vector<YAML::Node> out;
  if (!n.IsSequence()) {
    diags_.Error(At(n), "'" + what + "' must be a list, but it is " + KindName(n),
                 "write one item per line, each starting with '- '");
    return out;
  }
  for (const auto& item : n) out.push_back(item);
  return out;
}

std::vector<std::string> LayerParser::StringList(const YAML::Node& n, const std::string& what) {
  std::vector<std::string> out;
  for (const auto& item : Seq(n, what)) {
    if (auto s = String(item, "an item of " + what)) out.push_back(*s);
  }
  return out;
}

std::vector<fs::path> LayerParser::Folders(const YAML::Node& n, const std::string& what, const std::string& item_what,
                                           const std::string& label, const std::string& hint) {
  std::vector<fs::path> out;
  for (const auto& item : Seq(n, what)) {
    auto s = String(item, item_what);
    if (!s) continue;
    fs::path p = Resolve(*s);
    std::error_code ec;
    if (!fs::is_directory(p, ec)) {
      diags_.Error(At(item), label + " '" + *s + "' is not a directory (looked for " + p.string() + ")", hint);
    } else {
      out.push_back(p);
    }
  }
  return out;
}

std::optional<std::uint64_t> LayerParser::Size(const YAML::Node& n, const std::string& what, std::uint64_t minimum) {
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

}  // namespace sprout
