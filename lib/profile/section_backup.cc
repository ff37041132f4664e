// `backup:` where etcd's backups go, how often, and how many are kept (docs/backup.md).
#include <yaml-cpp/yaml.h>

#include <cctype>

#include "profile/layer.h"
#include "util/text.h"

namespace sprout {

namespace fs = std::filesystem;

void LayerParser::ParseBackup(const YAML::Node& n, Layer& layer) {
  if (!ExpectMap(n, "backup")) return;
  CheckKeys(n, "'backup'", {"dir", "interval", "keep"});
  BackupProfile b;
  b.present = true;
  bool ok = true;
  if (auto d = n["dir"]) {
    if (auto s = String(d, "backup.dir")) {
      if (s->starts_with("nfs://") ? s->find('?') != std::string::npos || s->find('@') != std::string::npos
                                   : !s->starts_with("/")) {
        diags_.Error(At(d),
                     "'backup.dir' must be an absolute folder on the node or nfs://HOST/PATH with nothing after "
                     "the path; got '" +
                         *s + "'",
                     "write e.g. /var/lib/sprout/backups or nfs://198.18.0.5/backups; a share's uid/gid go in "
                     "each node's sprout.backup-dir, not in the image");
        ok = false;
      } else {
        b.dir = *s;
      }
    } else {
      ok = false;
    }
  }
  if (auto i = n["interval"]) {
    auto s = String(i, "backup.interval");
    auto v = s ? ParseDuration(*s) : std::nullopt;
    if (s && (!v || *v < 1)) {
      diags_.Error(At(i), "'backup.interval' must be a duration of at least 1 s; got '" + *s + "'",
                   "write seconds or a number with s, m, h or d, such as 3600 or 1h");
    }
    if (v && *v >= 1) {
      b.interval = *v;
    } else {
      ok = false;
    }
  }
  if (auto k = n["keep"]) {
    auto s = String(k, "backup.keep");
    int v = 0;
    bool number = s && !s->empty() && s->size() < 6 &&
                  std::all_of(s->begin(), s->end(), [](char c) { return c >= '0' && c <= '9'; });
    if (number) v = std::stoi(*s);
    if (s && v < 1) {
      diags_.Error(At(k), "'backup.keep' must be a whole number of bundles, at least 1; got '" + *s + "'",
                   "write e.g. 'keep: 7'");
    }
    if (v >= 1) {
      b.keep = v;
    } else {
      ok = false;
    }
  }
  if (ok) layer.backup = b;
}

std::optional<std::int64_t> LayerParser::ParseDuration(const std::string& s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  std::int64_t unit = 1;
  std::string digits = s;
  switch (s.back()) {
    case 's':
      unit = 1;
      break;
    case 'm':
      unit = 60;
      break;
    case 'h':
      unit = 3600;
      break;
    case 'd':
      unit = 86400;
      break;
    default:
      break;
  }
  if (s.back() < '0' || s.back() > '9') digits.pop_back();
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(digits) * unit;
}

}  // namespace sprout
