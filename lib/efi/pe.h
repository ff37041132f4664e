// PE/COFF images as UEFI loads them: the headers a unified kernel image is assembled
// from and an Authenticode signature covers. Pure functions over bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace sprout::efi {

// PeSection is one entry of the section table.
struct PeSection {
  std::string name;  // up to 8 bytes, without the NUL padding
  std::uint32_t virtual_size = 0, virtual_address = 0;
  std::uint32_t raw_size = 0, raw_offset = 0;
  std::uint32_t characteristics = 0;
};

// PeImage is what sprout reads of a PE32+ image's headers. Offsets are from the start of
// the file.
struct PeImage {
  std::uint16_t machine = 0;               // 0x8664 x86-64, 0xaa64 arm64
  std::uint32_t coff_offset = 0;           // the "PE\0\0" signature
  std::uint32_t optional_offset = 0;       // the optional header
  std::uint16_t optional_size = 0;         // its size, as the COFF header says
  std::uint32_t section_table_offset = 0;  // the first section header
  std::uint32_t checksum_offset = 0;       // the optional header's CheckSum field
  std::uint32_t cert_dir_offset = 0;       // data directory 4 (the certificate table) entry
  std::uint64_t image_base = 0;
  std::uint32_t section_alignment = 0, file_alignment = 0;
  std::uint32_t size_of_image = 0, size_of_headers = 0;
  std::uint32_t number_of_rva_and_sizes = 0;
  std::uint32_t cert_table_offset = 0, cert_table_size = 0;  // 0, 0 when unsigned
  std::vector<PeSection> sections;
};

// ParsePe reads the headers of a PE32+ image (magic 0x20b) and checks that every
// section lies inside the file; what names the file in errors.
Result<PeImage> ParsePe(std::string_view bytes, const std::string& what);

// FindSection returns the section called name, or nullptr.
const PeSection* FindSection(const PeImage& pe, std::string_view name);

// Little-endian reads and writes at an offset the caller has checked.
std::uint16_t Le16(std::string_view b, std::size_t at);
std::uint32_t Le32(std::string_view b, std::size_t at);
std::uint64_t Le64(std::string_view b, std::size_t at);
void PutLe16(std::string& b, std::size_t at, std::uint16_t v);
void PutLe32(std::string& b, std::size_t at, std::uint32_t v);

// PeChecksum is the optional header's CheckSum of an image: the 16-bit one's-complement
// sum of the file's 16-bit words with the CheckSum field taken as zero, plus the length.
std::uint32_t PeChecksum(std::string_view bytes, std::uint32_t checksum_offset);

// AlignUp rounds v up to a multiple of a (a power of two).
inline std::uint64_t AlignUp(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace sprout::efi
