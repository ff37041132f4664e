#include "image/arch.h"

#include <catch2/catch.hpp>

#include "image/guid.h"

using namespace sprout;

TEST_CASE("TraitsOf names arm64's boot loader, console, kernel and DPS types", "[arch]") {
  const ArchTraits& a = TraitsOf(Arch::kArm64);
  CHECK(std::string(a.efi_boot_path) == "EFI/BOOT/BOOTAA64.EFI");
  CHECK(std::string(a.systemd_boot) == "systemd-bootaa64.efi");
  CHECK(std::string(a.kernel_package) == "linux-image-arm64");
  CHECK(std::string(a.serial_console) == "ttyAMA0,115200");
  CHECK(a.root_type == "b921b045-1df0-41c3-af44-4c6f280d3fae");
  CHECK(a.root_verity_type == "df3300ce-d69f-4c92-978c-9bfb0f38d820");
  const ArchTraits& x = TraitsOf(Arch::kAmd64);
  CHECK(std::string(x.efi_boot_path) == "EFI/BOOT/BOOTX64.EFI");
  CHECK(x.root_type == dps::kRootX86_64);
}

TEST_CASE("ElfArch reads e_machine of 64-bit little-endian ELF programs", "[arch]") {
  std::string elf(
      "\x7f"
      "ELF\x02\x01\x01",
      7);
  elf.resize(20, '\0');
  elf[18] = static_cast<char>(183);  // EM_AARCH64
  CHECK(ElfArch(elf) == Arch::kArm64);
  elf[18] = 62;  // EM_X86_64
  CHECK(ElfArch(elf) == Arch::kAmd64);
  elf[18] = 40;  // EM_ARM: not one of ours
  CHECK_FALSE(ElfArch(elf).has_value());
  CHECK_FALSE(ElfArch("#!/bin/sh\necho not elf\n").has_value());
  CHECK_FALSE(ElfArch(elf.substr(0, 10)).has_value());
}

TEST_CASE("PartitionTypeName names sprout's partition types for inspect", "[arch]") {
  CHECK(PartitionTypeName("B921B045-1DF0-41C3-AF44-4C6F280D3FAE") == "root arm64");
  CHECK(PartitionTypeName("df3300ce-d69f-4c92-978c-9bfb0f38d820") == "root-verity arm64");
  CHECK(PartitionTypeName(dps::kRootX86_64) == "root amd64");
  CHECK(PartitionTypeName(dps::kEsp) == "esp");
  CHECK(PartitionTypeName("00000000-0000-0000-0000-000000000001").empty());
}

TEST_CASE("CheckBinfmt: a native build needs nothing", "[arch]") {
  CHECK(CheckBinfmt(Arch::kAmd64, Arch::kAmd64, {}).verdict == BinfmtVerdict::kReady);
}

TEST_CASE("CheckBinfmt names what an arm64 base build on x86-64 lacks, in order", "[arch]") {
  BinfmtState s;
  auto c = CheckBinfmt(Arch::kArm64, Arch::kAmd64, s);
  CHECK(c.verdict == BinfmtVerdict::kMissing);
  CHECK(c.problem.find("binfmt_misc is not mounted; mount it as root: `mount -t binfmt_misc binfmt_misc "
                       "/proc/sys/fs/binfmt_misc`") != std::string::npos);
  s.mounted = true;
  c = CheckBinfmt(Arch::kArm64, Arch::kAmd64, s);
  CHECK(c.problem.find("arch-test is not installed") != std::string::npos);
  CHECK(c.problem.find("apt-get install arch-test qemu-user-static") != std::string::npos);
  s.arch_test = true;
  c = CheckBinfmt(Arch::kArm64, Arch::kAmd64, s);
  CHECK(c.problem.find("qemu-user-static is not installed; install it: `apt-get install qemu-user-static`") !=
        std::string::npos);
  s.rule_file = true;
  c = CheckBinfmt(Arch::kArm64, Arch::kAmd64, s);
  CHECK(c.verdict == BinfmtVerdict::kMissing);  // not root: says how to register
  CHECK(c.problem.find("cat /usr/lib/binfmt.d/qemu-aarch64.conf > /proc/sys/fs/binfmt_misc/register") !=
        std::string::npos);
  s.privileged = true;
  CHECK(CheckBinfmt(Arch::kArm64, Arch::kAmd64, s).verdict == BinfmtVerdict::kRegister);
  s.entry = "disabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\n";
  c = CheckBinfmt(Arch::kArm64, Arch::kAmd64, s);
  CHECK(c.problem.find("echo 1 > /proc/sys/fs/binfmt_misc/qemu-aarch64") != std::string::npos);
  s.entry = "enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\n";
  CHECK(CheckBinfmt(Arch::kArm64, Arch::kAmd64, s).verdict == BinfmtVerdict::kReady);
  s.mounted = false;  // an entry cannot be read without the mount; the mount is named first
  CHECK(CheckBinfmt(Arch::kArm64, Arch::kAmd64, s).verdict == BinfmtVerdict::kMissing);
}

TEST_CASE("ImageArchOf takes the architecture of the first root partition type", "[arch]") {
  CHECK(ImageArchOf({dps::kEsp, dps::kRootArm64, dps::kRootVerityArm64}) == Arch::kArm64);
  CHECK(ImageArchOf({dps::kEsp, dps::kRootX86_64}) == Arch::kAmd64);
  CHECK_FALSE(ImageArchOf({dps::kEsp, dps::kVar}).has_value());
}

TEST_CASE("CheckFormats lets arm64 make raw and qcow2 only, and names the fix", "[arch]") {
  CHECK(CheckFormats(Arch::kArm64, {Format::kRaw, Format::kQcow2}));
  CHECK(CheckFormats(Arch::kAmd64, {Format::kRaw, Format::kIso, Format::kPxe}));
  auto s = CheckFormats(Arch::kArm64, {Format::kRaw, Format::kIso, Format::kPxe});
  REQUIRE(!s);
  CHECK(s.error() ==
        "an arm64 image cannot be made as iso, pxe yet (neither is boot-tested on arm64; docs/arm64.md); ask for raw "
        "or qcow2, such as --format raw,qcow2");
}

TEST_CASE("ElfArchOfFile reads a program's architecture from its file", "[arch]") {
  CHECK(ElfArchOfFile("/proc/self/exe") == HostArch());
  CHECK_FALSE(ElfArchOfFile("/nonexistent/program").has_value());
}
