#include "update/gpt_patch.h"

#include <cstring>

#include "image/gpt.h"

namespace sprout::update {

std::uint64_t ReadLe(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

namespace {

void Put32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

}  // namespace

Result<GptCopyPlace> ReadGptHeader(const std::vector<std::uint8_t>& header) {
  if (header.size() < kSectorSize || std::memcmp(header.data(), "EFI PART", 8) != 0) {
    return Fail("no GPT header (no 'EFI PART' signature)");
  }
  const auto size = static_cast<std::uint32_t>(ReadLe(header.data() + 12, 4));
  if (size < 92 || size > kSectorSize) return Fail("the GPT header has an invalid size");
  std::vector<std::uint8_t> copy(header.begin(), header.begin() + size);
  Put32(copy.data() + 16, 0);
  if (Crc32(copy.data(), size) != ReadLe(header.data() + 16, 4)) return Fail("the GPT header checksum is wrong");
  GptCopyPlace p;
  p.alternate_lba = ReadLe(header.data() + 32, 8);
  p.entries_lba = ReadLe(header.data() + 72, 8);
  p.entries_bytes = ReadLe(header.data() + 80, 4) * ReadLe(header.data() + 84, 4);
  if (p.entries_bytes == 0 || p.entries_bytes > (1u << 20)) return Fail("the GPT entry array has an odd size");
  return p;
}

Status PatchGptCopy(std::vector<std::uint8_t>& header, std::vector<std::uint8_t>& entries,
                    const std::vector<EntryChange>& changes) {
  auto place = ReadGptHeader(header);
  if (!place) return Fail(place.error());
  if (entries.size() != place->entries_bytes) return Fail("the GPT entry array was not read whole");
  if (Crc32(entries.data(), entries.size()) != ReadLe(header.data() + 88, 4)) {
    return Fail("the GPT entry array does not match its checksum; not changing it");
  }
  const auto entry_size = static_cast<std::size_t>(ReadLe(header.data() + 84, 4));
  for (const auto& c : changes) {
    if ((static_cast<std::size_t>(c.entry) + 1) * entry_size > entries.size()) return Fail("no such GPT entry");
    if (c.label.size() > 36) return Fail("partition label '" + c.label + "' is longer than 36 characters");
    std::uint8_t* e = entries.data() + static_cast<std::size_t>(c.entry) * entry_size;
    c.uuid.ToDisk(e + 16);
    std::memset(e + 56, 0, 72);
    for (std::size_t i = 0; i < c.label.size(); ++i) e[56 + 2 * i] = static_cast<std::uint8_t>(c.label[i]);
  }
  Put32(header.data() + 88, Crc32(entries.data(), entries.size()));
  const auto size = static_cast<std::size_t>(ReadLe(header.data() + 12, 4));
  Put32(header.data() + 16, 0);
  Put32(header.data() + 16, Crc32(header.data(), size));
  return Ok{};
}

}  // namespace sprout::update
