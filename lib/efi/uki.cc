#include "efi/uki.h"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>

namespace sprout::efi {

namespace {

constexpr const char* kStub = "the EFI stub";
constexpr std::uint32_t kSectionHeaderSize = 40;
constexpr std::size_t kPartSections = 6;
// Initialized, readable data: what objcopy gives an added data section.
constexpr std::uint32_t kDataCharacteristics = 0x40000040;
// COFF file header fields, from the "PE\0\0" signature.
constexpr std::uint32_t kNumberOfSectionsField = 6;
constexpr std::uint32_t kPointerToSymbolTableField = 12;
constexpr std::uint32_t kNumberOfSymbolsField = 16;
// Optional header fields, from its start.
constexpr std::uint32_t kSizeOfInitializedDataField = 8;
constexpr std::uint32_t kSizeOfImageField = 56;

std::string Hex(std::uint64_t v) {
  static constexpr std::array<char, 16> kDigits{'0', '1', '2', '3', '4', '5', '6', '7',
                                                '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
  std::string s;
  do {
    s.insert(s.begin(), kDigits[v & 0xf]);
    v >>= 4;
  } while (v != 0);
  return "0x" + s;
}

bool AllZero(std::string_view b) { return b.find_first_not_of('\0') == std::string_view::npos; }

// Added is one section BuildUki appends.
struct Added {
  std::string_view name;
  const std::string* data;
};

}  // namespace

Result<std::string> BuildUki(const std::string& stub, const UkiParts& parts) {
  auto pe = ParsePe(stub, kStub);
  if (!pe) return Fail(pe.error());
  const std::string stub_name = kStub;
  if (parts.kernel.empty())
    return Fail("the UKI has no kernel: its .linux section would be empty; pass the kernel image (vmlinuz)");
  if (parts.cmdline.empty())
    return Fail(
        "the UKI's kernel command line is empty; under Secure Boot the stub uses only its .cmdline, so give one "
        "(at least root=...)");
  if (pe->cert_table_size != 0)
    return Fail(stub_name +
                " is signed (it has a certificate table); build the UKI from the unsigned stub systemd-boot-efi "
                "ships and sign the UKI afterwards");
  const std::array<Added, kPartSections> all{{{".osrel", &parts.osrel},
                                              {".cmdline", &parts.cmdline},
                                              {".linux", &parts.kernel},
                                              {".initrd", &parts.initrd},
                                              {".pcrpkey", &parts.pcrpkey},
                                              {".pcrsig", &parts.pcrsig}}};
  for (const auto& a : all)
    if (FindSection(*pe, a.name) != nullptr)
      return Fail(stub_name + " already has a " + std::string(a.name) +
                  " section, so it is a UKI already; build from the plain stub (linuxx64.efi.stub or "
                  "linuxaa64.efi.stub from systemd-boot-efi)");

  // The new section headers go right after the stub's, in header space that must be free.
  const std::uint64_t table_end = pe->section_table_offset + std::uint64_t{kSectionHeaderSize} * pe->sections.size();
  std::uint64_t first_raw = pe->size_of_headers;
  std::uint64_t data_end = pe->size_of_headers;  // end of the last section's raw data
  std::uint64_t va_end = 0;                      // end of the last section in memory
  for (const auto& s : pe->sections) {
    if (s.raw_size != 0) {
      first_raw = std::min<std::uint64_t>(first_raw, s.raw_offset);
      data_end = std::max<std::uint64_t>(data_end, std::uint64_t{s.raw_offset} + s.raw_size);
    }
    va_end = std::max<std::uint64_t>(va_end, std::uint64_t{s.virtual_address} + std::max(s.virtual_size, s.raw_size));
  }
  if (data_end > stub.size())
    return Fail(stub_name + " is cut short: its headers end at " + Hex(data_end) + " but the file is " +
                std::to_string(stub.size()) + " bytes");
  const auto added = static_cast<std::uint64_t>(
      std::count_if(all.begin(), all.end(), [](const Added& a) { return !a.data->empty(); }));
  const std::uint64_t new_table_end = table_end + std::uint64_t{kSectionHeaderSize} * added;
  if (new_table_end > first_raw)
    return Fail(stub_name + " has no room in its headers for " + std::to_string(added) +
                " more section headers (its section table ends at " + Hex(table_end) + ", " +
                Hex(new_table_end - table_end) + " more bytes are needed, and its " +
                (first_raw < pe->size_of_headers ? "first section starts" : "headers end") + " at " + Hex(first_raw) +
                "); use a stub linked with larger headers, such as systemd-boot-efi's");
  if (!AllZero(std::string_view(stub).substr(table_end, new_table_end - table_end)))
    return Fail(stub_name + " keeps data in its headers after its section table (at " + Hex(table_end) +
                "), where the UKI's section headers go; use the stub systemd-boot-efi ships");

  // After the last section: nothing, zero padding, or a COFF symbol table (deprecated in
  // images and never loaded), which the UKI drops. Anything else sprout cannot place.
  std::string_view sv(stub);
  const std::uint32_t symbols = Le32(sv, pe->coff_offset + kPointerToSymbolTableField);
  std::string_view tail = sv.substr(std::min<std::uint64_t>(data_end, sv.size()));
  const bool drop_symbols = symbols != 0 && symbols >= data_end && symbols < sv.size();
  if (drop_symbols) tail = sv.substr(data_end, symbols - data_end);
  if (!AllZero(tail))
    return Fail(stub_name + " has data after its last section (at " + Hex(data_end) +
                ") that is not a COFF symbol table; use the stub systemd-boot-efi ships");

  std::string out(sv.substr(0, data_end));
  if (drop_symbols) {
    PutLe32(out, pe->coff_offset + kPointerToSymbolTableField, 0);
    PutLe32(out, pe->coff_offset + kNumberOfSymbolsField, 0);
  }
  std::uint64_t va = AlignUp(va_end, pe->section_alignment);
  std::uint64_t image_end = 0;
  std::uint64_t added_raw = 0;
  std::uint32_t header = static_cast<std::uint32_t>(table_end);
  std::uint16_t count = static_cast<std::uint16_t>(pe->sections.size());
  for (const auto& a : all) {
    if (a.data->empty()) continue;  // no initrd, os-release or PCR policy
    const std::uint64_t raw_offset = AlignUp(out.size(), pe->file_alignment);
    const std::uint64_t raw_size = AlignUp(a.data->size(), pe->file_alignment);
    if (raw_offset + raw_size > std::numeric_limits<std::uint32_t>::max() ||
        va + raw_size > std::numeric_limits<std::uint32_t>::max())
      return Fail("the UKI would be larger than a PE image can be (4 GiB); " + std::string(a.name) + " is " +
                  std::to_string(a.data->size()) + " bytes");
    out.resize(raw_offset, '\0');
    out += *a.data;
    out.resize(raw_offset + raw_size, '\0');
    out.replace(header, a.name.size(), a.name);
    PutLe32(out, header + 8, static_cast<std::uint32_t>(a.data->size()));  // VirtualSize
    PutLe32(out, header + 12, static_cast<std::uint32_t>(va));             // VirtualAddress
    PutLe32(out, header + 16, static_cast<std::uint32_t>(raw_size));       // SizeOfRawData
    PutLe32(out, header + 20, static_cast<std::uint32_t>(raw_offset));     // PointerToRawData
    PutLe32(out, header + 36, kDataCharacteristics);
    header += kSectionHeaderSize;
    ++count;
    added_raw += raw_size;
    image_end = va + a.data->size();
    va = AlignUp(va + std::max<std::uint64_t>(a.data->size(), raw_size), pe->section_alignment);
  }

  const std::uint32_t opt = pe->optional_offset;
  PutLe16(out, pe->coff_offset + kNumberOfSectionsField, count);
  PutLe32(out, opt + kSizeOfImageField, static_cast<std::uint32_t>(AlignUp(image_end, pe->section_alignment)));
  const std::uint64_t initialized = Le32(out, opt + kSizeOfInitializedDataField) + added_raw;
  PutLe32(out, opt + kSizeOfInitializedDataField,
          static_cast<std::uint32_t>(std::min<std::uint64_t>(initialized, std::numeric_limits<std::uint32_t>::max())));
  PutLe32(out, pe->checksum_offset, PeChecksum(out, pe->checksum_offset));
  return out;
}

Result<std::string> UkiSection(const std::string& uki, std::string_view name) {
  auto pe = ParsePe(uki, "the UKI");
  if (!pe) return Fail(pe.error());
  const PeSection* s = FindSection(*pe, name);
  if (s == nullptr) return Fail("the UKI has no " + std::string(name) + " section");
  // ParsePe checks the file range of sections with raw data; one without has no bytes
  // here, wherever its (unchecked) offset points.
  if (s->raw_size == 0) return std::string();
  return uki.substr(s->raw_offset, std::min(s->raw_size, s->virtual_size));
}

}  // namespace sprout::efi
