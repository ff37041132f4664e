#include "update/identity.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

namespace sprout::update {

namespace {

using nlohmann::json;

// NonNegative is j as a non-negative int64, if it is one.
std::optional<std::int64_t> NonNegative(const json& j) {
  if (!j.is_number_unsigned()) return std::nullopt;
  const auto v = j.get<std::uint64_t>();
  if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
  return static_cast<std::int64_t>(v);
}

const json* Member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string Shown(const std::string& v) { return v.empty() ? "unknown" : "'" + v + "'"; }

std::string SerialShown(const RecordedIdentity& id) {
  if (!id.serial) return "unknown";
  return std::to_string(*id.serial) + (id.serial_from_epoch ? " (its epoch: it was built before serials)" : "");
}

}  // namespace

Result<RecordedIdentity> ReadIdentity(const std::string& json_text, const std::string& what) {
  const json j = json::parse(json_text, nullptr, false);
  if (!j.is_object()) return Fail(what + " is not a JSON object; copy the build again");
  RecordedIdentity id;
  if (const json* u = Member(j, "update")) {
    const std::string fix = "; the file is damaged, or was not written by sprout build: build it again";
    if (!u->is_object()) return Fail(what + ": \"update\" is not an object" + fix);
    const json* serial = Member(*u, "serial");
    if (!serial) return Fail(what + ": \"update\" has no serial" + fix);
    id.serial = NonNegative(*serial);
    if (!id.serial) return Fail(what + ": update.serial " + serial->dump() + " is not a non-negative integer" + fix);
    for (auto [key, field] : {std::pair{"profile", &id.profile}, {"role", &id.role}, {"cluster", &id.cluster}}) {
      const json* v = Member(*u, key);
      if (!v || !v->is_string() || v->get<std::string>().empty()) {
        return Fail(what + ": update." + key + " is missing or not a name" + fix);
      }
      *field = v->get<std::string>();
    }
    return id;
  }
  // A build before serials: what its recorded profile says.
  const json* p = Member(j, "profile");
  if (!p) return id;
  if (const json* name = Member(*p, "name"); name && name->is_string()) id.profile = name->get<std::string>();
  if (const json* role = Member(*p, "role"); role && role->is_string()) id.role = role->get<std::string>();
  if (const json* r = Member(*p, "reproducible")) {
    if (const json* epoch = Member(*r, "sourceDateEpoch")) {
      id.serial = NonNegative(*epoch);
      id.serial_from_epoch = id.serial.has_value();
    }
  }
  return id;
}

Result<std::string> CheckSerial(const RecordedIdentity& running, const RecordedIdentity& next, bool allow_downgrade) {
  const std::string serials =
      "the new build's serial is " + SerialShown(next) + ", this node's (the running build's) " + SerialShown(running);
  const std::string fix =
      "; build the new one with a higher serial (update.serial in its profile, or sprout build --serial N; the "
      "default is the build's epoch, reproducible.sourceDateEpoch or SOURCE_DATE_EPOCH), or pass --allow-downgrade "
      "to install it anyway";
  if (running.serial && next.serial && *next.serial > *running.serial) return serials + ": newer";
  if (allow_downgrade) return "--allow-downgrade: " + serials;
  if (!running.serial || !next.serial) {
    return Fail("refusing the update: " + serials + ", so the new build cannot be shown to be newer" + fix);
  }
  if (*next.serial == *running.serial) {
    return Fail("refusing the update: " + serials + ": the same serial, so the new build is no newer" + fix);
  }
  return Fail("refusing a downgrade: " + serials + ", so the new build is older" + fix);
}

Result<std::string> CheckSameNodes(const RecordedIdentity& running, const RecordedIdentity& next,
                                   bool allow_cross_profile) {
  std::vector<std::string> differ;
  auto compare = [&](const char* what, const std::string& a, const std::string& b) {
    if (a.empty() || b.empty() || a != b) {
      differ.push_back(std::string(what) + " " + Shown(b) + " (this node's: " + Shown(a) + ")");
    }
  };
  compare("profile", running.profile, next.profile);
  compare("role", running.role, next.role);
  const bool cluster_known = !running.cluster.empty() && !next.cluster.empty();
  if (cluster_known) compare("cluster", running.cluster, next.cluster);
  const std::string same =
      "profile " + Shown(next.profile) + ", role " + Shown(next.role) +
      (cluster_known ? ", cluster " + Shown(next.cluster)
                     : ", cluster not compared (" + std::string(running.cluster.empty() ? "the running" : "the new") +
                           " build was made before builds recorded it)");
  if (differ.empty()) return "the build is for this node's " + same;
  std::string list;
  for (std::size_t i = 0; i < differ.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == differ.size() ? " and " : ", ") + differ[i];
  }
  if (allow_cross_profile) return "--allow-cross-profile: the new build differs in its " + list;
  return Fail("refusing a build for other nodes: it differs from the running build in its " + list +
              "; a node keeps its profile, role and cluster across updates (its personalization stays), so update it "
              "with a build of its own profile (a variant of that profile says so with update.profile: NAME), or pass "
              "--allow-cross-profile to install it anyway");
}

Result<IdentityNotes> CheckIdentityRules(const RecordedIdentity& running, const RecordedIdentity& next,
                                         bool allow_downgrade, bool allow_cross_profile) {
  auto nodes = CheckSameNodes(running, next, allow_cross_profile);
  auto serial = CheckSerial(running, next, allow_downgrade);
  if (!nodes && !serial) return Fail(nodes.error() + "; also, " + serial.error());
  if (!nodes) return Fail(nodes.error());
  if (!serial) return Fail(serial.error());
  return IdentityNotes{*nodes, *serial};
}

}  // namespace sprout::update
