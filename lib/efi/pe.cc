#include "efi/pe.h"

namespace sprout::efi {

namespace {

constexpr std::uint16_t kPe32PlusMagic = 0x20b;
constexpr std::uint32_t kSectionHeaderSize = 40;
constexpr std::uint32_t kCertificateDirectory = 4;

}  // namespace

std::uint16_t Le16(std::string_view b, std::size_t at) {
  return static_cast<std::uint16_t>(static_cast<unsigned char>(b[at]) | (static_cast<unsigned char>(b[at + 1]) << 8));
}

std::uint32_t Le32(std::string_view b, std::size_t at) {
  return static_cast<std::uint32_t>(Le16(b, at)) | (static_cast<std::uint32_t>(Le16(b, at + 2)) << 16);
}

std::uint64_t Le64(std::string_view b, std::size_t at) {
  return static_cast<std::uint64_t>(Le32(b, at)) | (static_cast<std::uint64_t>(Le32(b, at + 4)) << 32);
}

void PutLe16(std::string& b, std::size_t at, std::uint16_t v) {
  b[at] = static_cast<char>(v & 0xff);
  b[at + 1] = static_cast<char>(v >> 8);
}

void PutLe32(std::string& b, std::size_t at, std::uint32_t v) {
  PutLe16(b, at, static_cast<std::uint16_t>(v & 0xffff));
  PutLe16(b, at + 2, static_cast<std::uint16_t>(v >> 16));
}

Result<PeImage> ParsePe(std::string_view b, const std::string& what) {
  auto bad = [&](const std::string& why) { return Fail(what + " is not a PE32+ EFI image: " + why); };
  if (b.size() < 0x40 || b[0] != 'M' || b[1] != 'Z') return bad("no MZ header");
  PeImage pe;
  pe.coff_offset = Le32(b, 0x3c);
  if (std::uint64_t{pe.coff_offset} + 24 > b.size() || b.substr(pe.coff_offset, 4) != std::string_view("PE\0\0", 4))
    return bad("no PE signature at the offset its MZ header gives");
  std::size_t coff = pe.coff_offset + 4;
  pe.machine = Le16(b, coff);
  std::uint16_t nsections = Le16(b, coff + 2);
  pe.optional_size = Le16(b, coff + 16);
  pe.optional_offset = static_cast<std::uint32_t>(coff + 20);
  if (std::uint64_t{pe.optional_offset} + pe.optional_size > b.size() || pe.optional_size < 112)
    return bad("its optional header is cut short");
  std::size_t opt = pe.optional_offset;
  if (Le16(b, opt) != kPe32PlusMagic) return bad("its optional header is not PE32+ (magic 0x20b)");
  pe.image_base = Le64(b, opt + 24);
  pe.section_alignment = Le32(b, opt + 32);
  pe.file_alignment = Le32(b, opt + 36);
  pe.size_of_image = Le32(b, opt + 56);
  pe.size_of_headers = Le32(b, opt + 60);
  pe.checksum_offset = static_cast<std::uint32_t>(opt + 64);
  pe.number_of_rva_and_sizes = Le32(b, opt + 108);
  auto is_pow2 = [](std::uint32_t v) { return v != 0 && (v & (v - 1)) == 0; };
  if (!is_pow2(pe.section_alignment) || !is_pow2(pe.file_alignment))
    return bad("its section or file alignment is not a power of two");
  if (pe.number_of_rva_and_sizes > kCertificateDirectory &&
      112 + 8 * std::uint64_t{kCertificateDirectory + 1} <= pe.optional_size) {
    pe.cert_dir_offset = static_cast<std::uint32_t>(opt + 112 + std::size_t{8} * kCertificateDirectory);
    pe.cert_table_offset = Le32(b, pe.cert_dir_offset);
    pe.cert_table_size = Le32(b, pe.cert_dir_offset + 4);
    if (std::uint64_t{pe.cert_table_offset} + pe.cert_table_size > b.size())
      return bad("its certificate table runs past the end of the file");
  }
  pe.section_table_offset = pe.optional_offset + pe.optional_size;
  if (std::uint64_t{pe.section_table_offset} + std::uint64_t{nsections} * kSectionHeaderSize > b.size())
    return bad("its section table is cut short");
  for (std::uint16_t i = 0; i < nsections; ++i) {
    std::size_t h = pe.section_table_offset + std::size_t{i} * kSectionHeaderSize;
    PeSection s;
    auto raw_name = b.substr(h, 8);
    s.name = std::string(raw_name.substr(0, raw_name.find('\0')));
    s.virtual_size = Le32(b, h + 8);
    s.virtual_address = Le32(b, h + 12);
    s.raw_size = Le32(b, h + 16);
    s.raw_offset = Le32(b, h + 20);
    s.characteristics = Le32(b, h + 36);
    if (s.raw_size != 0 && std::uint64_t{s.raw_offset} + s.raw_size > b.size())
      return bad("its section " + s.name + " runs past the end of the file");
    pe.sections.push_back(std::move(s));
  }
  return pe;
}

const PeSection* FindSection(const PeImage& pe, std::string_view name) {
  for (const auto& s : pe.sections)
    if (s.name == name) return &s;
  return nullptr;
}

std::uint32_t PeChecksum(std::string_view b, std::uint32_t checksum_offset) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < b.size(); i += 2) {
    if (i == checksum_offset || i == checksum_offset + 2) continue;
    std::uint32_t word = static_cast<unsigned char>(b[i]);
    if (i + 1 < b.size()) word |= static_cast<std::uint32_t>(static_cast<unsigned char>(b[i + 1])) << 8;
    sum += word;
    sum = (sum & 0xffff) + (sum >> 16);
  }
  sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint32_t>(sum + b.size());
}

}  // namespace sprout::efi
