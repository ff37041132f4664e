#pragma once
// Typed reads of one field of a JSON object that never throw. nlohmann's value(key, default)
// throws when the key is there with another type, and a file that anyone with the disk or the
// share can write must not be able to end the reader that way. Each returns nullopt when o is
// not an object, has no such key, or holds another type there.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace sprout {

inline std::optional<std::string> JsonString(const nlohmann::json& o, const char* key) {
  if (!o.is_object()) return std::nullopt;
  auto it = o.find(key);
  if (it == o.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

inline std::optional<std::uint64_t> JsonUnsigned(const nlohmann::json& o, const char* key) {
  if (!o.is_object()) return std::nullopt;
  auto it = o.find(key);
  if (it == o.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<std::uint64_t>();
}

}  // namespace sprout
