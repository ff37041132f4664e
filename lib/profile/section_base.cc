// The profile's own settings: name, description, hostname, base, role, arch, the kernel
// command line, the reproducible build's epoch and the build's update identity
// (docs/profiles.md).
#include <yaml-cpp/yaml.h>

#include <stdexcept>

#include "profile/layer.h"
#include "util/text.h"

namespace sprout {

namespace fs = std::filesystem;

void LayerParser::ParseIdentity(const YAML::Node& root, Layer& layer) {
  if (auto n = root["name"]) {
    if (auto s = String(n, "name")) {
      if (ValidName(*s)) {
        layer.name = *s;
      } else {
        diags_.Error(
            At(n),
            "'name' must be 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit; got '" + *s + "'",
            "the name ends up in file names and volume labels, so keep it plain, like 'edge-rack'");
      }
    }
  }
  if (auto n = root["description"]) layer.description = String(n, "description");
  if (auto n = root["hostname"]) {
    if (auto s = String(n, "hostname")) {
      if (ValidName(*s)) {
        layer.hostname = *s;
      } else {
        diags_.Error(At(n), "'hostname' must be a DNS label (a-z, 0-9, '-'); got '" + *s + "'",
                     "leave it out to have each node generate a unique hostname at first boot");
      }
    }
  }
  if (auto n = root["base"]) {
    if (auto s = String(n, "base")) {
      fs::path p = Resolve(*s);
      layer.base_where = At(n);
      std::error_code ec;
      if (!fs::exists(p, ec)) {
        diags_.Error(At(n), "base '" + *s + "' does not exist (looked for " + p.string() + ")",
                     "name a base recipe directory (like ../images/base), a root tarball, or a root directory; "
                     "relative paths start at the profile's folder");
      } else {
        layer.base = p;
      }
    }
  }
  if (auto n = root["role"]) {
    layer.role = OneOf<Role>(n, "role", {{"control-plane", Role::kControlPlane}, {"worker", Role::kWorker}},
                             "control-plane nodes run etcd and the API server; workers run only workloads");
  }
  if (auto n = root["arch"]) {
    if (auto s = String(n, "arch")) {
      if (auto a = ParseArchName(*s)) {
        layer.arch = *a;
        layer.arch_where = At(n);
      } else {
        diags_.Error(At(n), "'arch' must be 'amd64' or 'arm64'; got '" + *s + "'", ArchHint(*s));
      }
    }
  }
  if (auto n = root["kernel"]) {
    if (ExpectMap(n, "kernel")) {
      CheckKeys(n, "'kernel'", {"cmdline"});
      if (auto c = n["cmdline"]) {
        for (auto& s : StringList(c, "kernel.cmdline")) layer.cmdline.push_back(s);
      }
    }
  }
  if (auto n = root["reproducible"]) {
    if (ExpectMap(n, "reproducible")) {
      CheckKeys(n, "'reproducible'", {"sourceDateEpoch"});
      if (auto s = n["sourceDateEpoch"]) {
        if (auto v = String(s, "reproducible.sourceDateEpoch")) {
          try {
            std::size_t used = 0;
            long long e = std::stoll(*v, &used);
            if (used != v->size() || e < 0) throw std::invalid_argument("bad");
            layer.source_date_epoch = e;
          } catch (const std::exception&) {
            diags_.Error(At(s),
                         "'reproducible.sourceDateEpoch' must be a non-negative number of seconds; got '" + *v + "'",
                         "use a Unix time such as 1700000000; the SOURCE_DATE_EPOCH environment variable overrides it");
          }
        }
      }
    }
  }
  if (auto n = root["update"]) ParseUpdate(n, layer);
}

void LayerParser::ParseUpdate(const YAML::Node& n, Layer& layer) {
  if (!ExpectMap(n, "update")) return;
  CheckKeys(n, "'update'", {"serial", "profile"});
  if (auto s = n["serial"]) {
    if (auto v = String(s, "update.serial")) {
      std::size_t used = 0;
      long long serial = -1;
      try {
        serial = std::stoll(*v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == v->size() && serial >= 0) {
        layer.update_serial = serial;
      } else {
        diags_.Error(At(s), "'update.serial' must be a non-negative whole number; got '" + *v + "'",
                     "raise it with every release (nodes refuse a build whose serial is not above the one they "
                     "run); leave it out to use the build's epoch (reproducible.sourceDateEpoch)");
      }
    }
  }
  if (auto p = n["profile"]) {
    if (auto v = String(p, "update.profile")) {
      if (ValidName(*v)) {
        layer.update_profile = *v;
      } else {
        diags_.Error(At(p), "'update.profile' must be a profile name (a-z, 0-9 and '-'); got '" + *v + "'",
                     "name the profile whose nodes this build may update, such as 'default'");
      }
    }
  }
}

}  // namespace sprout
