#include "image/disk_file.h"

#include <catch2/catch.hpp>

#include "util/fs.h"

namespace sprout {
namespace {

// A small GPT disk in a file: a 1 MiB "data" partition and a 2 MiB "config" one.
DiskFile MakeDisk(const TempDir& dir) {
  auto layout = PlanGpt(Guid::Derive("disk-file", "disk"),
                        {{"data", Guid::Derive("disk-file", "type-a"), Guid::Derive("disk-file", "a"), 1 << 20, 0},
                         {"config", Guid::Derive("disk-file", "type-b"), Guid::Derive("disk-file", "b"), 2 << 20, 0}});
  REQUIRE(layout);
  auto bytes = RenderGpt(*layout);
  auto file = DiskFile::Create(dir.path() / "disk.raw");
  REQUIRE(file);
  REQUIRE(file->Write(0, bytes.head));
  REQUIRE(file->Write(bytes.tail_offset, bytes.tail));
  auto disk = DiskFile::Open(dir.path() / "disk.raw", true);
  REQUIRE(disk);
  CHECK(disk->size() == layout->disk_size);
  return std::move(*disk);
}

}  // namespace

TEST_CASE("DiskFile reads a GPT and finds partitions by type and label", "[disk_file]") {
  TempDir dir(std::filesystem::temp_directory_path(), "sprout-disk-file");
  DiskFile disk = MakeDisk(dir);
  auto gpt = disk.Gpt();
  REQUIRE(gpt);
  REQUIRE(gpt->partitions.size() == 2);
  const Partition* config = FindPartitionByLabel(gpt->partitions, "config");
  REQUIRE(config != nullptr);
  CHECK(config->size() == 2u << 20);
  CHECK(FindPartitionByType(gpt->partitions, Guid::Derive("disk-file", "type-a")) == &gpt->partitions[0]);
  CHECK(FindPartitionByLabel(gpt->partitions, "missing") == nullptr);
  CHECK(FindPartitionByType(gpt->partitions, Guid::Derive("disk-file", "other")) == nullptr);
}

TEST_CASE("DiskFile keeps partition reads and writes inside the partition", "[disk_file]") {
  TempDir dir(std::filesystem::temp_directory_path(), "sprout-disk-file");
  DiskFile disk = MakeDisk(dir);
  auto gpt = disk.Gpt();
  REQUIRE(gpt);
  const Partition& data = gpt->partitions[0];
  const Partition& config = gpt->partitions[1];
  const std::vector<std::uint8_t> hello{'h', 'e', 'l', 'l', 'o'};
  REQUIRE(WritePartition(disk, config, 10, hello));
  auto back = ReadPartition(disk, config, 10, hello.size());
  REQUIRE(back);
  CHECK(*back == hello);
  // The same bytes through the disk's own offsets.
  auto raw = disk.Read(config.offset() + 10, hello.size());
  REQUIRE(raw);
  CHECK(*raw == hello);

  // A range that leaves the partition is refused, naming the file and the partition,
  // and nothing is written into the neighbour.
  auto over = WritePartition(disk, data, data.size() - 2, hello);
  REQUIRE_FALSE(over);
  CHECK(over.error().find("disk.raw") != std::string::npos);
  CHECK(over.error().find("leave partition 'data'") != std::string::npos);
  auto neighbour = disk.Read(config.offset(), 3);
  REQUIRE(neighbour);
  CHECK(*neighbour == std::vector<std::uint8_t>{0, 0, 0});
  CHECK_FALSE(ReadPartition(disk, data, data.size() + 1, 0));
  CHECK_FALSE(ReadPartition(disk, data, 1, data.size()));
}

TEST_CASE("DiskFile: a read past the end is an error, ReadUpTo returns what there is", "[disk_file]") {
  TempDir dir(std::filesystem::temp_directory_path(), "sprout-disk-file");
  DiskFile disk = MakeDisk(dir);
  auto past = disk.Read(disk.size() - 4, 8);
  REQUIRE_FALSE(past);
  CHECK(past.error().find("it ends after " + std::to_string(disk.size()) + " bytes") != std::string::npos);
  auto some = disk.ReadUpTo(disk.size() - 4, 8);
  REQUIRE(some);
  CHECK(some->size() == 4);
  CHECK_FALSE(DiskFile::Open(dir.path() / "absent.raw", false));
}

TEST_CASE("CopyRange copies between disks at different offsets", "[disk_file]") {
  TempDir dir(std::filesystem::temp_directory_path(), "sprout-disk-file");
  DiskFile disk = MakeDisk(dir);
  std::vector<std::uint8_t> block(5 << 20);  // more than one chunk
  for (std::size_t i = 0; i < block.size(); ++i) block[i] = static_cast<std::uint8_t>(i * 7 + 1);
  REQUIRE(disk.Write(1 << 20, block.data(), 3 << 20));
  auto copy = DiskFile::Create(dir.path() / "copy.raw");
  REQUIRE(copy);
  REQUIRE(CopyRange(disk, 1 << 20, *copy, 512, 3 << 20));
  auto got = copy->Read(512, 3 << 20);
  REQUIRE(got);
  CHECK(std::equal(got->begin(), got->end(), block.begin()));
  CHECK(copy->size() == 512 + (3u << 20));
}

}  // namespace sprout
