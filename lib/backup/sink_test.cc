#include "backup/sink.h"

#include <catch2/catch.hpp>
#include <map>

using namespace sprout;
using namespace sprout::backup;

namespace {

// MemorySink is a sink in memory whose calls can be made to fail, to drive WriteBundle
// through every way a share can let it down.
class MemorySink : public Sink {
 public:
  std::map<std::string, std::string> files;
  bool fail_write = false;    // WriteNew fails after leaving half the bytes
  bool fail_link = false;     // Link fails (not EEXIST)
  bool corrupt_read = false;  // Read returns other bytes
  bool fail_read = false;

  std::string Location() const override { return "mem://test"; }
  Status WriteNew(const std::string& name, std::string_view bytes) override {
    if (fail_write) {
      files[name] = std::string(bytes.substr(0, bytes.size() / 2));
      return Fail("Command timed out");
    }
    files[name] = std::string(bytes);
    return Ok{};
  }
  Result<bool> Link(const std::string& from, const std::string& to) override {
    if (fail_link) return Fail("Command timed out");
    if (files.count(to) != 0) return false;
    files[to] = files.at(from);
    return true;
  }
  Status Remove(const std::string& name) override {
    files.erase(name);
    return Ok{};
  }
  Result<std::string> Read(const std::string& name) override {
    if (fail_read) return Fail("Command timed out");
    auto it = files.find(name);
    if (it == files.end()) return Fail("no such file");
    return corrupt_read ? it->second + "x" : it->second;
  }
  Result<bool> Exists(const std::string& name) override { return files.count(name) != 0; }
  Result<std::vector<SinkEntry>> List() override {
    std::vector<SinkEntry> out;
    out.reserve(files.size());
    for (const auto& [name, data] : files) out.push_back(SinkEntry{name, data.size(), 0});
    return out;
  }
  Status Sync() override { return Ok{}; }
};

const std::string kName = "c-20261125T095500Z-scheduled.sprout-backup";

}  // namespace

TEST_CASE("sink locations: folders and nfs:// URLs, with errors that name the fix", "[backup]") {
  auto f = ParseSinkLocation("/var/lib/sprout/backups");
  REQUIRE(f);
  CHECK(f->kind == SinkLocation::Kind::kFolder);
  CHECK(f->folder == "/var/lib/sprout/backups");

  auto n = ParseSinkLocation("nfs://198.18.0.5/share/backups/");
  REQUIRE(n);
  CHECK(n->kind == SinkLocation::Kind::kNfs);
  CHECK(n->host == "198.18.0.5");
  CHECK(n->path == "/share/backups");
  CHECK(n->uid == 0);
  CHECK(n->text == "nfs://198.18.0.5/share/backups/");

  auto q = ParseSinkLocation("nfs://nas.site/backups?uid=1000&gid=100&version=4");
  REQUIRE(q);
  CHECK(q->uid == 1000);
  CHECK(q->gid == 100);

  struct Bad {
    const char* text;
    const char* says;
  };
  for (const auto& b :
       {Bad{"", "give a folder or nfs://HOST/PATH"}, Bad{"smb://nas/share", "only folders and nfs://HOST/PATH"},
        Bad{"nfs:///share", "no server"},
        Bad{"nfs://nas", "no folder on the server; write nfs://HOST/PATH, e.g. nfs://nas/backups"},
        Bad{"nfs://nas/", "no folder on the server"}, Bad{"nfs://nas:2049/share", "bare name or IPv4 address"},
        Bad{"nfs://nas/a//b", "plain names joined by '/'"}, Bad{"nfs://nas/a/../b", "plain names joined by '/'"},
        Bad{"nfs://nas/share?uid=me", "uid=me is not a number; write uid=N"},
        Bad{"nfs://nas/share?version=3", "only NFS version 4"},
        Bad{"nfs://nas/share?sec=krb5", "unknown option 'sec'; nfs:// shares take uid=N and gid=N"}}) {
    INFO(b.text);
    auto r = ParseSinkLocation(b.text);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains(b.says));
  }
}

