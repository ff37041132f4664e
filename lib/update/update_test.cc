#include <catch2/catch.hpp>

#include "image/gpt.h"
#include "image/plan.h"
#include "update/build.h"
#include "update/entries.h"
#include "update/gpt_patch.h"
#include "update/health.h"
#include "update/plan.h"
#include "util/sha256.h"

using namespace sprout;
using namespace sprout::update;

namespace {

const std::string kHashA = std::string(64, 'a');
const std::string kHashB = std::string(64, 'b');
const std::string kHashC = std::string(64, 'c');

// Disk lays out a sprout disk whose slot a carries hash_a and slot b hash_b ("" = _empty).
GptLayout Disk(const std::string& hash_a, const std::string& hash_b, std::uint64_t root = 64 << 20,
               bool arm64 = false) {
  const Guid root_t = *Guid::Parse(arm64 ? dps::kRootArm64 : dps::kRootX86_64);
  const Guid verity_t = *Guid::Parse(arm64 ? dps::kRootVerityArm64 : dps::kRootVerityX86_64);
  auto a = SlotUuidsOf(hash_a);
  auto b = hash_b.empty() ? SlotUuids{Guid::Derive("s", "b"), Guid::Derive("s", "bv")} : SlotUuidsOf(hash_b);
  std::vector<PartitionSpec> specs = {
      {"sprout-esp", *Guid::Parse(dps::kEsp), Guid::Derive("s", "esp"), 128 << 20, 0},
      {"sprout-root-a", root_t, a.root, root, 0},
      {"sprout-root-a-verity", verity_t, a.verity, 1 << 20, 0},
      {hash_b.empty() ? "_empty" : "sprout-root-b", root_t, b.root, root, 0},
      {hash_b.empty() ? "_empty" : "sprout-root-b-verity", verity_t, b.verity, 1 << 20, 0},
      {"sprout-config", *Guid::Parse(dps::kLinuxGeneric), Guid::Derive("s", "c"), 1 << 20, 0},
      {"sprout-state", *Guid::Parse(dps::kVar), Guid::Derive("s", "v"), 256 << 20, 0},
  };
  return PlanGpt(Guid::Derive("s", "disk"), specs).value();
}

std::string EntryFor(const std::string& hash, const std::string& dir = "sprout") {
  auto u = SlotUuidsOf(hash);
  return "title sprout test\nlinux /" + dir + "/vmlinuz\ninitrd /" + dir +
         "/initrd.img\noptions root=/dev/mapper/root ro sprout.roothash=" + hash +
         " sprout.verity.data=PARTUUID=" + u.root.ToString() + " sprout.verity.hash=PARTUUID=" + u.verity.ToString() +
         " sprout.state=PARTUUID=BUILD-STATE sprout.config=PARTUUID=BUILD-CONFIG panic=10\n";
}

Entry MakeEntry(const std::string& file, const std::string& text) { return {*ParseEntryName(file), text}; }

UpdateInputs Inputs() {
  UpdateInputs in;
  in.cmdline = "root=/dev/mapper/root ro sprout.roothash=" + kHashA + " sprout.state=PARTUUID=NODE-STATE " +
               "sprout.config=PARTUUID=NODE-CONFIG panic=10\n";
  in.disk = Disk(kHashA, "");
  in.entries = {MakeEntry("sprout-1-a.conf", EntryFor(kHashA))};
  in.loader_conf = "default sprout-*\ntimeout 0\neditor no\n";
  in.running_etcd = "3.4";
  in.build.root_hash = kHashB;
  in.build.raw_file = "b.raw";
  in.build.etcd_version = "3.4";
  in.build_disk = Disk(kHashB, "");
  in.build_verity = {32 << 20, 300 << 10};
  in.build_entry = EntryFor(kHashB);
  in.running = {1700000000, false, "p", "control-plane", "c"};
  in.build.identity = {1700000001, false, "p", "control-plane", "c"};
  return in;
}

}  // namespace

