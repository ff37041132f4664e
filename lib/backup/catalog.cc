#include "backup/catalog.h"

#include <algorithm>
#include <ctime>
#include <regex>

#include "backup/bundle.h"
#include "util/text.h"

namespace sprout::backup {

std::string FormatUtc(std::int64_t unix_seconds) { return UtcTime(unix_seconds, "%Y%m%dT%H%M%SZ"); }

std::optional<std::int64_t> ParseUtc(std::string_view text) {
  static const std::regex kUtc(R"((\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z)");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_match(text.begin(), text.end(), m, kUtc)) return std::nullopt;
  std::tm tm{};
  tm.tm_year = std::stoi(m[1].str()) - 1900;
  tm.tm_mon = std::stoi(m[2].str()) - 1;
  tm.tm_mday = std::stoi(m[3].str());
  tm.tm_hour = std::stoi(m[4].str());
  tm.tm_min = std::stoi(m[5].str());
  tm.tm_sec = std::stoi(m[6].str());
  std::int64_t t = ::timegm(&tm);
  if (FormatUtc(t) != text) return std::nullopt;  // 20261399T... normalizes to another date
  return t;
}

std::string NameFor(const BundleName& n) {
  std::string kind = n.kind == "manual" ? "manual-" + n.node
                     : n.tag.empty()    ? std::string("scheduled")
                                        : "scheduled-" + n.tag;
  return n.cluster + "-" + FormatUtc(n.time) + "-" + kind + std::string(kBundleSuffix);
}

std::optional<BundleName> ParseName(std::string_view file) {
  if (file.empty() || file[0] == '.' || file.size() <= kBundleSuffix.size() || !file.ends_with(kBundleSuffix))
    return std::nullopt;
  std::string_view stem = file.substr(0, file.size() - kBundleSuffix.size());
  static const std::regex kName(R"((.+)-(\d{8}T\d{6}Z)-(scheduled(-([0-9a-f]{16}))?|manual-(.+)))");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_match(stem.begin(), stem.end(), m, kName)) return std::nullopt;
  auto t = ParseUtc(m[2].str());
  if (!t) return std::nullopt;
  BundleName n;
  n.cluster = m[1].str();
  n.time = *t;
  n.kind = m[3].str().starts_with("scheduled") ? "scheduled" : "manual";
  n.tag = m[5].matched ? m[5].str() : "";
  n.node = m[6].matched ? m[6].str() : "";
  return n;
}

std::string TempNameFor(std::string_view name, std::string_view node, long pid) {
  return "." + std::string(name) + ".tmp-" + std::string(node) + "-" + std::to_string(pid);
}

bool IsTempName(std::string_view file) {
  return file.size() > 1 && file[0] == '.' && file.find(std::string(kBundleSuffix) + ".tmp-") != std::string_view::npos;
}

std::optional<BundleName> TempBundleName(std::string_view file) {
  if (!IsTempName(file)) return std::nullopt;
  file.remove_prefix(1);
  return ParseName(file.substr(0, file.find(std::string(kBundleSuffix) + ".tmp-") + kBundleSuffix.size()));
}

std::vector<Listed> ListBundles(const std::vector<SinkFile>& files, std::string_view cluster) {
  std::vector<Listed> out;
  for (const auto& f : files) {
    auto n = ParseName(f.file);
    if (n && n->cluster == cluster) out.push_back(Listed{f, *n});
  }
  std::sort(out.begin(), out.end(), [](const Listed& a, const Listed& b) {
    const bool a_ok = a.file.opened == Authenticity::kAuthentic;
    const bool b_ok = b.file.opened == Authenticity::kAuthentic;
    if (a_ok != b_ok) return a_ok;
    if (a_ok) {
      if (a.file.created != b.file.created) return a.file.created > b.file.created;
      if (a.file.sealing != b.file.sealing) return a.file.sealing > b.file.sealing;
    }
    return a.file.file > b.file.file;
  });
  return out;
}

std::uint64_t BundleSizeBound(std::uint64_t size) {
  constexpr std::uint64_t kFloor = std::uint64_t{64} << 20;
  return std::min(kMaxBundleSize, std::max(kFloor, size > kMaxBundleSize / 4 ? kMaxBundleSize : 4 * size));
}

