// YAML to JSON the way Kubernetes reads a manifest. kubectl, Helm and the API machinery
// turn YAML into JSON with sigs.k8s.io/yaml, which resolves an unquoted scalar by
// go-yaml v2's rules (YAML 1.1's): `yes`, `on` and `true` are true, `0644` is octal, `1e3`
// is a number, a timestamp stays a string. A workload baked as JSON must mean what the
// same YAML means to `kubectl apply`, so the rules are copied, not YAML 1.2's.
#pragma once

#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "util/diag.h"

namespace sprout {

// ResolvePlainScalar is the JSON value of an unquoted scalar: null, a boolean, an integer
// (decimal, 0x, 0o, 0b, a leading 0 for octal, '_' ignored), a number, or else the text.
// NaN and the infinities (.nan, .inf), which JSON cannot hold, are nullopt; a number
// beyond a double's range stays text, as go-yaml keeps it.
std::optional<nlohmann::ordered_json> ResolvePlainScalar(std::string_view text);

// YamlToJson converts n, reporting each problem at its place in file (the node's line
// plus line_offset: n may come from a part of the file): a key that appears twice, a key
// that is a mapping or a list, a value JSON cannot hold. Merge keys (`<<: *anchor`) are
// merged as go-yaml does. Any error: nullopt.
std::optional<nlohmann::ordered_json> YamlToJson(const YAML::Node& n, const std::string& file, int line_offset,
                                                 Diagnostics& diags);

}  // namespace sprout