TEST_CASE("entry names: generation, slot and boot counter", "[update]") {
  auto e = ParseEntryName("sprout-2-b+2-1.conf");
  REQUIRE(e);
  CHECK(e->generation == 2);
  CHECK(e->slot == 'b');
  CHECK(e->counted);
  CHECK(e->tries_left == 2);
  CHECK(e->tries_done == 1);
  CHECK(DescribeState(*e) == "trial: 2 tries left, 1 done");
  CHECK(CommittedName(*e) == "sprout-2-b.conf");
  CHECK(StateOf(*ParseEntryName("sprout-3-a+0-3.conf")) == EntryState::kFailed);
  CHECK(StateOf(*ParseEntryName("sprout-1-a.conf")) == EntryState::kCommitted);
  CHECK(ParseEntryName("sprout-2-b+3.conf")->tries_done == 0);
  CHECK_FALSE(ParseEntryName("sprout.conf"));
  CHECK_FALSE(ParseEntryName("sprout-2-c.conf"));
  CHECK_FALSE(ParseEntryName("sprout-2-b+x.conf"));
  CHECK_FALSE(ParseEntryName("other-2-b.conf"));
  CHECK(TrialEntryName(10, 'a', 3) == "sprout-10-a+3.conf");
}

TEST_CASE("booted entry: the counted entry of the booted root hash first", "[update]") {
  std::vector<Entry> entries = {MakeEntry("sprout-1-a.conf", EntryFor(kHashA)),
                                MakeEntry("sprout-2-b+2-1.conf", EntryFor(kHashB, "sprout/b"))};
  CHECK(BootedEntry(entries, kHashB)->name.file == "sprout-2-b+2-1.conf");
  CHECK(BootedEntry(entries, kHashA)->name.file == "sprout-1-a.conf");
  CHECK_FALSE(BootedEntry(entries, kHashC));
  CHECK(RootHashOfCmdline("ro sprout.roothash=" + kHashA + " x=1\n") == kHashA);
}

TEST_CASE("health: a member, or a worker with credentials; nothing else", "[update]") {
  CHECK(HealthyStatus("member\n"));
  CHECK(HealthyStatus("worker: credentials saved"));
  CHECK_FALSE(HealthyStatus("discovering: 1/3 control-plane peers"));
  CHECK_FALSE(HealthyStatus("founding"));
  CHECK_FALSE(HealthyStatus(""));
}

TEST_CASE("etcd rule: same minor passes, another minor is refused naming both", "[update]") {
  CHECK(CheckEtcdRule("3.4", "3.4.23"));
  CHECK(CheckEtcdRule("", ""));
  auto up = CheckEtcdRule("3.4", "3.5");
  REQUIRE_FALSE(up);
  CHECK(up.error().find("etcd 3.5") != std::string::npos);
  CHECK(up.error().find("etcd 3.4") != std::string::npos);
  CHECK_FALSE(CheckEtcdRule("3.5.9", "v3.4.23"));
  // The 1.36 image's etcd (tag v3.6.16) over the 1.20 default's (3.4): refused.
  auto to_136 = CheckEtcdRule("3.4", "v3.6.16");
  REQUIRE_FALSE(to_136);
  CHECK(to_136.error().find("the new build's etcd v3.6.16 and this node's etcd 3.4 differ") != std::string::npos);
  CHECK(CheckEtcdRule("v3.6.16", "v3.6.17"));
  CHECK_FALSE(CheckEtcdRule("3.4", ""));
  CHECK(EtcdVersionOfImages(
            R"([{"reference":"localhost/sprout/busybox:1.35"},{"reference":"localhost/sprout/etcd:3.4"}])") == "3.4");
  CHECK(EtcdVersionOfImages(R"([{"reference":"registry.k8s.io/etcd:3.4.13-0@sha256:00"}])") == "3.4.13-0");
  CHECK(EtcdVersionOfImages("[]").empty());
}

