#include "backup/sink.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>

#include "backup/take.h"
#include "util/sha256.h"

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
  std::uint64_t most_read = 0;      // the largest ReadPrefix limit asked for
  std::uint64_t largest_piece = 0;  // the largest piece ReadChunks passed
  std::uint64_t streamed = 0;       // bytes ReadChunks passed in all

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
  Result<std::string> ReadPrefix(const std::string& name, std::uint64_t limit) override {
    if (fail_read) return Fail("Command timed out");
    auto it = files.find(name);
    if (it == files.end()) return Fail("no such file");
    most_read = std::max(most_read, limit);
    std::string all = corrupt_read ? it->second + "x" : it->second;
    return all.substr(0, static_cast<std::size_t>(std::min<std::uint64_t>(limit, all.size())));
  }
  Status ReadChunks(const std::string& name, std::uint64_t limit,
                    const std::function<bool(std::string_view)>& each) override {
    if (fail_read) return Fail("Command timed out");
    auto it = files.find(name);
    if (it == files.end()) return Fail("no such file");
    std::string all = corrupt_read ? it->second + "x" : it->second;
    std::string_view rest(all);
    if (rest.size() > limit) rest = rest.substr(0, static_cast<std::size_t>(limit));
    while (!rest.empty()) {
      auto piece = rest.substr(0, std::min(rest.size(), kChunkSize));
      largest_piece = std::max<std::uint64_t>(largest_piece, piece.size());
      streamed += piece.size();
      rest.remove_prefix(piece.size());
      if (!each(piece)) break;
    }
    return Ok{};
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

namespace {

// Sealed is a real bundle of cluster "c" under secret "s3cret", taken at `created`;
// `seed` varies its salt, so two calls with different seeds are two sealings.
std::string Sealed(std::int64_t created, std::uint8_t seed) {
  std::string db(4096, 'd');
  Sha256 h;
  h.Update(db);
  auto d = h.Digest();
  db.append(reinterpret_cast<const char*>(d.data()), d.size());
  BundleContents c;
  c.identity = Identity{"c", "sprout-token", {"n1=https://198.18.12.11:2380"}};
  c.snapshot = db;
  for (const auto& f : kRequiredFiles) c.files[f] = "contents of " + f;
  BundleHeader header;
  header.cluster = "c";
  header.created = created;
  header.kind = "scheduled";
  header.node = "n1";
  Salt salt{};
  salt.fill(seed);
  Nonce nonce{};
  nonce.fill(seed);
  auto b = SealBundle(header, c, "s3cret", salt, nonce);
  REQUIRE(b);
  return *b;
}

// Forged is a bundle-shaped file whose clear header reads and whose size matches it,
// claiming `created`, with bytes nobody sealed.
std::string Forged(std::int64_t created) {
  std::string b = Sealed(created, 0xee);
  b[b.size() - 1] = static_cast<char>(b.back() ^ 1);  // the tag no longer verifies
  return b;
}

std::string At(std::int64_t t) { return NameFor({"c", t, "scheduled", ""}); }

bool Has(const std::map<std::string, std::string>& files, const std::string& name) { return files.count(name) != 0; }

}  // namespace

TEST_CASE("ScanBundles reads at most a header's worth of each file, and nothing of one over the size limit",
          "[backup]") {
  MemorySink sink;
  std::string real = Sealed(1'800'000'000, 1);
  sink.files[At(1'800'000'000)] = real;
  sink.files[At(1'800'000'060)] = real.substr(0, real.size() - 10);  // truncated
  auto files = ScanBundles(sink);
  REQUIRE(files);
  CHECK(sink.most_read == kMaxHeadSize);
  for (const auto& f : *files) {
    INFO(f.file);
    CHECK(f.opened == Authenticity::kUnchecked);  // a scan authenticates nothing
    if (f.file == At(1'800'000'000)) CHECK(f.header_ok);
    if (f.file == At(1'800'000'060)) CHECK_THAT(f.problem, Catch::Contains("cut short"));
  }

  // A listing that says a bundle is larger than any bundle may be: not read at all.
  class Huge : public MemorySink {
   public:
    Result<std::vector<SinkEntry>> List() override {
      return std::vector<SinkEntry>{SinkEntry{At(1'800'000'000), kMaxBundleSize + 1, 0}};
    }
  } huge;
  huge.files[At(1'800'000'000)] = real;
  auto big = ScanBundles(huge);
  REQUIRE(big);
  REQUIRE(big->size() == 1);
  CHECK_FALSE((*big)[0].header_ok);
  CHECK_THAT((*big)[0].problem, Catch::Contains("over the"));
  CHECK(huge.most_read == 0);
  CHECK_THAT(huge.Read(At(1'800'000'000), 100).error(), Catch::Contains("is over 100 bytes"));
}

TEST_CASE("retention in a sink counts only bundles that open, by the time inside them", "[backup]") {
  const std::int64_t now = 1'800'000'000;
  MemorySink sink;
  // Three real bundles an hour apart, then forged ones with clear headers that read,
  // named and dated far in the future (the attack: every new bundle would be the
  // oldest by name and pruned as soon as it was written).
  for (int i = 0; i < 3; ++i)
    sink.files[At(now - std::int64_t{3600} * (3 - i))] =
        Sealed(now - std::int64_t{3600} * (3 - i), std::uint8_t(i + 1));
  for (int i = 0; i < 3; ++i) sink.files[At(4'000'000'000 + i)] = Forged(4'000'000'000 + i);
  // A copy of the oldest real bundle under a future name counts as that bundle.
  sink.files[At(4'100'000'000)] = sink.files.at(At(now - std::int64_t{3} * 3600));
  // The bundle just written.
  std::string written = At(now);
  sink.files[written] = Sealed(now, 9);

  auto r = PruneSink(sink, "c", "s3cret", 2, now, written);
  // Kept: the two newest sealings by their own time (now, now-1h); removed: the older
  // two and the replayed copy of the oldest; the forged files neither count nor go.
  CHECK(Has(sink.files, written));
  CHECK(Has(sink.files, At(now - 3600)));
  CHECK_FALSE(Has(sink.files, At(now - 7200)));
  CHECK_FALSE(Has(sink.files, At(now - std::int64_t{3} * 3600)));
  CHECK_FALSE(Has(sink.files, At(4'100'000'000)));
  for (int i = 0; i < 3; ++i) CHECK(Has(sink.files, At(4'000'000'000 + i)));
  CHECK(r.remove.size() == 3);
  CHECK(r.not_counted.size() == 3);
  CHECK_THAT(r.not_counted[0], Catch::Contains("does not open with this cluster's secret"));
  CHECK(r.held.empty());
}

TEST_CASE("retention never removes the bundle just written, even when its time is the oldest", "[backup]") {
  const std::int64_t now = 1'800'000'000;
  MemorySink sink;
  // Two real bundles from a node whose clock ran a day ahead; this node's clock is right.
  sink.files[At(now + 86400)] = Sealed(now + 86400, 1);
  sink.files[At(now + 86460)] = Sealed(now + 86460, 2);
  std::string written = At(now);
  sink.files[written] = Sealed(now, 3);
  auto r = PruneSink(sink, "c", "s3cret", 1, now, written);
  CHECK(Has(sink.files, written));
  CHECK(Has(sink.files, At(now + 86460)));  // the newest that opens stays too
  CHECK_FALSE(Has(sink.files, At(now + 86400)));
  CHECK(r.remove == std::vector<std::string>{At(now + 86400)});
}

TEST_CASE("retention removes nothing when no bundle opens, and a truncated bundle is not counted", "[backup]") {
  const std::int64_t now = 1'800'000'000;
  MemorySink sink;
  std::string real = Sealed(now - 60, 1);
  sink.files[At(now - 60)] = real;
  sink.files[At(now)] = real.substr(0, real.size() / 2);
  auto wrong = PruneSink(sink, "c", "other secret", 1, now, "");
  CHECK(wrong.remove.empty());
  CHECK_THAT(wrong.held, Catch::Contains("no bundle of c opens"));
  CHECK(sink.files.size() == 2);
  auto r = PruneSink(sink, "c", "s3cret", 1, now, "");
  CHECK(r.remove.empty());
  REQUIRE(r.not_counted.size() == 1);
  CHECK_THAT(r.not_counted[0], Catch::Contains("cut short"));
}

TEST_CASE("CheckBundle authenticates in pieces of at most 64 KiB and stops at the first byte that cannot open",
          "[backup]") {
  MemorySink sink;
  std::string real = Sealed(1'800'000'000, 1);
  sink.files["real"] = real;
  auto good = CheckBundle(sink, "real", "c", "s3cret");
  REQUIRE(good);
  CHECK(good->opened == Authenticity::kAuthentic);
  CHECK(good->header.created == 1'800'000'000);
  CHECK(good->sha256 == Sha256Hex(real));
  CHECK(good->size == real.size());
  CHECK(sink.largest_piece <= Sink::kChunkSize);

  sink.files["forged"] = Forged(1'800'000'060);
  auto forged = CheckBundle(sink, "forged", "c", "s3cret");
  REQUIRE(forged);
  CHECK(forged->opened == Authenticity::kRefused);
  CHECK_THAT(forged->problem, Catch::Contains("does not open with this cluster's secret"));

  sink.files["other"] = real;
  auto other = CheckBundle(sink, "other", "d", "s3cret");  // another cluster's: stops after the header
  REQUIRE(other);
  CHECK(other->opened == Authenticity::kRefused);
  CHECK_THAT(other->problem, Catch::Contains("a backup of cluster 'c'"));
  CHECK(other->sha256.empty());

  sink.files["appended"] = real + std::string(3 << 20, '\0');
  sink.streamed = 0;
  auto appended = CheckBundle(sink, "appended", "c", "s3cret");
  REQUIRE(appended);
  CHECK(appended->opened == Authenticity::kRefused);
  CHECK_THAT(appended->problem, Catch::Contains("bytes appended"));
  CHECK(sink.streamed < real.size() + 2 * Sink::kChunkSize);  // it stopped reading there

  auto no_secret = CheckBundle(sink, "real", "c", "");
  REQUIRE(no_secret);
  CHECK(no_secret->opened == Authenticity::kUnchecked);
  CHECK(no_secret->sha256 == Sha256Hex(real));
}

TEST_CASE("64 junk names newer than every bundle and claiming 8 GiB do not stop retention", "[backup]") {
  // The attack: before, a prune opened the 64 newest names only, so 64 forged files
  // named in the future left every real bundle unchecked, and retention held forever.
  const std::int64_t now = 1'800'000'000;
  MemorySink plain;
  for (int i = 0; i < 4; ++i)
    plain.files[At(now - std::int64_t{3600} * (4 - i))] =
        Sealed(now - std::int64_t{3600} * (4 - i), std::uint8_t(i + 1));
  for (int i = 0; i < 64; ++i) plain.files[At(4'000'000'000 + i)] = Forged(4'000'000'000 + i);
  std::string written = At(now);
  plain.files[written] = Sealed(now, 9);
  auto r = PruneSink(plain, "c", "s3cret", 2, now, written);
  CHECK(r.held.empty());
  CHECK(r.remove.size() == 3);  // the three oldest real bundles
  CHECK(Has(plain.files, written));
  CHECK(Has(plain.files, At(now - 3600)));
  CHECK(r.not_counted.size() == 64);
}

namespace {

// SparseSink holds one file that is only a claim: a clear header of cluster "c" giving
// `payload` bytes, then zeros up to the size it claims (as a sparse file on a share is:
// listed at its size, all holes). The zeros are made a piece at a time, so the test
// itself holds none of them.
class SparseSink : public MemorySink {
 public:
  std::string name;
  std::string head;        // magic, version, length, header JSON
  std::uint64_t size = 0;  // what the file claims to be

  SparseSink(std::string file, std::uint64_t payload) : name(std::move(file)) {
    const std::string json = R"({"cluster":"c","created":4102444790,"kind":"scheduled","node":"n1","revision":1,)"
                             R"("keys":1,"snapshot_sha256":")" +
                             std::string(64, '0') + R"(","snapshot_size":1,"payload_size":)" + std::to_string(payload) +
                             R"(,"salt":")" + std::string(32, '0') + R"("})";
    head = "SPRB\x01";
    for (int i = 0; i < 4; ++i) head += static_cast<char>((json.size() >> (8 * i)) & 0xff);
    head += json;
    size = head.size() + 12 + payload + 16;
  }
  // ReadPrefix of the sparse file is what reading it whole is (Sink::Read): counted, and
  // refused, so no test holds it.
  Result<std::string> ReadPrefix(const std::string& file, std::uint64_t limit) override {
    if (file != name) return MemorySink::ReadPrefix(file, limit);
    most_read = std::max(most_read, limit);
    return Fail("this test reads the sparse file only in pieces");
  }
  Status ReadChunks(const std::string& file, std::uint64_t limit,
                    const std::function<bool(std::string_view)>& each) override {
    if (file != name) return MemorySink::ReadChunks(file, limit, each);
    std::string piece(kChunkSize, '\0');
    for (std::uint64_t at = 0; at < std::min(limit, size);) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>({kChunkSize, size - at, limit - at}));
      std::fill(piece.begin(), piece.end(), '\0');
      if (at < head.size()) head.copy(piece.data(), std::min<std::size_t>(n, head.size() - at), at);
      largest_piece = std::max<std::uint64_t>(largest_piece, n);
      streamed += n;
      at += n;
      if (!each(std::string_view(piece.data(), n))) break;
    }
    return Ok{};
  }
  Result<std::vector<SinkEntry>> List() override {
    auto out = MemorySink::List();
    if (out) out->push_back(SinkEntry{name, size, 0});
    return out;
  }
};

// PeakRssKiB is this process's peak resident set (VmHWM); ResetPeakRss starts it again
// from the current resident set (Linux: clear_refs 5), so a test measures its own peak.
long PeakRssKiB() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  long kib = -1;
  char line[256];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
  }
  std::fclose(f);
  return kib;
}
bool ResetPeakRss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

}  // namespace

TEST_CASE("a sparse file claiming 8 GiB is refused from its header, and one within etcd's quota with 64 KiB pieces",
          "[backup]") {
  std::printf("bundle bound: etcd's quota %llu bytes, a payload at most %llu, a bundle at most %llu\n",
              static_cast<unsigned long long>(kEtcdQuotaBytes), static_cast<unsigned long long>(kMaxPayloadSize),
              static_cast<unsigned long long>(kMaxBundleSize));
  // Claiming 8 GiB: over etcd's quota, so the header alone refuses it; ScanBundles
  // does not read a byte of it (listed over kMaxBundleSize), CheckBundle stops after the
  // header (before, a listing, a prune and a restore read it whole, then decrypted it
  // into a second buffer: 16 GiB).
  const std::string name = At(4'102'444'790);
  SparseSink big(name, std::uint64_t{8} << 30);
  auto checked = CheckBundle(big, name, "c", "s3cret");
  REQUIRE(checked);
  CHECK(checked->opened == Authenticity::kRefused);
  CHECK_THAT(checked->problem, Catch::Contains("claims a payload of 8589934592 bytes, over the"));
  CHECK(big.streamed <= Sink::kChunkSize);
  CHECK(big.most_read == 0);  // nothing was read whole (Sink::Read)
  auto scanned = ScanBundles(big);
  REQUIRE(scanned);
  REQUIRE(scanned->size() == 1);
  CHECK_FALSE((*scanned)[0].header_ok);
  std::printf("sparse 8 GiB claim: %llu bytes listed, %llu read before it was refused\n",
              static_cast<unsigned long long>(big.size), static_cast<unsigned long long>(big.streamed));

  // Claiming 256 MiB, within the quota: the header reads, so the file is read through
  // (a forgery shows only at the tag), in 64 KiB pieces, and memory does not grow with it.
  SparseSink mid(name, std::uint64_t{256} << 20);
  const bool reset = ResetPeakRss();
  const long before = PeakRssKiB();
  auto forged = CheckBundle(mid, name, "c", "s3cret");
  const long peak = PeakRssKiB();
  REQUIRE(forged);
  CHECK(forged->opened == Authenticity::kRefused);
  CHECK_THAT(forged->problem, Catch::Contains("does not open with this cluster's secret"));
  CHECK(mid.streamed == mid.size);
  CHECK(mid.largest_piece <= Sink::kChunkSize);
  CHECK(mid.most_read == 0);
  std::printf(
      "sparse 256 MiB claim: %llu bytes read in pieces of at most %llu, refused at the tag; peak RSS %ld kB "
      "before, %ld kB after (%s)\n",
      static_cast<unsigned long long>(mid.streamed), static_cast<unsigned long long>(mid.largest_piece), before, peak,
      reset ? "peak reset first" : "peak not resettable here");
  if (reset && before > 0) CHECK(peak - before < 16L * 1024);  // 256 MiB read whole would be 262,144 kB
}

TEST_CASE("pre-created slot names do not stop a scheduled backup: it lands under a name of its own and lists first",
          "[backup]") {
  // The attack: anyone who can write to the share makes the coming slots' names ahead.
  // Before, a slot whose name existed was taken as written and given up.
  const std::int64_t slot = 1'800'000'000;
  const std::string old_bundle = Sealed(slot - 86400, 3);  // a real bundle of yesterday
  struct Case {
    const char* what;
    std::string bytes;
  };
  const Case cases[] = {
      {"junk", "not a bundle"},
      {"an older real bundle renamed", old_bundle},
      {"a forged bundle", Forged(slot + 5)},
  };
  int tags = 0;
  for (const auto& c : cases) {
    INFO(c.what);
    MemorySink sink;
    sink.files[At(slot - 86400)] = old_bundle;
    sink.files[At(slot)] = c.bytes;
    SlotWriter w{"c", "s3cret", "n1", 7, slot, [&tags]() -> Result<std::string> {
                   ++tags;
                   return std::string("00000000000000") + static_cast<char>('0' + tags / 10) +
                          static_cast<char>('0' + tags % 10);
                 }};
    auto before = LookAtSlot(sink, w);
    REQUIRE(before);
    CHECK_FALSE(before->existed);
    CHECK_FALSE(before->squatted.empty());
    const std::string sealed = Sealed(slot + 3, 9);
    auto placed = PlaceSlotBundle(sink, w, *before, sealed);
    REQUIRE(placed);
    CHECK_FALSE(placed->existed);
    CHECK(placed->file != At(slot));
    CHECK(ParseName(placed->file));
    CHECK(sink.files.at(placed->file) == sealed);
    CHECK(sink.files.at(At(slot)) == c.bytes);  // the squatter's file is left alone
    // Listed: the slot's bundle is the first good line, at its sealed time.
    auto files = ScanBundles(sink);
    REQUIRE(files);
    AuthenticateBundles(sink, *files, "c", "s3cret", placed->file);
    auto listed = ListBundles(*files, "c");
    REQUIRE_FALSE(listed.empty());
    CHECK(listed[0].file.file == placed->file);
    CHECK(listed[0].file.opened == Authenticity::kAuthentic);
    CHECK(listed[0].file.created == slot + 3);
    std::printf("slot name held %s: %s; wrote %s\n", c.what, before->squatted.c_str(), placed->file.c_str());
  }

  // The slot's own bundle, already there (another leader's), counts: nothing written.
  MemorySink done;
  done.files[At(slot)] = Sealed(slot + 2, 4);
  SlotWriter w{"c", "s3cret", "n1", 7, slot, []() -> Result<std::string> { return std::string(16, 'a'); }};
  auto before = LookAtSlot(done, w);
  REQUIRE(before);
  CHECK(before->existed);

  // The name made while this node wrote (after LookAtSlot found it free): judged the
  // same way, and the bundle goes under a tagged name.
  MemorySink race;
  auto free_slot = LookAtSlot(race, w);
  REQUIRE(free_slot);
  CHECK_FALSE(free_slot->existed);
  race.files[At(slot)] = "made while the node wrote";
  auto placed = PlaceSlotBundle(race, w, *free_slot, Sealed(slot + 3, 9));
  REQUIRE(placed);
  CHECK(placed->file == NameFor({"c", slot, "scheduled", "", std::string(16, 'a')}));
  CHECK_THAT(placed->squatted, Catch::Contains("does not open"));
  CHECK(race.files.count(placed->file) == 1);
}
