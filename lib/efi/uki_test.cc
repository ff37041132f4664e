#include "efi/uki.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "efi/testing_pe.h"
#include "util/fs.h"

using namespace sprout;
using namespace sprout::efi;
using namespace sprout::efi::testing;

namespace {

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Bytes that differ from position to position, so a misplaced slice shows.
std::string Pattern(std::size_t size, unsigned seed) {
  std::string s(size, '\0');
  for (std::size_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 131 + seed) % 251);
  return s;
}

UkiParts TestParts() {
  return UkiParts{"ID=sprout\nVERSION_ID=1\n", "root=PARTLABEL=root-a ro quiet", Pattern(5000, 1), Pattern(3001, 2)};
}

// CheckUki checks what every UKI built from stub must be: the stub's sections kept, the
// added ones after them in memory and in the file, and headers that describe them.
void CheckUki(const std::string& stub, const std::string& uki, const UkiParts& parts) {
  auto before = ParsePe(stub, "stub");
  auto after = ParsePe(uki, "uki");
  REQUIRE(before);
  REQUIRE(after);
  const std::size_t n = before->sections.size();
  std::vector<std::pair<std::string, std::string>> added;
  for (const auto& [name, data] : std::vector<std::pair<std::string, std::string>>{{".osrel", parts.osrel},
                                                                                   {".cmdline", parts.cmdline},
                                                                                   {".linux", parts.kernel},
                                                                                   {".initrd", parts.initrd},
                                                                                   {".pcrpkey", parts.pcrpkey},
                                                                                   {".pcrsig", parts.pcrsig}})
    if (!data.empty()) added.emplace_back(name, data);
  REQUIRE(after->sections.size() == n + added.size());
  std::uint64_t stub_end = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& s = before->sections[i];
    const auto& t = after->sections[i];
    CHECK(t.name == s.name);
    CHECK(t.virtual_address == s.virtual_address);
    CHECK(uki.substr(t.raw_offset, t.raw_size) == stub.substr(s.raw_offset, s.raw_size));
    stub_end =
        std::max<std::uint64_t>(stub_end, std::uint64_t{s.virtual_address} + std::max(s.virtual_size, s.raw_size));
  }
  std::uint64_t va_floor = stub_end;
  std::uint64_t file_floor = 0;
  std::uint64_t added_raw = 0;
  for (std::size_t i = 0; i < added.size(); ++i) {
    const auto& s = after->sections[n + i];
    INFO(s.name);
    CHECK(s.name == added[i].first);
    CHECK(s.virtual_size == added[i].second.size());
    CHECK(s.raw_size == AlignUp(added[i].second.size(), after->file_alignment));
    CHECK(s.characteristics == 0x40000040);
    CHECK(s.virtual_address % after->section_alignment == 0);
    CHECK(s.virtual_address >= va_floor);
    CHECK(s.raw_offset % after->file_alignment == 0);
    CHECK(s.raw_offset >= file_floor);
    CHECK(s.raw_offset >= before->size_of_headers);
    auto back = UkiSection(uki, added[i].first);
    REQUIRE(back);
    CHECK(*back == added[i].second);
    va_floor = std::uint64_t{s.virtual_address} + s.raw_size;
    file_floor = std::uint64_t{s.raw_offset} + s.raw_size;
    added_raw += s.raw_size;
  }
  CHECK(uki.size() == file_floor);
  CHECK(after->size_of_image % after->section_alignment == 0);
  CHECK(after->size_of_image >= va_floor - after->sections.back().raw_size + after->sections.back().virtual_size);
  CHECK(after->size_of_image < va_floor + after->section_alignment);
  CHECK(Le32(uki, after->optional_offset + 8) == Le32(stub, before->optional_offset + 8) + added_raw);
  CHECK(Le32(uki, after->checksum_offset) == PeChecksum(uki, after->checksum_offset));
  CHECK(after->machine == before->machine);
  CHECK(after->cert_table_size == 0);
}

}  // namespace

TEST_CASE("BuildUki adds .osrel, .cmdline, .linux and .initrd after the stub's sections", "[efi]") {
  const std::string stub = MakeTestPe();
  const UkiParts parts = TestParts();
  auto uki = BuildUki(stub, parts);
  REQUIRE(uki);
  CheckUki(stub, *uki, parts);
  auto pe = ParsePe(*uki, "uki");
  REQUIRE(pe);
  // The synthetic stub ends at 0x3000 in memory and 0x800 in the file.
  CHECK(pe->sections[2].virtual_address == 0x3000);
  CHECK(pe->sections[2].raw_offset == 0x800);
  CHECK(pe->sections[5].virtual_address == 0x7000);  // after .linux's 5000 bytes at 0x5000
  CHECK(pe->size_of_image == 0x8000);
  // The headers outside the fields BuildUki fixes are the stub's.
  CHECK(uki->substr(0, kTestPeCoffOffset + 6) == stub.substr(0, kTestPeCoffOffset + 6));
}

