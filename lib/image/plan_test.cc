#include "image/plan.h"

#include <algorithm>
#include <catch2/catch.hpp>

using namespace sprout;

TEST_CASE("PlanBoot derives root and verity partition UUIDs from the root hash halves", "[plan]") {
  Profile p;
  p.name = "n";
  p.cmdline = {"quiet"};
  DiskPlan d = PlanDisk(p, "seed");
  const std::string hash = "00112233445566778899aabbccddeeff0123456789abcdef0123456789abcdef";
  PlanBoot(d, p, hash);
  // Version and variant bits are forced, the rest is the hash.
  CHECK(d.root_uuid.ToString() == "00112233-4455-4677-8899-aabbccddeeff");
  CHECK(d.verity_uuid.ToString() == "01234567-89ab-4def-8123-456789abcdef");
  CHECK(d.loader_entry.find("sprout.roothash=" + hash) != std::string::npos);
  CHECK(d.loader_entry.find("root=/dev/mapper/root") != std::string::npos);
  CHECK(d.loader_entry.find("sprout.verity.data=PARTUUID=" + d.root_uuid.ToString()) != std::string::npos);
  CHECK(d.cmdline.back() == "quiet");  // the profile's words come last
  CHECK(d.loader_conf.find("editor no") != std::string::npos);
}

TEST_CASE("the command line names the state and config partitions the same way on every disk", "[plan]") {
  // A signed UKI's command line cannot be rewritten for the node it lands on, so apart
  // from the root hash's own words it must not depend on the build's disk.
  Profile p;
  DiskPlan one = PlanDisk(p, "seed-one"), two = PlanDisk(p, "seed-two");
  REQUIRE_FALSE(one.state_uuid == two.state_uuid);
  const std::string hash(64, 'b');
  PlanBoot(one, p, hash);
  PlanBoot(two, p, hash);
  CHECK(one.cmdline == two.cmdline);
  CHECK(std::count(one.cmdline.begin(), one.cmdline.end(), "sprout.state=PARTLABEL=sprout-state") == 1);
  CHECK(std::count(one.cmdline.begin(), one.cmdline.end(), "sprout.config=PARTLABEL=sprout-config") == 1);
  for (const auto& word : one.cmdline) CHECK(word.find(one.state_uuid.ToString()) == std::string::npos);
}

TEST_CASE("PlanDisk is a pure function of the seed", "[plan]") {
  Profile p;
  DiskPlan a = PlanDisk(p, "seed-1"), b = PlanDisk(p, "seed-1"), c = PlanDisk(p, "seed-2");
  CHECK(a.disk_guid == b.disk_guid);
  CHECK(a.verity_salt == b.verity_salt);
  CHECK(a.esp_volume_id == b.esp_volume_id);
  CHECK_FALSE(a.disk_guid == c.disk_guid);
  CHECK(a.verity_salt != c.verity_salt);
  CHECK(a.verity_salt.size() == 64);
}

TEST_CASE("PlanPartitions reserves slot B with slot A's sizes and puts state last", "[plan]") {
  Profile p;
  DiskPlan d = PlanDisk(p, "s");
  PlanBoot(d, p, std::string(64, 'a'));
  auto parts = PlanPartitions(d, 64 << 20, 300 << 20, 5 << 20, 256 << 20);
  REQUIRE(parts.size() == 7);
  CHECK(parts[kConfigIndex].label == std::string(kConfigLabel));
  CHECK(parts[kConfigIndex].size == kConfigSize);
  CHECK(parts[kRootAIndex].label == std::string(kRootLabel));
  CHECK(parts[kRootBIndex].label == std::string(kEmptyLabel));
  CHECK(parts[kRootBIndex].size == parts[kRootAIndex].size);
  CHECK(parts[kVerityBIndex].size == parts[kVerityAIndex].size);
  CHECK(parts[kRootBIndex].type == parts[kRootAIndex].type);
  CHECK(parts[kVerityAIndex].type.ToString() == std::string(dps::kRootVerityX86_64));
  CHECK(parts[kStateIndex].type.ToString() == std::string(dps::kVar));
  CHECK(parts[kRootAIndex].attributes == 1ull << 60);
  CHECK(parts[kStateIndex].attributes == 0);
}

TEST_CASE("an arm64 plan uses the DPS arm64 root and verity types and the PL011 console", "[plan][arch]") {
  Profile p;
  p.arch = Arch::kArm64;
  DiskPlan d = PlanDisk(p, "s");
  PlanBoot(d, p, std::string(64, 'a'));
  auto parts = PlanPartitions(d, 64 << 20, 300 << 20, 5 << 20, 256 << 20);
  REQUIRE(parts.size() == 7);
  // UAPI Discoverable Partitions Specification: Root Partition (64-bit ARM/AArch64) and
  // Root Verity Partition (64-bit ARM/AArch64); slot B has the same types.
  CHECK(parts[kRootAIndex].type.ToString() == "b921b045-1df0-41c3-af44-4c6f280d3fae");
  CHECK(parts[kVerityAIndex].type.ToString() == "df3300ce-d69f-4c92-978c-9bfb0f38d820");
  CHECK(parts[kRootBIndex].type == parts[kRootAIndex].type);
  CHECK(parts[kVerityBIndex].type == parts[kVerityAIndex].type);
  CHECK(parts[kEspIndex].type.ToString() == std::string(dps::kEsp));
  CHECK(parts[kStateIndex].type.ToString() == std::string(dps::kVar));
  CHECK(d.loader_entry.find("console=ttyAMA0,115200") != std::string::npos);
  CHECK(d.loader_entry.find("ttyS0") == std::string::npos);
}

