// YamlAt: the place of a YAML node, for diagnostics; LoadYaml: YAML text, or where it breaks.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <string_view>

#include "util/diag.h"

namespace sprout {

// YamlAt is the 1-based line and column of n in file (line 0 when yaml-cpp has no mark).
inline Location YamlAt(const std::string& file, const YAML::Node& n) {
  auto m = n.Mark();
  if (m.line < 0) return {file, 0, 0};
  return {file, m.line + 1, m.column + 1};
}

// LoadYaml parses text, or reports "SUBJECT is not valid YAML: REASON" with hint at the
// line and column of file where it breaks, and is nothing.
inline std::optional<YAML::Node> LoadYaml(std::string_view text, const std::string& file, const std::string& subject,
                                          const std::string& hint, Diagnostics& diags) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    diags.Error({file, e.mark.line + 1, e.mark.column + 1}, subject + " is not valid YAML: " + e.msg, hint);
    return std::nullopt;
  }
}

}  // namespace sprout