TEST_CASE("build: the manifest must match sha256sums and list a raw image", "[update]") {
  const std::string manifest =
      R"({"profile":{"name":"p","reproducible":{"sourceDateEpoch":1700000000}},"rootHash":")" + kHashB +
      R"(","images":[{"reference":"localhost/sprout/etcd:3.4"}],"outputs":[{"file":"p.raw","size":10,"sha256":"ab","dataBytes":4096}]})";
  const std::string digest = Sha256Hex(manifest);
  auto b = ParseBuild("out", manifest, digest, "ab  p.raw\n" + digest + "  manifest.json\n");
  REQUIRE(b);
  CHECK(b->raw_file == "p.raw");
  CHECK(b->raw_sha256 == "ab");
  CHECK(b->etcd_version == "3.4");
  CHECK(b->raw_size == 10);
  CHECK(b->raw_data_bytes == 4096);
  CHECK(b->raw_extents.empty());  // a manifest from before the map: the whole file is fetched
  // A manifest from before serials: its epoch is its serial, its profile's name and role its own.
  CHECK(b->identity.serial == 1700000000);
  CHECK(b->identity.serial_from_epoch);
  CHECK(b->identity.profile == "p");
  CHECK(b->identity.cluster.empty());
  // A garbled serial is refused, not read as unknown.
  const std::string garbled = R"({"update":{"serial":"7","profile":"p","role":"worker","cluster":"c"},"rootHash":")" +
                              kHashB + R"(","outputs":[{"file":"p.raw","size":10,"sha256":"ab"}]})";
  const std::string garbled_digest = Sha256Hex(garbled);
  auto bad = ParseBuild("out", garbled, garbled_digest, garbled_digest + "  manifest.json\n");
  REQUIRE_FALSE(bad);
  CHECK(bad.error() ==
        "out/manifest.json: update.serial \"7\" is not a non-negative integer; the file is damaged, or was not "
        "written by sprout build: build it again");
  auto changed = ParseBuild("out", manifest, digest, std::string(64, '0') + "  manifest.json\n");
  REQUIRE_FALSE(changed);
  CHECK(changed.error().find("does not match its line in sha256sums") != std::string::npos);
  CHECK_FALSE(ParseBuild("out", manifest, digest, "ab  p.raw\n"));
  auto no_raw = ParseBuild("out", R"({"rootHash":")" + kHashB + R"("})", "d", "d  manifest.json\n");
  REQUIRE_FALSE(no_raw);
  CHECK(no_raw.error().find("--format raw") != std::string::npos);
}

TEST_CASE("build: fields of the wrong type are refused or ignored, never thrown", "[update]") {
  // Found by update_manifest_fuzz: "file": 8192 made nlohmann's value() throw type_error 302.
  auto parse = [](const std::string& outputs, const std::string& extra = "") {
    const std::string manifest = R"({"rootHash":")" + kHashB + R"(","outputs":)" + outputs + extra + "}";
    const std::string digest = Sha256Hex(manifest);
    return ParseBuild("out", manifest, digest, digest + "  manifest.json\n");
  };
  auto numeric_file = parse(R"([{"file":8192,"size":10,"sha256":"ab"}])");
  REQUIRE_FALSE(numeric_file);
  CHECK(numeric_file.error().find("--format raw") != std::string::npos);
  auto numeric_sha = parse(R"([{"file":"p.raw","size":10,"sha256":7}])");
  REQUIRE_FALSE(numeric_sha);
  CHECK(numeric_sha.error() ==
        "out/manifest.json: the output p.raw has no sha256 string or no size number; build it again with sprout build");
  CHECK_FALSE(parse(R"([{"file":"p.raw","size":"10","sha256":"ab"}])"));
  CHECK_FALSE(parse(R"([7,"p.raw"])"));
  auto odd = parse(R"([{"file":"p.raw","size":10,"sha256":"ab","dataBytes":"x"}])",
                   R"(,"profile":{"name":5},"images":[{"reference":3},4])");
  REQUIRE(odd);
  CHECK(odd->profile.empty());
  CHECK(odd->raw_data_bytes == 0);
  CHECK(odd->etcd_version.empty());
}