TEST_CASE("BuildUki gives the same bytes for the same inputs", "[efi]") {
  auto a = BuildUki(MakeTestPe(), TestParts());
  auto b = BuildUki(MakeTestPe(), TestParts());
  REQUIRE(a);
  REQUIRE(b);
  CHECK(*a == *b);
}

TEST_CASE("BuildUki leaves out an empty .initrd and .osrel", "[efi]") {
  UkiParts parts{"", "console=ttyS0", "kernel", ""};
  auto uki = BuildUki(MakeTestPe(), parts);
  REQUIRE(uki);
  auto pe = ParsePe(*uki, "uki");
  REQUIRE(pe);
  REQUIRE(pe->sections.size() == 4);
  CHECK(pe->sections[2].name == ".cmdline");
  CHECK(pe->sections[3].name == ".linux");
  CHECK(UkiSection(*uki, ".linux").value() == "kernel");
  auto initrd = UkiSection(*uki, ".initrd");
  REQUIRE(!initrd);
  CHECK(initrd.error() == "the UKI has no .initrd section");
  CHECK(pe->size_of_image == 0x5000);
  CHECK(Le32(*uki, pe->checksum_offset) == PeChecksum(*uki, pe->checksum_offset));
}

TEST_CASE("BuildUki refuses an empty kernel or command line", "[efi]") {
  UkiParts parts = TestParts();
  parts.kernel.clear();
  auto uki = BuildUki(MakeTestPe(), parts);
  REQUIRE(!uki);
  CHECK(Contains(uki.error(), "the UKI has no kernel"));
  CHECK(Contains(uki.error(), "pass the kernel image"));
  parts = TestParts();
  parts.cmdline.clear();
  uki = BuildUki(MakeTestPe(), parts);
  REQUIRE(!uki);
  CHECK(Contains(uki.error(), "the UKI's kernel command line is empty"));
}

TEST_CASE("BuildUki refuses a stub that is not a PE32+ image, naming the stub", "[efi]") {
  auto uki = BuildUki("#!/bin/sh\n", TestParts());
  REQUIRE(!uki);
  CHECK(uki.error() == "the EFI stub is not a PE32+ EFI image: no MZ header");
}

TEST_CASE("BuildUki refuses a signed stub", "[efi]") {
  std::string stub = MakeTestPe();
  PutLe32(stub, kTestPeCertDirOffset, static_cast<std::uint32_t>(stub.size()));
  PutLe32(stub, kTestPeCertDirOffset + 4, 8);
  stub += std::string("\x08\x00\x00\x00\x00\x02\x02\x00", 8);  // an empty WIN_CERTIFICATE
  auto uki = BuildUki(stub, TestParts());
  REQUIRE(!uki);
  CHECK(uki.error() ==
        "the EFI stub is signed (it has a certificate table); build the UKI from the unsigned stub "
        "systemd-boot-efi ships and sign the UKI afterwards");
}

TEST_CASE("BuildUki refuses a stub that is a UKI already", "[efi]") {
  auto once = BuildUki(MakeTestPe(), TestParts());
  REQUIRE(once);
  auto twice = BuildUki(*once, TestParts());
  REQUIRE(!twice);
  CHECK(Contains(twice.error(), "the EFI stub already has a .osrel section, so it is a UKI already"));
  UkiParts no_osrel = TestParts();
  no_osrel.osrel.clear();
  once = BuildUki(MakeTestPe(), no_osrel);
  REQUIRE(once);
  twice = BuildUki(*once, no_osrel);
  REQUIRE(!twice);
  CHECK(Contains(twice.error(), "the EFI stub already has a .cmdline section"));
}

TEST_CASE("BuildUki refuses a stub with no room for four more section headers", "[efi]") {
  // 0x188 + 2 * 40 = 0x1d8; four more headers end at 0x278, past headers of 0x200.
  auto uki = BuildUki(MakeTestPe(0x8664, 2, 0x200), TestParts());
  REQUIRE(!uki);
  CHECK(uki.error() ==
        "the EFI stub has no room in its headers for 4 more section headers (its section table ends at 0x1d8, "
        "0xa0 more bytes are needed, and its headers end at 0x200); use a stub linked with larger headers, such "
        "as systemd-boot-efi's");
  // With twelve sections the table ends at 0x368: three more headers fit, four do not.
  CHECK(!BuildUki(MakeTestPe(0x8664, 12), TestParts()));
  auto eleven = BuildUki(MakeTestPe(0x8664, 11), TestParts());
  REQUIRE(eleven);
  CheckUki(MakeTestPe(0x8664, 11), *eleven, TestParts());
}

