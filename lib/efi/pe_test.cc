#include "efi/pe.h"

#include <catch2/catch.hpp>

#include "efi/testing_pe.h"

using namespace sprout;
using namespace sprout::efi;
using namespace sprout::efi::testing;

namespace {

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("ParsePe reads the headers and section table of a PE32+ image", "[efi]") {
  std::string b = MakeTestPe(0xaa64, 3);
  auto pe = ParsePe(b, "test.efi");
  REQUIRE(pe);
  CHECK(pe->machine == 0xaa64);
  CHECK(pe->coff_offset == kTestPeCoffOffset);
  CHECK(pe->optional_offset == kTestPeOptionalOffset);
  CHECK(pe->optional_size == kTestPeOptionalSize);
  CHECK(pe->section_table_offset == kTestPeSectionTableOffset);
  CHECK(pe->checksum_offset == kTestPeChecksumOffset);
  CHECK(pe->cert_dir_offset == kTestPeCertDirOffset);
  CHECK(pe->image_base == 0x140000000);
  CHECK(pe->section_alignment == 0x1000);
  CHECK(pe->file_alignment == 0x200);
  CHECK(pe->size_of_image == 0x4000);
  CHECK(pe->size_of_headers == 0x400);
  CHECK(pe->number_of_rva_and_sizes == 16);
  CHECK(pe->cert_table_offset == 0);
  CHECK(pe->cert_table_size == 0);
  REQUIRE(pe->sections.size() == 3);
  CHECK(pe->sections[0].name == ".text");
  CHECK(pe->sections[0].virtual_address == 0x1000);
  CHECK(pe->sections[0].virtual_size == 0x1a0);
  CHECK(pe->sections[0].raw_offset == 0x400);
  CHECK(pe->sections[0].raw_size == 0x200);
  CHECK(pe->sections[0].characteristics == 0x60000020);
  CHECK(pe->sections[1].name == ".data");
  CHECK(pe->sections[1].characteristics == 0xc0000040);
  CHECK(pe->sections[2].name == ".sec2");
  CHECK(pe->sections[2].virtual_address == 0x3000);
  CHECK(pe->sections[2].raw_offset == 0x800);
  CHECK(b.size() == 0xa00);
  CHECK(Le32(b, kTestPeChecksumOffset) == PeChecksum(b, kTestPeChecksumOffset));
}

TEST_CASE("FindSection finds a section by its whole name only", "[efi]") {
  auto pe = ParsePe(MakeTestPe(), "test.efi");
  REQUIRE(pe);
  REQUIRE(FindSection(*pe, ".data") != nullptr);
  CHECK(FindSection(*pe, ".data")->virtual_address == 0x2000);
  CHECK(FindSection(*pe, ".dat") == nullptr);
  CHECK(FindSection(*pe, ".linux") == nullptr);
}

TEST_CASE("ParsePe refuses a file cut short anywhere, naming the file", "[efi]") {
  std::string b = MakeTestPe();
  for (auto [size, why] :
       std::vector<std::pair<std::size_t, std::string>>{{0x20, "no MZ header"},
                                                        {0x90, "no PE signature"},
                                                        {0x100, "optional header is cut short"},
                                                        {0x1a0, "section table is cut short"},
                                                        {0x700, "section .data runs past the end of the file"}}) {
    auto pe = ParsePe(b.substr(0, size), "cut.efi");
    INFO(size);
    REQUIRE(!pe);
    CHECK(Contains(pe.error(), "cut.efi is not a PE32+ EFI image: "));
    CHECK(Contains(pe.error(), why));
  }
}

TEST_CASE("ParsePe refuses a file without the MZ magic", "[efi]") {
  std::string b = MakeTestPe();
  b[0] = 'X';
  auto pe = ParsePe(b, "notpe.bin");
  REQUIRE(!pe);
  CHECK(pe.error() == "notpe.bin is not a PE32+ EFI image: no MZ header");
}

TEST_CASE("ParsePe refuses a 32-bit PE32 image", "[efi]") {
  std::string b = MakeTestPe(0x14c);
  PutLe16(b, kTestPeOptionalOffset, 0x10b);
  auto pe = ParsePe(b, "ia32.efi");
  REQUIRE(!pe);
  CHECK(pe.error() == "ia32.efi is not a PE32+ EFI image: its optional header is not PE32+ (magic 0x20b)");
}

TEST_CASE("ParsePe refuses a section whose raw data lies past the file's end", "[efi]") {
  std::string b = MakeTestPe();
  PutLe32(b, kTestPeSectionTableOffset + 40 + 20, 0x10000);  // .data's PointerToRawData
  auto pe = ParsePe(b, "far.efi");
  REQUIRE(!pe);
  CHECK(pe.error() == "far.efi is not a PE32+ EFI image: its section .data runs past the end of the file");
}

TEST_CASE("ParsePe refuses a certificate table past the file's end", "[efi]") {
  std::string b = MakeTestPe();
  PutLe32(b, kTestPeCertDirOffset, static_cast<std::uint32_t>(b.size()));
  PutLe32(b, kTestPeCertDirOffset + 4, 8);
  auto pe = ParsePe(b, "signed.efi");
  REQUIRE(!pe);
  CHECK(Contains(pe.error(), "signed.efi is not a PE32+ EFI image: its certificate table runs past"));
  b.append(8, '\0');
  pe = ParsePe(b, "signed.efi");
  REQUIRE(pe);
  CHECK(pe->cert_table_offset == b.size() - 8);
  CHECK(pe->cert_table_size == 8);
}

TEST_CASE("PeChecksum sums 16-bit words with carries, skips the CheckSum field and adds the length", "[efi]") {
  // Words 0x0201 + 0x0403, the field at 4 skipped, 0xffff twice (each carry folds back in),
  // and the odd last byte 0x05: 0x0609; plus the length 13: 0x0616.
  std::string b("\x01\x02\x03\x04\xaa\xbb\xcc\xdd\xff\xff\xff\xff\x05", 13);
  CHECK(PeChecksum(b, 4) == 0x0616);
  b[4] = '\0';
  b[7] = '\x11';
  CHECK(PeChecksum(b, 4) == 0x0616);
  b[12] = '\x06';
  CHECK(PeChecksum(b, 4) == 0x0617);
}

TEST_CASE("AlignUp rounds up to a power of two", "[efi]") {
  CHECK(AlignUp(0, 0x200) == 0);
  CHECK(AlignUp(1, 0x200) == 0x200);
  CHECK(AlignUp(0x200, 0x200) == 0x200);
  CHECK(AlignUp(0x201, 0x1000) == 0x1000);
}

TEST_CASE("Le16, Le32 and Le64 read what PutLe16 and PutLe32 write", "[efi]") {
  std::string b(8, '\0');
  PutLe32(b, 0, 0x12345678);
  PutLe16(b, 4, 0xfedc);
  CHECK(b.substr(0, 6) == "\x78\x56\x34\x12\xdc\xfe");
  CHECK(Le16(b, 0) == 0x5678);
  CHECK(Le32(b, 0) == 0x12345678);
  CHECK(Le64(b, 0) == 0x0000fedc12345678);
}