TEST_CASE("slots: the running one from the root hash, the other is written", "[update]") {
  auto s = FindSlots(Disk(kHashA, kHashB), kHashB);
  REQUIRE(s);
  CHECK(s->running.letter == 'b');
  CHECK(s->inactive.letter == 'a');
  CHECK(s->inactive.root.entry == 1);
  CHECK(s->inactive.verity.entry == 2);
  CHECK(s->running.root.entry == 3);
  CHECK(*SlotOfHash(Disk(kHashA, kHashB), kHashA) == 'a');
  auto none = FindSlots(Disk(kHashA, kHashB), kHashC);
  REQUIRE_FALSE(none);
  CHECK(none.error().find("ISO or PXE") != std::string::npos);
}

TEST_CASE("slots: a root hash that is not 64 hex digits is refused, never thrown on", "[update]") {
  // Before, std::stoi threw std::invalid_argument on a non-hex pair, ending update
  // apply, status and the gate with an uncaught exception.
  const std::string bad = std::string(62, 'a') + "zz";
  CHECK_FALSE(IsRootHash(bad));
  CHECK_FALSE(IsRootHash(kHashA.substr(1)));
  CHECK(IsRootHash(kHashA));
  CHECK_NOTHROW(SlotUuidsOf(bad));
  auto s = FindSlots(Disk(kHashA, kHashB), bad);
  REQUIRE_FALSE(s);
  CHECK(s.error().find("not 64 hex digits") != std::string::npos);
  CHECK_FALSE(SlotOfHash(Disk(kHashA, kHashB), bad));
  CHECK_FALSE(SlotOfHash(Disk(kHashA, kHashB), "xyz"));
}

TEST_CASE("slots: an arm64 disk has its slots too; a build of the other architecture is refused", "[update][arch]") {
  auto arm = Disk(kHashA, kHashB, 64 << 20, true);
  REQUIRE(DiskRootTypes(arm));
  CHECK(DiskRootTypes(arm)->arch == Arch::kArm64);
  CHECK(DiskRootTypes(Disk(kHashA, ""))->arch == Arch::kAmd64);
  auto s = FindSlots(arm, kHashB);
  REQUIRE(s);
  CHECK(s->running.letter == 'b');
  CHECK(*SlotOfHash(arm, kHashA) == 'a');

  auto in = Inputs();
  in.disk = Disk(kHashA, "", 64 << 20, true);
  in.build_disk = Disk(kHashB, "", 64 << 20, true);
  CHECK(PlanUpdate(in));  // arm64 to arm64
  in.build_disk = Disk(kHashB, "");
  auto refused = PlanUpdate(in);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error(), Catch::Contains("the build is an amd64 image and this node runs arm64"));
  CHECK_THAT(refused.error(), Catch::Contains("sprout build --arch arm64"));
}

TEST_CASE("plan: first update writes slot b with a counted generation-2 entry", "[update]") {
  auto plan = PlanUpdate(Inputs());
  REQUIRE(plan);
  CHECK(plan->slots.running.letter == 'a');
  CHECK(plan->slots.inactive.letter == 'b');
  CHECK(plan->entry_file == "sprout-2-b+3.conf");
  CHECK(plan->kernel_dir == "sprout/b");
  CHECK(plan->remove_entries.empty());
  CHECK(plan->remove_files.empty());
  REQUIRE(plan->mark_new.size() == 2);
  CHECK(plan->mark_new[0].entry == 3);
  CHECK(plan->mark_new[0].uuid == SlotUuidsOf(kHashB).root);
  CHECK(plan->mark_new[0].label == "sprout-root-b");
  CHECK(plan->mark_new[1].label == "sprout-root-b-verity");
  CHECK(plan->mark_empty[0].label == "_empty");
  // The entry boots the new kernel from the slot's folder with this disk's state and config.
  CHECK(plan->entry_text.find("linux /sprout/b/vmlinuz\n") != std::string::npos);
  CHECK(plan->entry_text.find("initrd /sprout/b/initrd.img\n") != std::string::npos);
  // The build names its own partitions by PARTUUID (an image from before the words by
  // name): the entry gets this node's, read from its disk's GPT by their labels.
  CHECK(plan->entry_text.find("sprout.state=PARTUUID=" + Guid::Derive("s", "v").ToString()) != std::string::npos);
  CHECK(plan->entry_text.find("sprout.config=PARTUUID=" + Guid::Derive("s", "c").ToString()) != std::string::npos);
  CHECK(plan->entry_text.find("BUILD-") == std::string::npos);
  CHECK(plan->entry_text.find("sprout.roothash=" + kHashB) != std::string::npos);
}

