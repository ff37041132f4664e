#include "image/gpt.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "image/disk.h"
#include "util/fs.h"
#include "util/process.h"

using namespace sprout;

namespace {

std::vector<PartitionSpec> ThreeParts() {
  return {
      {"sprout-esp", *Guid::Parse(dps::kEsp), Guid::Derive("t", "esp"), 3 << 20, 0},
      {"sprout-root-a", *Guid::Parse(dps::kRootX86_64), Guid::Derive("t", "root"), (5 << 20) + 1, 1ull << 60},
      {"sprout-state", *Guid::Parse(dps::kVar), Guid::Derive("t", "state"), 2 << 20, 0},
  };
}

}  // namespace

TEST_CASE("Guid parses, prints and derives deterministically", "[gpt]") {
  auto g = Guid::Parse("C12A7328-F81F-11D2-BA4B-00A0C93EC93B");
  REQUIRE(g);
  CHECK(g->ToString() == "c12a7328-f81f-11d2-ba4b-00a0c93ec93b");
  std::uint8_t disk[16];
  g->ToDisk(disk);
  CHECK(disk[0] == 0x28);  // first field little-endian
  CHECK(disk[3] == 0xC1);
  CHECK(disk[8] == 0xBA);  // last two fields as printed
  CHECK(Guid::Derive("a", "root") == Guid::Derive("a", "root"));
  CHECK_FALSE(Guid::Derive("a", "root") == Guid::Derive("a", "esp"));
  CHECK(Guid::Derive("a", "root").ToString()[14] == '4');
  CHECK_FALSE(Guid::Parse("not-a-guid"));
}

TEST_CASE("Crc32 matches the IEEE check value", "[gpt]") {
  const char* s = "123456789";
  CHECK(Crc32(reinterpret_cast<const std::uint8_t*>(s), 9) == 0xCBF43926u);
}

TEST_CASE("PlanGpt aligns every partition to 1 MiB and leaves room for the backup table", "[gpt]") {
  auto l = PlanGpt(Guid::Derive("t", "disk"), ThreeParts());
  REQUIRE(l);
  REQUIRE(l->partitions.size() == 3);
  CHECK(l->partitions[0].first_lba == 2048);
  CHECK(l->partitions[0].size() == 3u << 20);
  CHECK(l->partitions[1].first_lba == 2048 + 3 * 2048);
  CHECK(l->partitions[1].size() == 6u << 20);  // 5 MiB + 1 byte rounds up
  CHECK(l->partitions[2].first_lba == 2048 + 9 * 2048);
  CHECK(l->disk_size == (1u + 3 + 6 + 2 + 1) << 20);
  CHECK_FALSE(PlanGpt(Guid{}, {}));
}

TEST_CASE("A written GPT disk reads back identically through sfdisk and passes sgdisk -v", "[gpt][tools]") {
  if (FindProgram("sfdisk").empty() || FindProgram("sgdisk").empty()) {
    FAIL("sfdisk and sgdisk are needed (Debian packages fdisk and gdisk)");
  }
  auto l = PlanGpt(Guid::Derive("t", "disk"), ThreeParts());
  REQUIRE(l);
  TempDir dir(fs::temp_directory_path(), "gpt-test");
  fs::path img = dir.path() / "disk.img";
  REQUIRE(WriteRawDisk(*l, {}, img).ok());

  auto json = RunChecked({{"sfdisk", "--json", img.string()}});
  REQUIRE(json.ok());
  auto j = nlohmann::json::parse(*json)["partitiontable"];
  CHECK(j["label"] == "gpt");
  std::string disk_id = j["id"];
  for (auto& c : disk_id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  CHECK(disk_id == Guid::Derive("t", "disk").ToString());
  CHECK(j["firstlba"] == 34);
  CHECK(j["lastlba"] == l->disk_size / 512 - 34);
  REQUIRE(j["partitions"].size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& p = j["partitions"][i];
    const auto& want = l->partitions[i];
    std::string type = p["type"], uuid = p["uuid"];
    for (auto* s : {&type, &uuid}) {
      for (auto& c : *s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    CHECK(p["start"] == want.first_lba);
    CHECK(p["size"] == want.last_lba - want.first_lba + 1);
    CHECK(type == want.spec.type.ToString());
    CHECK(uuid == want.spec.uuid.ToString());
    CHECK(p["name"] == want.spec.label);
  }
  CHECK(j["partitions"][1]["attrs"] == "GUID:60");

  auto verify = RunChecked({{"sgdisk", "-v", img.string()}});
  REQUIRE(verify.ok());
  CHECK(verify->find("No problems found") != std::string::npos);
}

TEST_CASE("ParseGpt reads back what RenderGpt wrote and rejects damage", "[gpt]") {
  auto l = PlanGpt(Guid::Derive("t", "disk"), ThreeParts());
  REQUIRE(l);
  GptBytes b = RenderGpt(*l);
  auto back = ParseGpt(b.head, l->disk_size);
  REQUIRE(back.ok());
  CHECK(back->disk_guid == l->disk_guid);
  REQUIRE(back->partitions.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(back->partitions[i].spec.label == l->partitions[i].spec.label);
    CHECK(back->partitions[i].spec.type == l->partitions[i].spec.type);
    CHECK(back->partitions[i].spec.uuid == l->partitions[i].spec.uuid);
    CHECK(back->partitions[i].first_lba == l->partitions[i].first_lba);
    CHECK(back->partitions[i].last_lba == l->partitions[i].last_lba);
    CHECK(back->partitions[i].spec.attributes == l->partitions[i].spec.attributes);
  }
  auto damaged = b.head;
  damaged[2 * 512 + 60] ^= 1;  // a byte of the first entry's name
  auto bad = ParseGpt(damaged, l->disk_size);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error() == "the GPT partition entries checksum is wrong");
  CHECK_FALSE(ParseGpt(std::vector<std::uint8_t>(34 * 512, 0), 1 << 20).ok());
}