TEST_CASE("BuildUki's room check counts the sections it adds", "[efi]") {
  // Ten sections end the table at 0x318: five more headers fit below 0x400, six do not.
  UkiParts six = TestParts();
  six.pcrpkey = "-----BEGIN PUBLIC KEY-----\n";
  six.pcrsig = "{}";
  auto refused = BuildUki(MakeTestPe(0x8664, 10), six);
  REQUIRE(!refused);
  CHECK(Contains(refused.error(),
                 "no room in its headers for 6 more section headers (its section table ends at "
                 "0x318, 0xf0 more bytes are needed"));
  auto nine = BuildUki(MakeTestPe(0x8664, 9), six);
  REQUIRE(nine);
  CheckUki(MakeTestPe(0x8664, 9), *nine, six);
  CHECK(UkiSection(*nine, ".pcrsig").value() == "{}");
  // Without a PCR policy, initrd or os-release, two headers are added, and fit where six do not.
  UkiParts two{"", "console=ttyS0", "kernel", ""};
  auto small = BuildUki(MakeTestPe(0x8664, 12), two);
  REQUIRE(small);
  CheckUki(MakeTestPe(0x8664, 12), *small, two);
}

TEST_CASE("BuildUki adds .pcrpkey and .pcrsig last, and refuses a stub that has one", "[efi]") {
  UkiParts parts = TestParts();
  parts.pcrpkey = "public key";
  parts.pcrsig = "signature";
  auto uki = BuildUki(MakeTestPe(), parts);
  REQUIRE(uki);
  CheckUki(MakeTestPe(), *uki, parts);
  auto pe = ParsePe(*uki, "uki");
  REQUIRE(pe);
  REQUIRE(pe->sections.size() == 8);
  CHECK(pe->sections[6].name == ".pcrpkey");
  CHECK(pe->sections[7].name == ".pcrsig");
  UkiParts plain = TestParts();
  auto refused = BuildUki(*uki, UkiParts{"", "x", "y", ""});
  REQUIRE(!refused);
  CHECK(Contains(refused.error(), "already has a .osrel section"));
  // A stub with only a .pcrsig (made here by renaming the stub's .data) is refused too.
  std::string stub = MakeTestPe();
  stub.replace(kTestPeSectionTableOffset + 40, 8, std::string(".pcrsig\0", 8));
  refused = BuildUki(stub, plain);
  REQUIRE(!refused);
  CHECK(Contains(refused.error(), "the EFI stub already has a .pcrsig section"));
}

TEST_CASE("BuildUki refuses a stub whose first section starts inside the room for headers", "[efi]") {
  std::string stub = MakeTestPe();
  PutLe32(stub, kTestPeSectionTableOffset + 20, 0x200);  // .text's raw data at 0x200
  auto uki = BuildUki(stub, TestParts());
  REQUIRE(!uki);
  CHECK(Contains(uki.error(), "its first section starts at 0x200"));
}

TEST_CASE("BuildUki refuses a stub keeping data where the new section headers go", "[efi]") {
  std::string stub = MakeTestPe();
  stub[kTestPeSectionTableOffset + 2 * 40 + 100] = 'x';
  auto uki = BuildUki(stub, TestParts());
  REQUIRE(!uki);
  CHECK(Contains(uki.error(), "the EFI stub keeps data in its headers after its section table (at 0x1d8)"));
}

TEST_CASE("BuildUki drops zero padding after the stub's last section", "[efi]") {
  std::string stub = MakeTestPe();
  const std::string plain = BuildUki(stub, TestParts()).value();
  stub.append(0x123, '\0');
  auto uki = BuildUki(stub, TestParts());
  REQUIRE(uki);
  CHECK(*uki == plain);
}

TEST_CASE("BuildUki drops the stub's COFF symbol table and refuses other trailing data", "[efi]") {
  std::string stub = MakeTestPe();
  const std::string plain = BuildUki(stub, TestParts()).value();
  PutLe32(stub, kTestPeCoffOffset + 12, static_cast<std::uint32_t>(stub.size()));  // PointerToSymbolTable
  PutLe32(stub, kTestPeCoffOffset + 16, 2);                                        // NumberOfSymbols
  stub += Pattern(2 * 18 + 4, 3);
  auto uki = BuildUki(stub, TestParts());
  REQUIRE(uki);
  CHECK(*uki == plain);
  CHECK(Le32(*uki, kTestPeCoffOffset + 12) == 0);
  CHECK(Le32(*uki, kTestPeCoffOffset + 16) == 0);

  std::string debug = MakeTestPe() + "debug data";
  auto refused = BuildUki(debug, TestParts());
  REQUIRE(!refused);
  CHECK(refused.error() ==
        "the EFI stub has data after its last section (at 0x800) that is not a COFF symbol table; use the stub "
        "systemd-boot-efi ships");
}

