#include "image/boot_files.h"

#include <catch2/catch.hpp>

using namespace sprout;

TEST_CASE("FindBootFiles takes the newest kernel and initrd and systemd-boot", "[boot]") {
  std::map<std::string, std::string> captured{{"boot/vmlinuz-6.1.0-17-amd64", "old kernel"},
                                              {"boot/vmlinuz-6.1.0-18-amd64", "kernel"},
                                              {"boot/initrd.img-6.1.0-17-amd64", "old initrd"},
                                              {"boot/initrd.img-6.1.0-18-amd64", "initrd"},
                                              {"usr/lib/systemd/boot/efi/systemd-bootx64.efi", "boot"},
                                              {"usr/lib/systemd/boot/efi/linuxx64.efi.stub", "stub"},
                                              {"usr/lib/os-release", "PRETTY_NAME=x"},
                                              {"var/lib/dpkg/status", "Package: bash\n"}};
  auto boot = FindBootFiles(captured, Arch::kAmd64);
  REQUIRE(boot);
  CHECK(boot->kernel_version == "6.1.0-18-amd64");
  CHECK(boot->kernel == "kernel");
  CHECK(boot->initrd == "initrd");
  CHECK(boot->bootloader == "boot");
  CHECK(boot->stub == "stub");
  CHECK(boot->os_release == "PRETTY_NAME=x");
  CHECK(boot->uki.empty());
  // Every path FindBootFiles reads, and dpkg's status for the SBOM, is captured.
  for (const auto& [path, data] : captured) {
    bool kept = false;
    for (const auto& prefix : CapturedPaths(Arch::kAmd64)) kept = kept || path.starts_with(prefix);
    CHECK(kept);
  }
}

TEST_CASE("a base without systemd-boot names the packages to add", "[boot]") {
  auto boot = FindBootFiles({{"boot/vmlinuz-6.1", "k"}, {"boot/initrd.img-6.1", "i"}}, Arch::kAmd64);
  REQUIRE(!boot);
  CHECK(boot.error().find("add linux-image-amd64, initramfs-tools and systemd-boot-efi") != std::string::npos);
}

TEST_CASE("AppendToInitrd pads the initrd to 4 bytes before the cpio", "[boot]") {
  CHECK(AppendToInitrd("12345", "CPIO") == std::string("12345\0\0\0CPIO", 12));
  CHECK(AppendToInitrd("1234", "CPIO") == "1234CPIO");
}

TEST_CASE("EspFiles lays out systemd-boot, the entry, kernel, initrd and metadata", "[boot]") {
  BootFiles boot{"6.1", "K", "I", "B"};
  auto files = EspFiles(boot, "conf", "entry", "{}");
  std::vector<std::string> paths;
  for (const auto& f : files) paths.push_back(f.path + "=" + f.data);
  CHECK(paths == std::vector<std::string>{"EFI/BOOT/BOOTX64.EFI=B", "EFI/systemd/systemd-bootx64.efi=B",
                                          "loader/loader.conf=conf", "loader/entries/sprout-1-a.conf=entry",
                                          "sprout/vmlinuz=K", "sprout/initrd.img=I", "sprout/image.json={}"});
}

TEST_CASE("a Secure Boot ESP holds the unified kernel image in place of the kernel and initrd", "[boot]") {
  BootFiles boot{"6.1", "K", "I", "SIGNED-B"};
  boot.uki = "UKI";
  auto files = EspFiles(boot, "conf", "entry", "{}");
  std::vector<std::string> paths;
  for (const auto& f : files) paths.push_back(f.path + "=" + f.data);
  CHECK(paths == std::vector<std::string>{"EFI/BOOT/BOOTX64.EFI=SIGNED-B", "EFI/systemd/systemd-bootx64.efi=SIGNED-B",
                                          "loader/loader.conf=conf", "loader/entries/sprout-1-a.conf=entry",
                                          "sprout/sprout.efi=UKI", "sprout/image.json={}"});
}

