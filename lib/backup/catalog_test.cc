#include "backup/catalog.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <optional>

using namespace sprout::backup;

namespace {

// Good is a bundle that opened, sealed at the time its name says (or `created`), one
// sealing per file unless `sealing` says otherwise.
SinkFile Good(const std::string& file, std::int64_t mtime = 0, std::optional<std::int64_t> created = std::nullopt,
              const std::string& sealing = "") {
  auto n = ParseName(file);
  SinkFile f{file, 100, mtime, true, "", 1};
  f.opened = Authenticity::kAuthentic;
  f.created = created ? *created : (n ? n->time : 0);
  f.sealing = sealing.empty() ? file : sealing;
  return f;
}
SinkFile Bad(const std::string& file) { return SinkFile{file, 10, 0, false, "it was cut short", 0}; }
// Forged is a file whose clear header reads (a claim) but that did not open.
SinkFile Forged(const std::string& file) {
  SinkFile f{file, 100, 0, true, "", 1};
  f.opened = Authenticity::kRefused;
  f.problem = "the bundle does not open with this cluster's secret";
  return f;
}

std::string Scheduled(const std::string& cluster, std::int64_t t) { return NameFor({cluster, t, "scheduled", ""}); }

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

TEST_CASE("bundle names carry cluster, UTC time and kind, and parse back", "[backup]") {
  CHECK(FormatUtc(0) == "19700101T000000Z");
  CHECK(FormatUtc(1795600500) == "20261125T095500Z");
  CHECK(ParseUtc("20261125T095500Z") == 1795600500);
  CHECK_FALSE(ParseUtc("20261399T064500Z").has_value());
  CHECK_FALSE(ParseUtc("2026-11-26").has_value());

  BundleName s{"sprt-backup", 1795600500, "scheduled", ""};
  CHECK(NameFor(s) == "sprt-backup-20261125T095500Z-scheduled.sprout-backup");
  CHECK(ParseName(NameFor(s)) == s);
  BundleName m{"edge", 1795600501, "manual", "node-1"};
  CHECK(NameFor(m) == "edge-20261125T095501Z-manual-node-1.sprout-backup");
  CHECK(ParseName(NameFor(m)) == m);

  CHECK_FALSE(ParseName("edge-20261125T095500Z-scheduled.sprout-backup.tmp-n1-7").has_value());
  CHECK_FALSE(ParseName(TempNameFor(NameFor(s), "n1", 7)).has_value());
  CHECK(IsTempName(TempNameFor(NameFor(s), "n1", 7)));
  CHECK_FALSE(IsTempName(NameFor(s)));
  CHECK_FALSE(ParseName("edge-20261125T095500Z-weekly.sprout-backup").has_value());
  CHECK_FALSE(ParseName("notes.txt").has_value());
}

TEST_CASE("names of one cluster sort by time", "[backup]") {
  std::vector<std::string> names = {Scheduled("c", 1795600500), Scheduled("c", 1795600440),
                                    NameFor({"c", 1795600470, "manual", "n2"})};
  std::sort(names.begin(), names.end());
  CHECK(names[0] == Scheduled("c", 1795600440));
  CHECK(names[2] == Scheduled("c", 1795600500));
}

TEST_CASE("a listing shows this cluster's bundles newest first, and never a temporary file", "[backup]") {
  std::vector<SinkFile> files = {Good(Scheduled("c", 100)),
                                 Good(Scheduled("c", 300)),
                                 Good(Scheduled("other", 400)),
                                 Good(TempNameFor(Scheduled("c", 500), "n1", 9)),
                                 Good("README"),
                                 Bad(Scheduled("c", 200))};
  auto l = ListBundles(files, "c");
  REQUIRE(l.size() == 3);
  CHECK(l[0].name.time == 300);
  CHECK(l[1].name.time == 100);
  CHECK(l[2].name.time == 200);  // it did not open: after every bundle that did
  CHECK_FALSE(l[2].file.header_ok);
}

TEST_CASE("a listing orders by the time sealed inside each bundle: a renamed old bundle is not the newest",
          "[backup]") {
  // The attack: an old bundle copied under a name far in the future was listed first,
  // and the runbook restores the first good one.
  std::vector<SinkFile> files = {
      Good(Scheduled("c", 1000)), Good(Scheduled("c", 2000)), Good(Scheduled("c", 4'000'000'000), 0, 10, "old-sealing"),
      Good(NameFor({"c", 3000, "scheduled", "", "0123456789abcdef"}), 0, 3000), Forged(Scheduled("c", 4'000'000'001))};
  auto l = ListBundles(files, "c");
  REQUIRE(l.size() == 5);
  CHECK(l[0].file.created == 3000);
  CHECK(l[0].name.tag == "0123456789abcdef");
  CHECK(l[1].file.created == 2000);
  CHECK(l[2].file.created == 1000);
  CHECK(l[3].file.file == Scheduled("c", 4'000'000'000));  // sealed at 10: the oldest
  CHECK(l[4].file.opened == Authenticity::kRefused);       // never above a bundle that opened
}

TEST_CASE("a scheduled slot under another name parses back, and nothing else takes that shape", "[backup]") {
  BundleName t{"edge", 1795600500, "scheduled", "", "00ff00ff00ff00ff"};
  CHECK(NameFor(t) == "edge-20261125T095500Z-scheduled-00ff00ff00ff00ff.sprout-backup");
  CHECK(ParseName(NameFor(t)) == t);
  CHECK_FALSE(ParseName("edge-20261125T095500Z-scheduled-00FF.sprout-backup").has_value());
  CHECK_FALSE(ParseName("edge-20261125T095500Z-scheduled-.sprout-backup").has_value());
  auto m = ParseName("edge-20261125T095500Z-manual-n1.sprout-backup");
  REQUIRE(m);
  CHECK(m->tag.empty());
  CHECK(m->node == "n1");
}

TEST_CASE("a slot's file counts only when it authenticates as this slot's scheduled bundle", "[backup]") {
  const std::int64_t slot = 1795600500;
  struct Case {
    const char* what;
    SlotFile file;
    bool counts;
    const char* why;
  };
  for (const auto& c : {
           Case{"this slot's bundle", {Authenticity::kAuthentic, "scheduled", slot + 2, ""}, true, ""},
           Case{"junk made by the share's writer",
                {Authenticity::kRefused, "", 0, "not a sprout backup bundle (no SPRB magic)"},
                false,
                "does not open with this cluster's secret: not a sprout backup bundle"},
           Case{"a sparse file claiming 8 GiB",
                {Authenticity::kRefused, "", 0, "the bundle does not open"},
                false,
                "does not open"},
           Case{"an older bundle renamed to the slot",
                {Authenticity::kAuthentic, "scheduled", slot - 3600, ""},
                false,
                "before the slot began"},
           Case{"a file too large to read before the snapshot",
                {Authenticity::kRefused, "", 0, "it is over 67108864 bytes", true},
                false,
                "larger than this node reads before its own bundle is sealed"},
           Case{"a manual bundle renamed to the slot",
                {Authenticity::kAuthentic, "manual", slot + 5, ""},
                false,
                "a manual bundle under a scheduled slot's name"},
       }) {
    INFO(c.what);
    auto v = JudgeSlot(c.file, slot);
    CHECK(v.counts == c.counts);
    CHECK_THAT(v.why, Catch::Contains(c.why));
  }
}

TEST_CASE("a prune opens the smallest bundles first, so junk claiming the largest bundle cannot crowd out real ones",
          "[backup]") {
  std::vector<SinkFile> files;
  for (int i = 0; i < 64; ++i) {
    SinkFile junk = Forged(Scheduled("c", 4'000'000'000 + i));
    junk.opened = Authenticity::kUnchecked;
    junk.size = kMaxBundleSize;  // the largest a header may claim (etcd's quota and the PKI)
    files.push_back(junk);
  }
  for (int i = 0; i < 3; ++i) {
    SinkFile real = Good(Scheduled("c", 1000 + i));
    real.opened = Authenticity::kUnchecked;
    real.size = 3'000'000;
    files.push_back(real);
  }
  files.push_back(Bad(Scheduled("c", 5000)));                  // its header does not read: never opened
  files.push_back(Good(Scheduled("other", 5000)));             // another cluster's: never opened
  auto plan = OpenOrder(files, "c", kMaxBytesOpenedPerPrune);  // two of the largest bundles
  REQUIRE(plan.open.size() == 4);
  CHECK(files[plan.open[0]].file == Scheduled("c", 1002));  // equal sizes: the newer name first
  CHECK(files[plan.open[1]].file == Scheduled("c", 1001));
  CHECK(files[plan.open[2]].file == Scheduled("c", 1000));
  CHECK(files[plan.open[3]].size == kMaxBundleSize);  // one junk file fits the rest of the budget
  CHECK(plan.skipped.size() == 63);

  // Claiming 8 GiB is over any bundle etcd's quota allows: never opened, bound or not.
  auto eight = files;
  for (auto& f : eight) {
    if (f.size == kMaxBundleSize) f.size = std::uint64_t{8} << 30;
  }
  auto over = OpenOrder(eight, "c", kMaxBytesOpenedPerPrune);
  CHECK(over.open.size() == 3);
  CHECK(over.too_large.size() == 64);

  // With the bundle just written known (3 MB), nothing over four times it is read at all.
  CHECK(BundleSizeBound(3'000'000) == std::uint64_t{64} << 20);
  CHECK(BundleSizeBound(std::uint64_t{256} << 20) == std::uint64_t{1} << 30);
  CHECK(BundleSizeBound(std::uint64_t{1} << 30) == kMaxBundleSize);
  auto bounded = OpenOrder(files, "c", kMaxBytesOpenedPerPrune, BundleSizeBound(3'000'000));
  CHECK(bounded.open.size() == 3);
  CHECK(bounded.too_large.size() == 64);
  CHECK(bounded.skipped.empty());

  // Junk of a real bundle's size is all opened (64 of them are 192 MB): nothing is skipped.
  for (auto& f : files) {
    if (f.size == kMaxBundleSize) f.size = 3'000'000;
  }
  auto small = OpenOrder(files, "c", kMaxBytesOpenedPerPrune);
  CHECK(small.open.size() == 67);
  CHECK(small.skipped.empty());
}

TEST_CASE("retention keeps the newest N bundles that open of this cluster and removes the older ones", "[backup]") {
  std::vector<SinkFile> files;
  for (int i = 1; i <= 5; ++i) files.push_back(Good(Scheduled("c", std::int64_t{i} * 60)));
  files.push_back(Good(Scheduled("other", 10)));
  files.push_back(Bad(Scheduled("c", 150)));
  auto r = Prune(files, "c", 3, 1000);
  CHECK(r.held.empty());
  CHECK(r.remove.size() == 2);
  CHECK(Has(r.remove, Scheduled("c", 60)));
  CHECK(Has(r.remove, Scheduled("c", 120)));
  CHECK_FALSE(Has(r.remove, Scheduled("c", 150)));  // did not open: neither counted nor removed
  CHECK_FALSE(Has(r.remove, Scheduled("other", 10)));
  CHECK_FALSE(Has(r.remove, Scheduled("c", 180)));
  CHECK(r.not_counted == std::vector<std::string>{Scheduled("c", 150) + ": it was cut short"});

  CHECK(Prune(files, "c", 0, 1000).remove.size() == 4);  // keep < 1 keeps one
}

TEST_CASE("retention orders by the authenticated time, never by the name", "[backup]") {
  // Hostile sinks, each with what must stay. A name is a claim; so is a clear header.
  struct Case {
    const char* what;
    std::vector<SinkFile> files;
    int keep;
    std::string protect;
    std::vector<std::string> removed;
  };
  const std::string far1 = Scheduled("c", 4'000'000'000);
  const std::string far2 = Scheduled("c", 4'000'000'060);
  const std::string a = Scheduled("c", 1000);
  const std::string b = Scheduled("c", 2000);
  const std::string now = Scheduled("c", 3000);
  const std::vector<Case> cases = {
      {"future-dated names that do not open are not counted: the new bundle stays",
       {Forged(far1), Forged(far2), Good(a), Good(b), Good(now)},
       2,
       now,
       {a}},
      {"a real bundle renamed into the future counts at its own time",
       {Good(far1, 0, 1000), Good(b), Good(now)},
       2,
       now,
       {far1}},
      {"copies of one sealing under several names count once",
       {Good(a), Good(b), Good(far1, 0, 3000, now), Good(far2, 0, 3000, now), Good(now)},
       2,
       now,
       {a}},
      {"the bundle just written stays even when its own time is the oldest",
       {Good(a, 0, 5000), Good(b, 0, 6000), Good(now, 0, 10)},
       1,
       now,
       {a}},
      {"the newest bundle that opens stays whatever keep says", {Good(a), Good(b), Forged(now)}, 0, "", {a}},
      {"nothing opens: nothing is removed", {Forged(a), Forged(b), Bad(now)}, 1, now, {}},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    auto r = Prune(c.files, "c", c.keep, 10000, c.protect);
    std::vector<std::string> removed = r.remove;
    std::sort(removed.begin(), removed.end());
    CHECK(removed == c.removed);
  }
}

TEST_CASE("retention removes nothing and says why when no bundle of the cluster opens", "[backup]") {
  std::vector<SinkFile> files = {Forged(Scheduled("c", 60)), Bad(Scheduled("c", 180)), Good(Scheduled("other", 1))};
  auto r = Prune(files, "c", 1, 1000);
  CHECK(r.remove.empty());
  CHECK(r.held == "no bundle of c opens with this cluster's secret; removing none");
  CHECK(r.not_counted.size() == 2);
}

TEST_CASE("retention removes temporary files only once they are an hour old", "[backup]") {
  std::string fresh = TempNameFor(Scheduled("c", 60), "n1", 1);
  std::string stale = TempNameFor(Scheduled("c", 120), "n2", 2);
  std::vector<SinkFile> files = {Good(fresh, 10000 - 60), Good(stale, 10000 - kStaleTempSeconds - 1)};
  auto r = Prune(files, "c", 3, 10000);
  CHECK(r.remove == std::vector<std::string>{stale});
}

TEST_CASE("retention removes a stale temporary file only once it opened as this cluster's bundle", "[backup]") {
  // Anyone who can write to the share can make a name of that shape; a prune removes
  // nothing it did not authenticate as this cluster's.
  const std::int64_t old_time = 10000 - kStaleTempSeconds - 1;
  const std::string whole = TempNameFor(Scheduled("c", 120), "n2", 2);
  const std::string torn = TempNameFor(Scheduled("c", 180), "n1", 3);
  const std::string junk = TempNameFor(Scheduled("c", 240), "n1", 4);
  const std::string other = TempNameFor(Scheduled("d", 120), "n9", 5);
  SinkFile torn_file = Bad(torn);
  torn_file.mtime = old_time;
  SinkFile junk_file = Forged(junk);
  junk_file.mtime = old_time;
  SinkFile other_file = Good(other, old_time);
  std::vector<SinkFile> files = {Good(whole, old_time), torn_file, junk_file, other_file, Good(Scheduled("c", 9000))};
  auto r = Prune(files, "c", 3, 10000);
  CHECK(r.remove == std::vector<std::string>{whole});
  REQUIRE(r.not_counted.size() == 2);
  CHECK_THAT(r.not_counted[0], Catch::StartsWith(torn) && Catch::Contains("not removed"));
  CHECK_THAT(r.not_counted[1], Catch::StartsWith(junk) && Catch::Contains("does not open"));
  CHECK(r.held.empty());
}

TEST_CASE("a temporary file with a time far ahead is aged by the time in its name", "[backup]") {
  // libnfs 4.0 left such times (the year 2068 or 2106) on files cut off before a WRITE.
  std::int64_t now = 1'800'000'000;
  std::string old_one = TempNameFor(Scheduled("c", now - kStaleTempSeconds - 60), "n1", 1);
  std::string new_one = TempNameFor(Scheduled("c", now - 60), "n2", 2);
  std::string odd_name = ".c-garbage.sprout-backup.tmp-n3-3";
  std::int64_t far = 3'100'000'000;
  std::vector<SinkFile> files = {Good(old_one, far), Good(new_one, far), Good(odd_name, far)};
  CHECK(TempFileTime(files[0], now) == now - kStaleTempSeconds - 60);
  CHECK(TempFileTime(files[1], now) == now - 60);
  CHECK(TempFileTime(files[2], now) == far);  // no time in the name: kept, as before
  // A time within the hour ahead (clock skew between server and node) is believed.
  CHECK(TempFileTime(Good(old_one, now + 600), now) == now + 600);
  auto r = Prune(files, "c", 3, now);
  CHECK(r.remove == std::vector<std::string>{old_one});
}
