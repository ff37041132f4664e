#include "update/build.h"

#include <nlohmann/json.hpp>

#include "util/json_field.h"
#include "util/text.h"

namespace sprout::update {

namespace {

// MajorMinor is "3.4" of "3.4.23", "v3.4" or "3.4-debian"; "" when it has no two numbers.
std::string MajorMinor(std::string v) {
  if (v.starts_with("v")) v = v.substr(1);
  auto parts = Split(v, '.');
  if (parts.size() < 2) return "";
  std::string minor;
  for (char c : parts[1]) {
    if (c < '0' || c > '9') break;
    minor += c;
  }
  if (parts[0].empty() || minor.empty()) return "";
  for (char c : parts[0]) {
    if (c < '0' || c > '9') return "";
  }
  return parts[0] + "." + minor;
}

}  // namespace

Result<BuildInfo> ParseBuild(const std::string& dir, const std::string& manifest_text,
                             const std::string& manifest_sha256, const std::string& sums_text) {
  BuildInfo b;
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(manifest_text);
  } catch (const std::exception& e) {
    return Fail(dir + "/manifest.json is not JSON (" + e.what() + "); is " + dir + " a sprout build directory?");
  }
  bool manifest_listed = false;
  for (const auto& line : Split(sums_text, '\n')) {
    if (Trim(line).empty()) continue;
    auto sep = line.find("  ");
    if (sep == std::string::npos) return Fail(dir + "/sha256sums: a line is not 'HEX  FILE': " + line);
    if (line.substr(sep + 2) == "manifest.json") {
      if (line.substr(0, sep) != manifest_sha256) {
        return Fail(dir +
                    "/manifest.json does not match its line in sha256sums (changed or half-copied); copy the "
                    "build directory again");
      }
      manifest_listed = true;
    }
  }
  if (!manifest_listed) return Fail(dir + "/sha256sums does not list manifest.json; is it a sprout build directory?");
  if (!m.is_object() || !m.contains("rootHash") || !m["rootHash"].is_string()) {
    return Fail(dir + "/manifest.json has no rootHash; is it a sprout build directory?");
  }
  b.root_hash = m["rootHash"].get<std::string>();
  if (b.root_hash.size() != 64) return Fail(dir + "/manifest.json: rootHash is not 64 hex digits");
  if (m.contains("profile")) b.profile = JsonString(m["profile"], "name").value_or("");
  if (m.contains("outputs") && m["outputs"].is_array()) {
    for (const auto& o : m["outputs"]) {
      std::string file = JsonString(o, "file").value_or("");
      if (file.ends_with(".raw") && file.find('/') == std::string::npos && file.find("..") == std::string::npos) {
        b.raw_file = file;
        auto sha = JsonString(o, "sha256");
        auto size = JsonUnsigned(o, "size");
        if (!sha || !size) {
          return Fail(dir + "/manifest.json: the output " + file +
                      " has no sha256 string or no size number; build it again with sprout build");
        }
        b.raw_sha256 = *sha;
        b.raw_size = *size;
        b.raw_data_bytes = JsonUnsigned(o, "dataBytes").value_or(0);
        b.raw_extents.clear();
        if (o.contains("dataExtents")) {
          const auto& runs = o["dataExtents"];
          bool ok = runs.is_array();
          for (std::size_t i = 0; ok && i < runs.size(); ++i) {
            const auto& r = runs[i];
            ok = r.is_array() && r.size() == 2 && r[0].is_number_unsigned() && r[1].is_number_unsigned();
            if (ok) b.raw_extents.push_back({r[0].get<std::uint64_t>(), r[1].get<std::uint64_t>()});
          }
          if (!ok) {
            return Fail(dir + "/manifest.json: the dataExtents of " + file +
                        " are not a list of [offset, length] pairs; build it again with sprout build");
          }
        }
      }
    }
  }
  if (b.raw_file.empty()) {
    return Fail(dir +
                "/manifest.json lists no raw image; build it with --format raw (an update writes the raw "
                "image's root and verity)");
  }
  auto identity = ReadIdentity(manifest_text, dir + "/manifest.json");
  if (!identity) return Fail(identity.error());
  b.identity = std::move(*identity);
  if (m.contains("images")) b.etcd_version = EtcdVersionOfImages(m["images"].dump());
  return b;
}

std::string EtcdVersionOfImages(const std::string& images_json) {
  auto a = nlohmann::json::parse(images_json, nullptr, false);
  if (!a.is_array()) return "";
  for (const auto& i : a) {
    if (!i.is_object()) continue;
    std::string ref = JsonString(i, "reference").value_or("");
    auto at = ref.find('@');
    if (at != std::string::npos) ref = ref.substr(0, at);
    auto slash = ref.rfind('/');
    std::string last = slash == std::string::npos ? ref : ref.substr(slash + 1);
    auto colon = last.find(':');
    if (colon == std::string::npos) continue;
    if (last.substr(0, colon) == "etcd") return last.substr(colon + 1);
  }
  return "";
}

Status CheckEtcdRule(const std::string& running, const std::string& next) {
  if (running.empty() && next.empty()) return Ok{};
  if (running.empty() || next.empty()) {
    return Fail("the etcd versions cannot be compared: this node's build preloads etcd " +
                (running.empty() ? std::string("(none recorded)") : running) + ", the new build " +
                (next.empty() ? std::string("(none recorded)") : next) +
                "; an update must keep etcd's minor version, so build the new image with the same etcd image");
  }
  const std::string a = MajorMinor(running), b = MajorMinor(next);
  if (a.empty() || b.empty()) {
    return Fail("the etcd version '" + (a.empty() ? running : next) +
                "' (the etcd image's tag) is not MAJOR.MINOR[.PATCH]; tag the etcd image with its version");
  }
  if (a != b) {
    return Fail("refusing the update: the new build's etcd " + next + " and this node's etcd " + running +
                " differ in their minor version, and a rollback to the old slot would leave etcd " + running +
                " with data it cannot read; keep etcd " + a + ".x in the new build (docs/updates.md, version rule)");
  }
  return Ok{};
}

}  // namespace sprout::update
