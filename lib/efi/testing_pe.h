// Test-only: a small synthetic PE32+ EFI application built in memory, so the PE, UKI and
// Authenticode tests need no real binaries. Not for production code.
#pragma once

#include <cstdint>
#include <string>

#include "efi/pe.h"

namespace sprout::efi::testing {

// Where MakeTestPe puts its headers, for tests that patch them.
inline constexpr std::uint32_t kTestPeCoffOffset = 0x80;                        // "PE\0\0"
inline constexpr std::uint32_t kTestPeOptionalOffset = kTestPeCoffOffset + 24;  // 0x98
inline constexpr std::uint32_t kTestPeOptionalSize = 240;                       // PE32+ with 16 directories
inline constexpr std::uint32_t kTestPeSectionTableOffset = kTestPeOptionalOffset + kTestPeOptionalSize;  // 0x188
inline constexpr std::uint32_t kTestPeChecksumOffset = kTestPeOptionalOffset + 64;
inline constexpr std::uint32_t kTestPeCertDirOffset = kTestPeOptionalOffset + 112 + 8 * 4;
inline constexpr std::uint32_t kTestPeSectionAlignment = 0x1000;
inline constexpr std::uint32_t kTestPeFileAlignment = 0x200;

// MakeTestPe returns a PE32+ EFI application (subsystem 10) for machine with nsections
// sections (.text, then .data, then .sec2, .sec3, ...). Section i has virtual address
// 0x1000 * (i + 1), virtual size 0x1a0 + i, 0x200 raw bytes at size_of_headers + 0x200 * i
// filled with the byte 'A' + i; the file ends with the last section. SectionAlignment is
// 0x1000, FileAlignment 0x200, ImageBase 0x140000000, and CheckSum is correct. The
// headers must hold the section table: 0x188 + 40 * nsections <= size_of_headers.
inline std::string MakeTestPe(std::uint16_t machine = 0x8664, int nsections = 2,
                              std::uint32_t size_of_headers = 0x400) {
  const auto n = static_cast<std::uint32_t>(nsections);
  std::string b(size_of_headers + kTestPeFileAlignment * n, '\0');
  // MS-DOS header: the magic and e_lfanew.
  b[0] = 'M';
  b[1] = 'Z';
  PutLe32(b, 0x3c, kTestPeCoffOffset);
  // PE signature and COFF file header.
  b.replace(kTestPeCoffOffset, 4, std::string("PE\0\0", 4));
  const std::uint32_t coff = kTestPeCoffOffset + 4;
  PutLe16(b, coff, machine);
  PutLe16(b, coff + 2, static_cast<std::uint16_t>(n));
  PutLe16(b, coff + 16, static_cast<std::uint16_t>(kTestPeOptionalSize));
  PutLe16(b, coff + 18, 0x0022);  // executable image, large address aware
  // PE32+ optional header.
  const std::uint32_t opt = kTestPeOptionalOffset;
  PutLe16(b, opt, 0x20b);
  PutLe32(b, opt + 4, n > 0 ? kTestPeFileAlignment : 0);            // SizeOfCode
  PutLe32(b, opt + 8, n > 1 ? kTestPeFileAlignment * (n - 1) : 0);  // SizeOfInitializedData
  PutLe32(b, opt + 16, 0x1000);                                     // AddressOfEntryPoint
  PutLe32(b, opt + 20, 0x1000);                                     // BaseOfCode
  PutLe32(b, opt + 24, 0x40000000);                                 // ImageBase, low half
  PutLe32(b, opt + 28, 0x1);                                        // ImageBase, high half
  PutLe32(b, opt + 32, kTestPeSectionAlignment);
  PutLe32(b, opt + 36, kTestPeFileAlignment);
  PutLe16(b, opt + 48, 1);                                  // MajorSubsystemVersion
  PutLe32(b, opt + 56, kTestPeSectionAlignment * (n + 1));  // SizeOfImage
  PutLe32(b, opt + 60, size_of_headers);
  PutLe16(b, opt + 68, 10);   // EFI application
  PutLe32(b, opt + 108, 16);  // NumberOfRvaAndSizes
  // Section table and section data.
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint32_t h = kTestPeSectionTableOffset + 40 * i;
    std::string name = i == 0 ? ".text" : i == 1 ? ".data" : ".sec" + std::to_string(i);
    b.replace(h, name.size(), name);
    PutLe32(b, h + 8, 0x1a0 + i);                                    // VirtualSize
    PutLe32(b, h + 12, kTestPeSectionAlignment * (i + 1));           // VirtualAddress
    PutLe32(b, h + 16, kTestPeFileAlignment);                        // SizeOfRawData
    PutLe32(b, h + 20, size_of_headers + kTestPeFileAlignment * i);  // PointerToRawData
    PutLe32(b, h + 36, i == 0 ? 0x60000020 : 0xc0000040);            // code r-x / data rw-
    b.replace(size_of_headers + kTestPeFileAlignment * i, kTestPeFileAlignment, kTestPeFileAlignment,
              static_cast<char>('A' + i));
  }
  PutLe32(b, kTestPeChecksumOffset, PeChecksum(b, kTestPeChecksumOffset));
  return b;
}

}  // namespace sprout::efi::testing
