#include "image/gpt.h"

#include <algorithm>
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
    p.entry = static_cast<std::uint32_t>(l.partitions.size());
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

namespace sprout {

namespace {

std::uint64_t Get64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}
std::uint32_t Get32(const std::uint8_t* p) { return static_cast<std::uint32_t>(Get64(p) & 0xFFFFFFFFu); }

Guid FromDisk(const std::uint8_t* p) {
  static const int kOrder[16] = {3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15};
  Guid g;
  for (int i = 0; i < 16; ++i) g.bytes[static_cast<std::size_t>(kOrder[i])] = p[i];
  return g;
}

}  // namespace

Result<GptLayout> ParseGpt(const std::vector<std::uint8_t>& head, std::uint64_t disk_size) {
  if (head.size() < 34 * kSectorSize) return Fail("the image is too small to hold a GPT");
  const std::uint8_t* h = head.data() + kSectorSize;
  if (std::memcmp(h, "EFI PART", 8) != 0) return Fail("no GPT found (the second sector lacks 'EFI PART')");
  std::uint32_t header_size = Get32(h + 12);
  if (header_size < 92 || header_size > kSectorSize) return Fail("the GPT header has an invalid size");
  std::array<std::uint8_t, kSectorSize> copy{};
  std::memcpy(copy.data(), h, header_size);
  Put32(copy.data() + 16, 0);  // the CRC field counts as zero
  if (Crc32(copy.data(), header_size) != Get32(h + 16)) return Fail("the GPT header checksum is wrong");
  std::uint64_t entries_lba = Get64(h + 72);
  std::uint32_t count = Get32(h + 80), size = Get32(h + 84);
  if (size < 128 || entries_lba != 2 || count * static_cast<std::uint64_t>(size) > 32 * kSectorSize) {
    return Fail("the GPT entry array is not where sprout expects it (LBA 2, at most 16 KiB)");
  }
  const std::uint8_t* entries = head.data() + 2 * kSectorSize;
  if (Crc32(entries, count * static_cast<std::size_t>(size)) != Get32(h + 88)) {
    return Fail("the GPT partition entries checksum is wrong");
  }
  GptLayout l;
  l.disk_guid = FromDisk(h + 56);
  l.disk_size = disk_size;
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint8_t* e = entries + static_cast<std::size_t>(i) * size;
    bool used = false;
    for (int b = 0; b < 16; ++b) used = used || e[b] != 0;
    if (!used) continue;
    Partition p;
    p.entry = i;
    p.spec.type = FromDisk(e);
    p.spec.uuid = FromDisk(e + 16);
    p.first_lba = Get64(e + 32);
    p.last_lba = Get64(e + 40);
    p.spec.attributes = Get64(e + 48);
    for (int c = 0; c < 36; ++c) {
      std::uint16_t ch = static_cast<std::uint16_t>(e[56 + 2 * c] | e[57 + 2 * c] << 8);
      if (ch == 0) break;
      p.spec.label += ch < 128 ? static_cast<char>(ch) : '?';
    }
    p.spec.size = p.size();
    l.partitions.push_back(p);
  }
  return l;
}

}  // namespace sprout
