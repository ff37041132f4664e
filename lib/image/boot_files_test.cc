#include "image/boot_files.h"

#include <catch2/catch.hpp>

using namespace sprout;

TEST_CASE("FindBootFiles takes the newest kernel and initrd and systemd-boot", "[boot]") {
  std::map<std::string, std::string> captured{{"boot/vmlinuz-6.1.0-17-amd64", "old kernel"},
                                              {"boot/vmlinuz-6.1.0-18-amd64", "kernel"},
                                              {"boot/initrd.img-6.1.0-17-amd64", "old initrd"},
                                              {"boot/initrd.img-6.1.0-18-amd64", "initrd"},
                                              {"usr/lib/systemd/boot/efi/systemd-bootx64.efi", "boot"},
                                              {"var/lib/dpkg/status", "Package: bash\n"}};
  auto boot = FindBootFiles(captured);
  REQUIRE(boot);
  CHECK(boot->kernel_version == "6.1.0-18-amd64");
  CHECK(boot->kernel == "kernel");
  CHECK(boot->initrd == "initrd");
  CHECK(boot->bootloader == "boot");
  // Every path FindBootFiles reads, and dpkg's status for the SBOM, is captured.
  for (const auto& [path, data] : captured) {
    bool kept = false;
    for (const auto& prefix : CapturedPaths()) kept = kept || path.starts_with(prefix);
    CHECK(kept);
  }
}

TEST_CASE("a base without systemd-boot names the packages to add", "[boot]") {
  auto boot = FindBootFiles({{"boot/vmlinuz-6.1", "k"}, {"boot/initrd.img-6.1", "i"}});
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
