// Changing partition entries of a GPT in place: one copy (header and entry array) at a
// time, with both checksums recomputed. Pure: the node reads and writes the bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "image/guid.h"
#include "util/result.h"

namespace sprout::update {

// EntryChange sets one entry's unique GUID and name.
struct EntryChange {
  std::uint32_t entry = 0;  // index in the entry array
  Guid uuid;
  std::string label;  // ASCII, at most 36 characters
};

// GptCopyPlace is where one copy's entry array starts and how big it is, read from its
// header sector.
struct GptCopyPlace {
  std::uint64_t alternate_lba = 0;  // the other copy's header
  std::uint64_t entries_lba = 0;
  std::uint64_t entries_bytes = 0;
};

// ReadLe reads an unsigned little-endian integer of `bytes` bytes (up to 8) at p, as
// GPT and dm-verity's superblock store them.
std::uint64_t ReadLe(const std::uint8_t* p, int bytes);

// ReadGptHeader checks a header sector (signature, header checksum) and says where its
// entries are.
Result<GptCopyPlace> ReadGptHeader(const std::vector<std::uint8_t>& header);

// PatchGptCopy applies changes to one copy: header is its sector, entries its entry
// array. The array must match the header's checksum before anything changes.
Status PatchGptCopy(std::vector<std::uint8_t>& header, std::vector<std::uint8_t>& entries,
                    const std::vector<EntryChange>& changes);

}  // namespace sprout::update
