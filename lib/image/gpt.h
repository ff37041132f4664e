// The GPT writer: a pure layout computation plus the bytes of the partition tables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "image/guid.h"
#include "util/result.h"

namespace sprout {

inline constexpr std::uint64_t kSectorSize = 512;
inline constexpr std::uint64_t kAlignment = 1 << 20;  // partitions start on 1 MiB boundaries

// PartitionSpec is what the image plan asks for.
struct PartitionSpec {
  std::string label;  // GPT partition name (UTF-16LE on disk, at most 36 characters)
  Guid type;
  Guid uuid;
  std::uint64_t size = 0;        // bytes; rounded up to the alignment
  std::uint64_t attributes = 0;  // GPT attribute bits
};

// Partition is a placed partition.
struct Partition {
  PartitionSpec spec;
  std::uint32_t entry = 0;  // its index in the GPT entry array
  std::uint64_t first_lba = 0;
  std::uint64_t last_lba = 0;  // inclusive
  std::uint64_t offset() const { return first_lba * kSectorSize; }
  std::uint64_t size() const { return (last_lba - first_lba + 1) * kSectorSize; }
};

// GptLayout is a whole disk: its size, GUID and placed partitions.
struct GptLayout {
  Guid disk_guid;
  std::uint64_t disk_size = 0;  // bytes
  std::vector<Partition> partitions;
};

// PlanGpt places partitions in order, each on a 1 MiB boundary, leaving room for the
// primary and backup tables; the disk ends 1 MiB after the last partition.
Result<GptLayout> PlanGpt(const Guid& disk_guid, const std::vector<PartitionSpec>& specs);

// GptBytes are the three regions a GPT disk needs, with their byte offsets.
struct GptBytes {
  std::vector<std::uint8_t> head;  // protective MBR, primary header, primary entries (LBA 0..33)
  std::vector<std::uint8_t> tail;  // backup entries and backup header (last 33 LBAs)
  std::uint64_t tail_offset = 0;
};

// RenderGpt serializes a layout into table bytes.
GptBytes RenderGpt(const GptLayout& layout);

// Crc32 is the IEEE 802.3 CRC that GPT headers and entry arrays carry.
std::uint32_t Crc32(const std::uint8_t* data, std::size_t size);

}  // namespace sprout

namespace sprout {

// ParseGpt reads a disk's primary GPT from its first 34 sectors (head) and the disk's
// size, checking signature and CRCs. Partition labels are read as ASCII.
Result<GptLayout> ParseGpt(const std::vector<std::uint8_t>& head, std::uint64_t disk_size);

}  // namespace sprout