TEST_CASE("a bundle's location splits into its sink and its name, and joins back", "[backup]") {
  auto a = SplitBundleLocation("nfs://198.18.0.5/share/c-1.sprout-backup?uid=7");
  REQUIRE(a);
  CHECK(a->sink == "nfs://198.18.0.5/share?uid=7");
  CHECK(a->name == "c-1.sprout-backup");
  CHECK(JoinLocation(a->sink, a->name) == "nfs://198.18.0.5/share/c-1.sprout-backup?uid=7");

  auto b = SplitBundleLocation("/srv/backups/c-1.sprout-backup");
  REQUIRE(b);
  CHECK(b->sink == "/srv/backups");
  CHECK(JoinLocation(b->sink, b->name) == "/srv/backups/c-1.sprout-backup");

  auto c = SplitBundleLocation("/srv/backups/");
  REQUIRE_FALSE(c);
  CHECK_THAT(c.error(), Catch::Contains("names a folder; give the bundle's file"));
  auto d = SplitBundleLocation("nfs://nas/c-1.sprout-backup");
  REQUIRE_FALSE(d);
  CHECK_THAT(d.error(), Catch::Contains("no folder on the server"));
}

TEST_CASE("WriteBundle: temporary name, link, read back; nothing partial is ever listed", "[backup]") {
  MemorySink sink;
  auto w = WriteBundle(sink, kName, "bundle bytes", "n1", 42);
  REQUIRE(w);
  CHECK(*w == SinkWrite::kWritten);
  CHECK(sink.files.size() == 1);
  CHECK(sink.files.at(kName) == "bundle bytes");

  SECTION("the slot's name exists: kExists, the first bundle is untouched, no temporary left") {
    auto again = WriteBundle(sink, kName, "other bytes", "n2", 43);
    REQUIRE(again);
    CHECK(*again == SinkWrite::kExists);
    CHECK(sink.files.size() == 1);
    CHECK(sink.files.at(kName) == "bundle bytes");
  }
  SECTION("the share fails mid-write: an error, no bundle name, the temporary removed") {
    MemorySink s;
    s.fail_write = true;
    auto r = WriteBundle(s, kName, "bundle bytes", "n1", 42);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("cannot write to the sink mem://test: Command timed out"));
    CHECK(s.files.empty());
  }
  SECTION("the link fails: an error, and only the temporary could be left, never listed") {
    MemorySink s;
    s.fail_link = true;
    auto r = WriteBundle(s, kName, "bundle bytes", "n1", 42);
    REQUIRE_FALSE(r);
    CHECK(s.files.empty());
  }
  SECTION("the bundle reads back differently: an error, and the name is removed") {
    MemorySink s;
    s.corrupt_read = true;
    auto r = WriteBundle(s, kName, "bundle bytes", "n1", 42);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("differs from what was written"));
    CHECK(s.files.empty());
  }
  SECTION("the read back fails: an error (the bundle is not reported good)") {
    MemorySink s;
    s.fail_read = true;
    auto r = WriteBundle(s, kName, "bundle bytes", "n1", 42);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("cannot read back mem://test/" + kName));
  }
}

TEST_CASE("ScanBundles reads headers of bundle names only; a leftover temporary is listed as a file, not a bundle",
          "[backup]") {
  MemorySink sink;
  sink.files[kName] = "not a bundle";
  sink.files[TempNameFor(kName, "n1", 7)] = "half";
  sink.files["notes.txt"] = "hello";
  auto files = ScanBundles(sink);
  REQUIRE(files);
  REQUIRE(files->size() == 3);
  int bundles = 0;
  for (const auto& f : *files) {
    if (f.file == kName) {
      CHECK_FALSE(f.header_ok);
      CHECK_FALSE(f.problem.empty());
    }
    if (ParseName(f.file)) ++bundles;
  }
  CHECK(bundles == 1);
  CHECK(ListBundles(*files, "c").size() == 1);
}