OpenPlan OpenOrder(const std::vector<SinkFile>& files, std::string_view cluster, std::uint64_t budget,
                   std::uint64_t max_file) {
  struct Candidate {
    std::size_t index;
    std::uint64_t size;
    std::int64_t time;
  };
  std::vector<Candidate> c;
  for (std::size_t i = 0; i < files.size(); ++i) {
    auto n = ParseName(files[i].file);
    if (!n) n = TempBundleName(files[i].file);
    if (n && n->cluster == cluster && files[i].header_ok) c.push_back({i, files[i].size, n->time});
  }
  std::sort(c.begin(), c.end(), [&files](const Candidate& a, const Candidate& b) {
    if (a.size != b.size) return a.size < b.size;
    if (a.time != b.time) return a.time > b.time;
    return files[a.index].file > files[b.index].file;
  });
  OpenPlan plan;
  std::uint64_t spent = 0;
  for (const auto& x : c) {
    if (x.size > max_file) {
      plan.too_large.push_back(x.index);
    } else if (x.size <= budget - spent) {
      spent += x.size;
      plan.open.push_back(x.index);
    } else {
      spent = budget;  // in size order: nothing after fits either
      plan.skipped.push_back(x.index);
    }
  }
  return plan;
}

SlotVerdict JudgeSlot(const SlotFile& f, std::int64_t slot) {
  SlotVerdict v;
  if (f.over_limit) {
    v.why = "it is larger than this node reads before its own bundle is sealed: " + f.problem;
  } else if (f.opened != Authenticity::kAuthentic) {
    v.why = "it does not open with this cluster's secret" + (f.problem.empty() ? std::string() : ": " + f.problem);
  } else if (f.kind != "scheduled") {
    v.why = "it is a " + f.kind + " bundle under a scheduled slot's name";
  } else if (f.created < slot) {
    v.why = "it was sealed at " + FormatUtc(f.created) + ", before the slot began at " + FormatUtc(slot) +
            " (an older bundle under the slot's name)";
  } else {
    v.counts = true;
  }
  return v;
}

std::int64_t TempFileTime(const SinkFile& f, std::int64_t now) {
  if (f.mtime <= now + kStaleTempSeconds) return f.mtime;
  // A time far ahead is no time at all (libnfs 4.0 leaves an exclusive create's
  // verifier in the file's times): the bundle's own name says when it was begun.
  auto parsed = TempBundleName(f.file);
  return parsed ? parsed->time : f.mtime;
}

Retention Prune(const std::vector<SinkFile>& files, std::string_view cluster, int keep, std::int64_t now,
                std::string_view protect) {
  Retention r;
  for (const auto& f : files) {
    if (!IsTempName(f.file) || now - TempFileTime(f, now) <= kStaleTempSeconds) continue;
    auto carried = TempBundleName(f.file);
    if (!carried || carried->cluster != cluster) continue;  // not this cluster's name: not ours to judge
    if (f.opened == Authenticity::kAuthentic) {
      r.remove.push_back(f.file);
    } else {
      r.not_counted.push_back(f.file + ": a temporary file over an hour old that does not open as a bundle of " +
                              std::string(cluster) + " (" + (f.problem.empty() ? "not checked" : f.problem) +
                              "); not removed");
    }
  }
  std::vector<SinkFile> good;
  for (auto& l : ListBundles(files, cluster)) {
    SinkFile& f = l.file;
    if (f.opened == Authenticity::kAuthentic) {
      good.push_back(std::move(f));
    } else {
      r.not_counted.push_back(f.file + ": " + (f.problem.empty() ? std::string("not checked") : f.problem));
    }
  }
  if (good.empty()) {
    if (!r.not_counted.empty())
      r.held = "no bundle of " + std::string(cluster) + " opens with this cluster's secret; removing none";
    return r;
  }
  // Newest authenticated time first; ties by sealing, then name, so the order is total.
  std::sort(good.begin(), good.end(), [](const SinkFile& a, const SinkFile& b) {
    if (a.created != b.created) return a.created > b.created;
    if (a.sealing != b.sealing) return a.sealing > b.sealing;
    return a.file > b.file;
  });
  std::vector<std::string> kept;  // sealings kept, at most keep
  const auto limit = static_cast<std::size_t>(std::max(keep, 1));
  for (const SinkFile& g : good) {
    bool keep_it = std::find(kept.begin(), kept.end(), g.sealing) != kept.end();
    if (!keep_it && kept.size() < limit) {
      kept.push_back(g.sealing);
      keep_it = true;
    }
    if (!keep_it && g.file != protect) r.remove.push_back(g.file);
  }
  return r;
}

}  // namespace sprout::backup