TEST_CASE("a base without the EFI stub still boots without Secure Boot", "[boot]") {
  auto boot = FindBootFiles(
      {{"boot/vmlinuz-6.1", "k"}, {"boot/initrd.img-6.1", "i"}, {"usr/lib/systemd/boot/efi/systemd-bootx64.efi", "b"}},
      Arch::kAmd64);
  REQUIRE(boot);
  CHECK(boot->stub.empty());
  CHECK(boot->os_release.empty());
}

TEST_CASE("CheckEspSize wants 8 MiB beyond the files and names the fix", "[boot]") {
  std::vector<EspFile> files{{"a", std::string(1 << 20, 'x')}};
  CHECK(CheckEspSize(files, 9u << 20, "p.yaml"));
  auto small = CheckEspSize(files, (9u << 20) - 1, "p.yaml");
  REQUIRE(!small);
  CHECK(small.error().find("raise disk.espSize in p.yaml") != std::string::npos);
}

TEST_CASE("LiveEspSize is whole MiB with 4 MiB of room, at least 40 MiB", "[boot]") {
  CHECK(LiveEspSize({{"a", "x"}}) == 40u << 20);
  CHECK(LiveEspSize({{"a", std::string(50u << 20, 'x')}}) == 54u << 20);
  CHECK(LiveEspSize({{"a", std::string((50u << 20) + 1, 'x')}}) == 55u << 20);
}

TEST_CASE("an arm64 build takes systemd-bootaa64.efi and boots it as BOOTAA64.EFI", "[boot][arch]") {
  std::map<std::string, std::string> captured{{"boot/vmlinuz-6.1.0-18-arm64", "kernel"},
                                              {"boot/initrd.img-6.1.0-18-arm64", "initrd"},
                                              {"usr/lib/systemd/boot/efi/systemd-bootaa64.efi", "aa64"},
                                              {"usr/lib/systemd/boot/efi/systemd-bootx64.efi", "x64"}};
  auto boot = FindBootFiles(captured, Arch::kArm64);
  REQUIRE(boot);
  CHECK(boot->bootloader == "aa64");
  CHECK(boot->kernel_version == "6.1.0-18-arm64");
  CHECK(boot->arch == Arch::kArm64);
  auto files = EspFiles(*boot, "conf", "entry", "{}");
  REQUIRE(files.size() >= 2);
  CHECK(files[0].path == "EFI/BOOT/BOOTAA64.EFI");
  CHECK(files[0].data == "aa64");
  CHECK(files[1].path == "EFI/systemd/systemd-bootaa64.efi");
  bool captures_aa64 = false;
  for (const auto& prefix : CapturedPaths(Arch::kArm64)) captures_aa64 |= prefix.ends_with("systemd-bootaa64.efi");
  CHECK(captures_aa64);
}

TEST_CASE("an amd64 base built into an arm64 image is named, with the package to add", "[boot][arch]") {
  auto boot = FindBootFiles({{"boot/vmlinuz-6.1.0-18-amd64", "k"},
                             {"boot/initrd.img-6.1.0-18-amd64", "i"},
                             {"usr/lib/systemd/boot/efi/systemd-bootx64.efi", "x64"}},
                            Arch::kArm64);
  REQUIRE(!boot);
  CHECK(boot.error().find("the arm64 base lacks") != std::string::npos);
  CHECK(boot.error().find("systemd-bootaa64.efi") != std::string::npos);
  CHECK(boot.error().find("add linux-image-arm64") != std::string::npos);
}

TEST_CASE("an arm64 kernel that is gzip-compressed is decompressed for the ESP; amd64's never", "[boot][arch]") {
  const std::string gz("\x1f\x8b\x08\x00", 4);
  CHECK(KernelNeedsGunzip(Arch::kArm64, gz));
  CHECK_FALSE(KernelNeedsGunzip(Arch::kArm64, "MZ\x40\xfa"));  // an EFI-stub Image already
  CHECK_FALSE(KernelNeedsGunzip(Arch::kAmd64, gz));
  CHECK_FALSE(KernelNeedsGunzip(Arch::kArm64, ""));
}