TEST_CASE("plan: a unified kernel image's entry goes to the slot's folder, its words by name kept as they are",
          "[update]") {
  auto in = Inputs();
  const auto u = SlotUuidsOf(kHashB);
  const std::string options = "options root=/dev/mapper/root ro sprout.roothash=" + kHashB +
                              " sprout.verity.data=PARTUUID=" + u.root.ToString() +
                              " sprout.verity.hash=PARTUUID=" + u.verity.ToString() +
                              " sprout.state=PARTLABEL=sprout-state sprout.config=PARTLABEL=sprout-config panic=10\n";
  in.build_entry = "title sprout test\nefi /sprout/sprout.efi\n" + options;
  auto plan = PlanUpdate(in);
  REQUIRE(plan);
  // Word for word the UKI's own command line (which a node cannot re-sign), in slot b's folder.
  CHECK(plan->entry_text == "title sprout test\nefi /sprout/b/sprout.efi\n" + options);
  CHECK(EntryPaths(plan->entry_text) == std::vector<std::string>{"sprout/b/sprout.efi"});

  // Updating again from slot b: slot a's UKI entry is stale, and so is its file.
  in.cmdline = "ro sprout.roothash=" + kHashB;
  in.disk = Disk(kHashA, kHashB);
  in.entries = {MakeEntry("sprout-1-a.conf", "title a\nefi /sprout/sprout.efi\noptions sprout.roothash=" + kHashA),
                MakeEntry("sprout-2-b.conf", plan->entry_text)};
  in.build.root_hash = kHashC;
  in.build_disk = Disk(kHashC, "");
  in.build_entry = "title sprout test\nefi /sprout/sprout.efi\noptions ro sprout.roothash=" + kHashC +
                   " sprout.state=PARTLABEL=sprout-state\n";
  auto back = PlanUpdate(in);
  REQUIRE(back);
  CHECK(back->entry_text.find("efi /sprout/a/sprout.efi\n") != std::string::npos);
  CHECK(back->remove_entries == std::vector<std::string>{"sprout-1-a.conf"});
  CHECK(back->remove_files == std::vector<std::string>{"sprout/sprout.efi"});
}

TEST_CASE("plan: back to slot a removes slot a's stale entry and its files, never the running ones", "[update]") {
  auto in = Inputs();
  in.cmdline = "ro sprout.roothash=" + kHashB + " sprout.state=PARTUUID=NODE-STATE sprout.config=PARTUUID=NODE-CONFIG";
  in.disk = Disk(kHashA, kHashB);
  in.entries = {MakeEntry("sprout-1-a.conf", EntryFor(kHashA)),
                MakeEntry("sprout-2-b.conf", EntryFor(kHashB, "sprout/b"))};
  in.build.root_hash = kHashC;
  in.build_disk = Disk(kHashC, "");
  in.build_entry = EntryFor(kHashC);
  auto plan = PlanUpdate(in);
  REQUIRE(plan);
  CHECK(plan->slots.inactive.letter == 'a');
  CHECK(plan->entry_file == "sprout-3-a+3.conf");
  CHECK(plan->remove_entries == std::vector<std::string>{"sprout-1-a.conf"});
  CHECK(plan->remove_files == std::vector<std::string>{"sprout/vmlinuz", "sprout/initrd.img"});
  CHECK(plan->mark_new[0].entry == 1);
}

