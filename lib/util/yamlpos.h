// YamlAt: the place of a YAML node, for diagnostics.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "util/diag.h"

namespace sprout {

// YamlAt is the 1-based line and column of n in file (line 0 when yaml-cpp has no mark).
inline Location YamlAt(const std::string& file, const YAML::Node& n) {
  auto m = n.Mark();
  if (m.line < 0) return {file, 0, 0};
  return {file, m.line + 1, m.column + 1};
}

}  // namespace sprout