TEST_CASE("an amd64 plan keeps the x86-64 types and ttyS0", "[plan][arch]") {
  Profile p;
  DiskPlan d = PlanDisk(p, "s");
  PlanBoot(d, p, std::string(64, 'a'));
  auto parts = PlanPartitions(d, 64 << 20, 300 << 20, 5 << 20, 256 << 20);
  CHECK(parts[kRootAIndex].type.ToString() == "4f68bce3-e8cd-4db1-96e7-fbcaf984b709");
  CHECK(parts[kVerityAIndex].type.ToString() == "2c7357ed-ebd2-46d9-aec1-23d437ec2bf5");
  CHECK(d.loader_entry.find("console=ttyS0,115200") != std::string::npos);
}

TEST_CASE("PlanBoot puts the state's encryption words after sprout.config= only when the profile asks", "[plan]") {
  Profile plain;
  DiskPlan d = PlanDisk(plain, "s");
  PlanBoot(d, plain, std::string(64, 'a'));
  for (const auto& word : d.cmdline) CHECK_FALSE(word.starts_with("sprout.state."));
  CHECK(DescribeState(ReadStateWords(d.cmdline)) == "plain ext4 (not encrypted)");

  Profile encrypted;
  encrypted.state_encryption = StateEncryption::kTpm2;
  encrypted.cmdline = {"quiet"};
  DiskPlan e = PlanDisk(encrypted, "s");
  PlanBoot(e, encrypted, std::string(64, 'a'));
  auto config = std::find(e.cmdline.begin(), e.cmdline.end(), "sprout.config=PARTLABEL=sprout-config");
  REQUIRE(std::distance(config, e.cmdline.end()) > 2);
  CHECK(*(config + 1) == "sprout.state.encryption=tpm2");
  CHECK(*(config + 2) == "sprout.state.without-tpm=refuse");  // the default
  CHECK(e.cmdline.back() == "quiet");
  CHECK(e.loader_entry.find(" sprout.state.encryption=tpm2 sprout.state.without-tpm=refuse ") != std::string::npos);
  CHECK(DescribeState(ReadStateWords(e.cmdline)) ==
        "encrypted at first boot (LUKS2, key sealed to the TPM: PCRs 7+11); without a TPM: refuse to start");
  // Everything else on the line is as without encryption.
  std::vector<std::string> rest;
  for (const auto& word : e.cmdline) {
    if (!word.starts_with("sprout.state.")) rest.push_back(word);
  }
  rest.pop_back();  // "quiet"
  CHECK(rest == d.cmdline);

  encrypted.without_tpm = WithoutTpm::kPlain;
  PlanBoot(e, encrypted, std::string(64, 'a'));
  CHECK(*(std::find(e.cmdline.begin(), e.cmdline.end(), "sprout.state.encryption=tpm2") + 1) ==
        "sprout.state.without-tpm=plain");
  CHECK(DescribeState(ReadStateWords(e.cmdline)) ==
        "encrypted at first boot (LUKS2, key sealed to the TPM: PCRs 7+11); without a TPM: plain ext4 state with a "
        "warning");
}

TEST_CASE("DescribeState reads a live medium's line and words this sprout does not know", "[plan]") {
  CHECK(DescribeState(ReadStateWords({"ro", "sprout.live=iso", "fstab=no"})) ==
        "in memory (a live medium keeps nothing)");
  CHECK(DescribeState(ReadStateWords({"sprout.state.encryption=fido2"})) ==
        "sprout.state.encryption=fido2, which this sprout does not know");
  // Without the word the initrd refuses, as the profile's default does.
  CHECK(DescribeState(ReadStateWords({"sprout.state.encryption=tpm2"})) ==
        "encrypted at first boot (LUKS2, key sealed to the TPM: PCRs 7+11); without a TPM: refuse to start");
  CHECK(DescribeState(ReadStateWords({"sprout.state.encryption=tpm2", "sprout.state.without-tpm=maybe"})) ==
        "encrypted at first boot (LUKS2, key sealed to the TPM: PCRs 7+11); without a TPM: "
        "sprout.state.without-tpm=maybe, which this sprout does not know");
}

TEST_CASE("StateStatusLine: what sprout-firstboot status says of the node's state", "[plan]") {
  const auto encrypted = ReadStateWords({"ro", "sprout.state.encryption=tpm2", "sprout.state.without-tpm=plain"});
  // An image that does not encrypt, and a live medium, get no line.
  CHECK(StateStatusLine(ReadStateWords({"ro", "sprout.state=PARTUUID=x"}), "/dev/vda7").empty());
  CHECK(StateStatusLine(ReadStateWords({"sprout.live=iso", "sprout.state.encryption=tpm2"}), "tmpfs").empty());
  CHECK(StateStatusLine(encrypted, "/dev/mapper/sprout-state") ==
        "encrypted (LUKS2 on /dev/mapper/sprout-state, unlocked with the TPM at boot)");
  // Plain because the node had no TPM: said, with what it means.
  const std::string plain = StateStatusLine(encrypted, "/dev/vda7");
  CHECK(plain.starts_with("NOT encrypted: the image asks for sprout.state.encryption=tpm2, and /var is on /dev/vda7"));
  CHECK(plain.find("whoever holds the disk can read") != std::string::npos);
  CHECK(StateStatusLine(encrypted, "").find("/var is not mounted") != std::string::npos);
}