TEST_CASE("UkiSection cuts a section to its virtual size and names what is missing", "[efi]") {
  auto uki = BuildUki(MakeTestPe(), TestParts());
  REQUIRE(uki);
  auto cmdline = UkiSection(*uki, ".cmdline");
  REQUIRE(cmdline);
  CHECK(*cmdline == "root=PARTLABEL=root-a ro quiet");
  auto text = UkiSection(*uki, ".text");
  REQUIRE(text);
  CHECK(*text == std::string(0x1a0, 'A'));
  auto missing = UkiSection(*uki, ".splash");
  REQUIRE(!missing);
  CHECK(missing.error() == "the UKI has no .splash section");
  auto not_pe = UkiSection("text", ".linux");
  REQUIRE(!not_pe);
  CHECK(not_pe.error() == "the UKI is not a PE32+ EFI image: no MZ header");
}

TEST_CASE("UkiSection of a section with no raw data is empty, wherever its offset points", "[efi]") {
  // Found by fuzz/efi_image_fuzz: ParsePe leaves the offset of a section without raw data
  // unchecked, and reading it threw out of `sprout inspect`.
  auto uki = BuildUki(MakeTestPe(), TestParts());
  REQUIRE(uki);
  auto pe = ParsePe(*uki, "the UKI");
  REQUIRE(pe);
  std::size_t header = pe->section_table_offset;
  for (const auto& sec : pe->sections) {
    if (sec.name == ".initrd") break;
    header += 40;
  }
  PutLe32(*uki, header + 16, 0);           // SizeOfRawData
  PutLe32(*uki, header + 20, 0x7fffffff);  // PointerToRawData, far past the file's end
  auto initrd = UkiSection(*uki, ".initrd");
  REQUIRE(initrd);
  CHECK(initrd->empty());
}

TEST_CASE("BuildUki turns systemd-boot-efi's x86-64 stub into a UKI", "[efi]") {
  const std::filesystem::path path = "/usr/lib/systemd/boot/efi/linuxx64.efi.stub";
  if (!std::filesystem::exists(path)) {
    // Catch2 2.x has no SKIP: say why, and pass (ctest runs with --warn NoAssertions).
    WARN("skipped: no " + path.string() + " on this machine; install Debian's systemd-boot-efi to run this test");
    SUCCEED();
    return;
  }
  auto stub = ReadFile(path);
  REQUIRE(stub);
  auto pe = ParsePe(*stub, path.string());
  REQUIRE(pe);
  CHECK(pe->machine == 0x8664);
  CHECK(pe->cert_table_size == 0);
  CHECK(FindSection(*pe, ".sdmagic") != nullptr);
  // The linker's CheckSum agrees with ours, when it wrote one.
  if (Le32(*stub, pe->checksum_offset) != 0)
    CHECK(Le32(*stub, pe->checksum_offset) == PeChecksum(*stub, pe->checksum_offset));
  // A fake kernel: itself a small PE image, as an EFI-stub bzImage is.
  UkiParts parts{"ID=debian\nVERSION_ID=12\n", "root=PARTLABEL=root-a ro console=ttyS0",
                 MakeTestPe() + Pattern(70000, 4), Pattern(100000, 5)};
  auto uki = BuildUki(*stub, parts);
  REQUIRE(uki);
  CheckUki(*stub, *uki, parts);
  auto kernel = ParsePe(UkiSection(*uki, ".linux").value(), ".linux");
  REQUIRE(kernel);
  CHECK(kernel->sections.size() == 2);
  auto again = BuildUki(*stub, parts);
  REQUIRE(again);
  CHECK(*again == *uki);
}

TEST_CASE("systemd-boot-efi's stubs have room for all six sections, the PCR policy's included", "[efi]") {
  // Bookworm's x86-64 stub (252) has 8 sections, its table ends at 0x2c8 and its headers
  // at 0x400: room for 7 more.
  int found = 0;
  for (const char* name : {"linuxx64.efi.stub", "linuxaa64.efi.stub"}) {
    const std::filesystem::path path = std::filesystem::path("/usr/lib/systemd/boot/efi") / name;
    if (!std::filesystem::exists(path)) {
      WARN("skipped: no " + path.string() + " on this machine (Debian's systemd-boot-efi for its architecture)");
      continue;
    }
    ++found;
    INFO(path.string());
    auto stub = ReadFile(path);
    REQUIRE(stub);
    UkiParts parts{"ID=debian\n",
                   "console=ttyS0",
                   MakeTestPe() + Pattern(9000, 6),
                   Pattern(7000, 7),
                   "-----BEGIN PUBLIC KEY-----\n",
                   R"({"sha256":[]})"};
    auto uki = BuildUki(*stub, parts);
    REQUIRE(uki);
    CheckUki(*stub, *uki, parts);
  }
  if (found == 0) SUCCEED();
}