TEST_CASE("plan: refusals name the input and the fix", "[update]") {
  SECTION("a slot on trial is not updated again") {
    auto in = Inputs();
    in.entries = {MakeEntry("sprout-2-a+2-1.conf", EntryFor(kHashA))};
    auto p = PlanUpdate(in);
    REQUIRE_FALSE(p);
    CHECK(p.error().find("still on trial") != std::string::npos);
  }
  SECTION("a root larger than the slot") {
    auto in = Inputs();
    in.build_disk = Disk(kHashB, "", 256 << 20);
    in.build_verity.data_bytes = 100 << 20;
    auto p = PlanUpdate(in);
    REQUIRE_FALSE(p);
    CHECK(p.error().find("does not fit slot b's root partition") != std::string::npos);
  }
  SECTION("another etcd minor") {
    auto in = Inputs();
    in.build.etcd_version = "3.5";
    auto p = PlanUpdate(in);
    REQUIRE_FALSE(p);
    CHECK(p.error().find("etcd 3.5") != std::string::npos);
  }
  SECTION("an old loader.conf") {
    auto in = Inputs();
    in.loader_conf = "default sprout.conf\n";
    auto p = PlanUpdate(in);
    REQUIRE_FALSE(p);
    CHECK(p.error().find("reflash") != std::string::npos);
  }
  SECTION("a build entry without its root hash") {
    auto in = Inputs();
    const std::string word = "sprout.roothash=" + kHashB + " ";
    in.build_entry.erase(in.build_entry.find(word), word.size());
    auto p = PlanUpdate(in);
    REQUIRE_FALSE(p);
    CHECK(p.error() ==
          "the build's loader entry: the build's loader entry has no sprout.roothash= on its options line");
  }
  SECTION("an older build or one of the same serial, unless allowed") {
    for (std::int64_t serial : {1600000000, 1700000000}) {
      auto in = Inputs();
      in.build.identity.serial = serial;
      auto p = PlanUpdate(in);
      REQUIRE_FALSE(p);
      CHECK(p.error().starts_with(serial == 1600000000 ? "refusing a downgrade: the new build's serial is 1600000000"
                                                       : "refusing the update: the new build's serial is 1700000000"));
      in.allow_downgrade = true;
      auto allowed = PlanUpdate(in);
      REQUIRE(allowed);
      CHECK(allowed->serial_note.starts_with("--allow-downgrade: "));
    }
  }
  SECTION("a build of another profile, unless allowed; with an older serial, both refusals at once") {
    auto in = Inputs();
    in.build.identity.profile = "q";
    auto p = PlanUpdate(in);
    REQUIRE_FALSE(p);
    CHECK(
        p.error().starts_with("refusing a build for other nodes: it differs from the running build in its profile "
                              "'q' (this node's: 'p');"));
    in.build.identity.serial = 1;
    p = PlanUpdate(in);
    REQUIRE_FALSE(p);
    CHECK(p.error().find("--allow-cross-profile to install it anyway; also, refusing a downgrade") !=
          std::string::npos);
    in.allow_cross_profile = true;
    in.allow_downgrade = true;
    auto allowed = PlanUpdate(in);
    REQUIRE(allowed);
    CHECK(allowed->identity_note ==
          "--allow-cross-profile: the new build differs in its profile 'q' (this node's: 'p')");
  }
  SECTION("the node already runs the build: that, not the serial, is the refusal") {
    auto in = Inputs();
    in.build.root_hash = kHashA;
    in.build.identity = in.running;
    auto p = PlanUpdate(in);
    REQUIRE_FALSE(p);
    CHECK(p.error().starts_with("the node already runs this build"));
  }
  SECTION("a build that encrypts the state, for a node whose state is plain; and the reverse") {
    auto in = Inputs();
    const std::string words = " sprout.state.encryption=tpm2 sprout.state.without-tpm=refuse";
    const auto at = in.build_entry.find(" panic=10");
    in.build_entry.insert(at, words);
    auto p = PlanUpdate(in);
    REQUIRE_FALSE(p);
    CHECK_THAT(p.error(), Catch::StartsWith("the new image encrypts the state partition "
                                            "(sprout.state.encryption=tpm2) and this node's state is plain ext4"));
    in.cmdline.insert(in.cmdline.find(" panic=10"), words);
    auto both = PlanUpdate(in);
    REQUIRE(both);
    CHECK_THAT(both->entry_text, Catch::Contains(words));
    in.build_entry = EntryFor(kHashB);
    auto reverse = PlanUpdate(in);
    REQUIRE_FALSE(reverse);
    CHECK_THAT(reverse.error(), Catch::StartsWith("the new image does not encrypt the state partition"));
  }
  SECTION("the same build again") {
    auto in = Inputs();
    in.build.root_hash = kHashA;
    CHECK_FALSE(PlanUpdate(in));
  }
}

