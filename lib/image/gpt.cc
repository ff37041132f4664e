#include "image/gpt.h"

#include <array>
#include <cstring>

namespace sprout {

namespace {

constexpr std::uint64_t kEntryCount = 128;
constexpr std::uint64_t kEntrySize = 128;
constexpr std::uint64_t kEntryLbas = kEntryCount * kEntrySize / kSectorSize;  // 32

std::uint64_t RoundUp(std::uint64_t v, std::uint64_t to) { return (v + to - 1) / to * to; }

void Put16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v);
  p[1] = static_cast<std::uint8_t>(v >> 8);
}
void Put32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void Put64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

// Header writes a GPT header for one copy (primary or backup) into out (one sector).
void Header(std::uint8_t* out, const GptLayout& l, std::uint64_t my_lba, std::uint64_t alt_lba,
            std::uint64_t entries_lba, std::uint32_t entries_crc) {
  std::uint64_t last_lba = l.disk_size / kSectorSize - 1;
  std::memcpy(out, "EFI PART", 8);
  Put32(out + 8, 0x00010000);  // revision 1.0
  Put32(out + 12, 92);         // header size
  Put32(out + 16, 0);          // header CRC, filled below
  Put64(out + 24, my_lba);
  Put64(out + 32, alt_lba);
  Put64(out + 40, 2 + kEntryLbas);             // first usable LBA
  Put64(out + 48, last_lba - 1 - kEntryLbas);  // last usable LBA
  l.disk_guid.ToDisk(out + 56);
  Put64(out + 72, entries_lba);
  Put32(out + 80, static_cast<std::uint32_t>(kEntryCount));
  Put32(out + 84, static_cast<std::uint32_t>(kEntrySize));
  Put32(out + 88, entries_crc);
  Put32(out + 16, Crc32(out, 92));
}

}  // namespace

std::uint32_t Crc32(const std::uint8_t* data, std::size_t size) {
  static const auto kTable = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) crc = kTable[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

Result<GptLayout> PlanGpt(const Guid& disk_guid, const std::vector<PartitionSpec>& specs) {
  if (specs.empty()) return Fail("a disk needs at least one partition");
  if (specs.size() > kEntryCount) return Fail("a GPT holds at most 128 partitions");
  GptLayout l;
  l.disk_guid = disk_guid;
  std::uint64_t offset = kAlignment;  // the tables fit well within the first MiB
  for (const auto& s : specs) {
    if (s.size == 0) return Fail("partition '" + s.label + "' has size 0");
    if (s.label.size() > 36) return Fail("partition label '" + s.label + "' is longer than 36 characters");
    Partition p;
    p.spec = s;
    std::uint64_t size = RoundUp(s.size, kAlignment);
    p.first_lba = offset / kSectorSize;
    p.last_lba = (offset + size) / kSectorSize - 1;
    offset += size;
    l.partitions.push_back(p);
  }
  // The backup table takes the last 33 sectors; a full MiB of slack keeps it clear.
  l.disk_size = offset + kAlignment;
  return l;
}

GptBytes RenderGpt(const GptLayout& l) {
  GptBytes out;
  const std::uint64_t sectors = l.disk_size / kSectorSize;
  const std::uint64_t last_lba = sectors - 1;

  std::vector<std::uint8_t> entries(kEntryCount * kEntrySize, 0);
  for (std::size_t i = 0; i < l.partitions.size(); ++i) {
    const auto& p = l.partitions[i];
    std::uint8_t* e = entries.data() + i * kEntrySize;
    p.spec.type.ToDisk(e);
    p.spec.uuid.ToDisk(e + 16);
    Put64(e + 32, p.first_lba);
    Put64(e + 40, p.last_lba);
    Put64(e + 48, p.spec.attributes);
    for (std::size_t c = 0; c < p.spec.label.size() && c < 36; ++c) {
      Put16(e + 56 + 2 * c, static_cast<std::uint8_t>(p.spec.label[c]));
    }
  }
  const std::uint32_t entries_crc = Crc32(entries.data(), entries.size());

  out.head.assign((2 + kEntryLbas) * kSectorSize, 0);
  // Protective MBR: one partition of type 0xEE covering the disk (capped at 2^32-1 sectors).
  std::uint8_t* mbr = out.head.data();
  std::uint8_t* pe = mbr + 446;
  pe[1] = 0x00;
  pe[2] = 0x02;  // CHS of LBA 1
  pe[4] = 0xEE;
  pe[5] = pe[6] = pe[7] = 0xFF;
  Put32(pe + 8, 1);
  Put32(pe + 12, static_cast<std::uint32_t>(std::min<std::uint64_t>(sectors - 1, 0xFFFFFFFFu)));
  mbr[510] = 0x55;
  mbr[511] = 0xAA;
  Header(out.head.data() + kSectorSize, l, 1, last_lba, 2, entries_crc);
  std::memcpy(out.head.data() + 2 * kSectorSize, entries.data(), entries.size());

  out.tail.assign((kEntryLbas + 1) * kSectorSize, 0);
  std::memcpy(out.tail.data(), entries.data(), entries.size());
  Header(out.tail.data() + kEntryLbas * kSectorSize, l, last_lba, 1, last_lba - kEntryLbas, entries_crc);
  out.tail_offset = (last_lba - kEntryLbas) * kSectorSize;
  return out;
}

}  // namespace sprout