TEST_CASE("verity superblock: the bytes to copy", "[update]") {
  std::vector<std::uint8_t> sb(512, 0);
  std::copy_n("verity\0\0", 8, sb.begin());
  std::copy_n("sha256", 6, sb.begin() + 32);
  auto put = [&](std::size_t at, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) sb[at + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v >> (8 * i));
  };
  put(64, 4096, 4);
  put(68, 4096, 4);
  put(72, 1000, 8);  // 1000 data blocks: 8 hash blocks, then 1 root block
  auto g = ParseVeritySuperblock(sb);
  REQUIRE(g);
  CHECK(g->data_bytes == 1000 * 4096);
  CHECK(g->hash_bytes == (1 + 8 + 1) * 4096);
  sb[0] = 'x';
  CHECK_FALSE(ParseVeritySuperblock(sb));
}

TEST_CASE("gpt patch: new UUID and label, both checksums valid for the GPT reader", "[update]") {
  auto layout = Disk(kHashA, "");
  auto bytes = RenderGpt(layout);
  std::vector<std::uint8_t> header(bytes.head.begin() + 512, bytes.head.begin() + 1024);
  std::vector<std::uint8_t> entries(bytes.head.begin() + 1024, bytes.head.end());
  auto uuids = SlotUuidsOf(kHashB);
  REQUIRE(PatchGptCopy(header, entries, {{3, uuids.root, "sprout-root-b"}}));
  std::vector<std::uint8_t> head(bytes.head.begin(), bytes.head.begin() + 512);
  head.insert(head.end(), header.begin(), header.end());
  head.insert(head.end(), entries.begin(), entries.end());
  auto parsed = ParseGpt(head, layout.disk_size);
  REQUIRE(parsed);
  CHECK(parsed->partitions[3].spec.label == "sprout-root-b");
  CHECK(parsed->partitions[3].spec.uuid == uuids.root);
  CHECK(parsed->partitions[1].spec.label == "sprout-root-a");
  // A damaged entry array is never patched.
  entries[5] ^= 1;
  CHECK_FALSE(PatchGptCopy(header, entries, {{3, uuids.root, "x"}}));
}

TEST_CASE("next boot: the newest entry with tries left, else the committed one", "[update]") {
  auto names = [](std::vector<std::string> files) {
    std::vector<EntryName> out;
    for (const auto& f : files) out.push_back(*ParseEntryName(f));
    return out;
  };
  CHECK(NextBoot(names({"sprout-1-a.conf", "sprout-2-b+3.conf"}))->file == "sprout-2-b+3.conf");
  CHECK(NextBoot(names({"sprout-3-a.conf", "sprout-4-b+0-3.conf"}))->file == "sprout-3-a.conf");
  CHECK(NextBoot(names({"sprout-9-a.conf", "sprout-10-b.conf"}))->file == "sprout-10-b.conf");
  CHECK_FALSE(NextBoot({}));
}

TEST_CASE("kubernetes health: apiserver ready, Node Ready, every static pod's mirror pod Ready", "[update]") {
  const std::string pods = R"({"kind":"PodList","items":[
    {"metadata":{"name":"kube-apiserver-n1"},"spec":{"nodeName":"n1"},
     "status":{"conditions":[{"type":"Initialized","status":"True"},{"type":"Ready","status":"True"}]}},
    {"metadata":{"name":"etcd-n1"},"spec":{"nodeName":"n1"},"status":{"conditions":[{"type":"Ready","status":"True"}]}},
    {"metadata":{"name":"kube-scheduler-n1"},"spec":{"nodeName":"n1"},"status":{"conditions":[{"type":"Ready","status":"False"}]}},
    {"metadata":{"name":"etcd-n2"},"spec":{"nodeName":"n2"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}]})";
  auto parsed = ParsePodList(pods);
  REQUIRE(parsed);
  REQUIRE(parsed->size() == 4);
  CHECK((*parsed)[0].ready);
  CHECK_FALSE((*parsed)[2].ready);
  CHECK((*parsed)[3].node == "n2");
  CHECK_FALSE(ParsePodList(R"({"kind":"Status","message":"forbidden"})"));
  CHECK(ParsePodList(R"({"kind":"Status","message":"forbidden"})").error().find("forbidden") != std::string::npos);

  KubeView v;
  v.readyz_status = 200;
  v.readyz_body = "ok";
  v.node_listed = true;
  v.node_ready = true;
  v.pods = *parsed;
  CHECK(KubeHealthProblem("n1", {"etcd", "kube-apiserver"}, v).empty());
  CHECK(KubeHealthProblem("n1", {"etcd", "kube-scheduler"}, v) == "the static pod kube-scheduler-n1 is not Ready");
  CHECK(KubeHealthProblem("n1", {"kube-controller-manager"}, v) ==
        "the static pod kube-controller-manager-n1 has no mirror pod yet");
  // Another node's mirror pod does not count for this one.
  CHECK(KubeHealthProblem("n2", {"kube-apiserver"}, v) == "the static pod kube-apiserver-n2 has no mirror pod yet");
  auto not_ready = v;
  not_ready.node_ready = false;
  CHECK(KubeHealthProblem("n1", {"etcd"}, not_ready) == "the Node n1 is not Ready (its kubelet)");
  auto unlisted = v;
  unlisted.node_listed = false;
  CHECK(KubeHealthProblem("n1", {}, unlisted) == "the Node n1 is not registered yet");
  auto down = v;
  down.readyz_status = 0;
  down.readyz_body = "connection refused";
  CHECK(KubeHealthProblem("n1", {}, down) == "this node's kube-apiserver is not ready (/readyz: connection refused)");
  auto starting = v;
  starting.readyz_status = 500;
  CHECK(KubeHealthProblem("n1", {}, starting) == "this node's kube-apiserver is not ready (/readyz: HTTP 500)");
}

TEST_CASE("build: a raw image's dataExtents are read as [offset, length] pairs", "[update]") {
  auto parse = [](const std::string& extents) {
    const std::string manifest = R"({"rootHash":")" + kHashB +
                                 R"(","outputs":[{"file":"p.raw","size":16384,"sha256":"ab","dataExtents":)" + extents +
                                 "}]}";
    const std::string digest = Sha256Hex(manifest);
    return ParseBuild("out", manifest, digest, digest + "  manifest.json\n");
  };
  auto b = parse("[[0,4096],[8192,8192]]");
  REQUIRE(b);
  CHECK(b->raw_extents == std::vector<DataExtent>{{0, 4096}, {8192, 8192}});
  for (const char* bad : {R"("all")", "[[0]]", "[[0,-1]]", R"([["0",4096]])", "[4096]"}) {
    auto refused = parse(bad);
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error(),
               Catch::Matchers::Contains("out/manifest.json: the dataExtents of p.raw are not a list") &&
                   Catch::Matchers::Contains("build it again with sprout build"));
  }
}
