// The boot files of an image: the kernel, initrd and systemd-boot a build takes from
// its base, the initrd with sprout's stages appended, and the ESP every medium carries.
// Pure functions over plain structs; the build writes the files.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "image/fsimages.h"
#include "profile/profile.h"
#include "util/result.h"

namespace sprout {

// BootFiles are the contents of the files that boot an image.
struct BootFiles {
  std::string kernel_version;  // "6.1.0-18-amd64", from the kernel's file name
  std::string kernel, initrd, bootloader;
  Arch arch = Arch::kAmd64;  // the architecture the boot loader is for
  // For a Secure Boot build (docs/secure-boot.md): systemd's EFI stub and the root's
  // os-release, "" when the base has none; and the signed unified kernel image the ESP
  // carries in place of the kernel and initrd ("" without Secure Boot), with bootloader
  // then signed too.
  std::string stub, os_release, uki;
};

// kUkiPath is where a Secure Boot medium's ESP holds its signed unified kernel image.
inline constexpr const char* kUkiPath = "sprout/sprout.efi";

// CapturedPaths are the root paths whose contents a build keeps while it packs the
// root: the boot files of arch, and dpkg's status for the SBOM. A path matches by prefix.
std::vector<std::string> CapturedPaths(Arch arch);

// kDpkgStatusPath is dpkg's status file in the root, the SBOM's source.
inline constexpr const char* kDpkgStatusPath = "var/lib/dpkg/status";

// FindBootFiles picks the newest kernel and initrd (by version-sorted name) and arch's
// systemd-boot from the captured files, or says which packages the base lacks.
Result<BootFiles> FindBootFiles(const std::map<std::string, std::string>& captured, Arch arch);

// KernelNeedsGunzip says whether a kernel must be decompressed before it goes on the
// ESP: Debian's arm64 kernel is a gzip-compressed Image, which UEFI (and systemd-boot,
// which hands it to the firmware) cannot start; its uncompressed Image is an EFI
// program. amd64's bzImage is one already.
bool KernelNeedsGunzip(Arch arch, std::string_view kernel);

// AppendToInitrd appends an uncompressed cpio archive to an initrd. The kernel looks
// for a following archive only at 4-byte-aligned offsets after a compressed one,
// skipping zeros, so the initrd is padded first.
std::string AppendToInitrd(std::string initrd, const std::string& cpio);

// EspFiles lists the ESP of a medium: systemd-boot for boot.arch (also as the
// removable-media default, BOOTX64.EFI or BOOTAA64.EFI), the loader configuration and
// entry, the kernel and the initrd (or, when boot.uki is set, the unified kernel image at
// kUkiPath in their place), and the image metadata that `sprout inspect` reads.
std::vector<EspFile> EspFiles(const BootFiles& boot, const std::string& loader_conf, const std::string& loader_entry,
                              const std::string& metadata);

// EspSlack is the room a FAT ESP needs beyond its files' bytes.
inline constexpr std::uint64_t kEspSlack = 8u << 20;

// CheckEspSize fails, with the fix, when files do not fit an ESP of esp_size bytes;
// profile_file names the profile that sets disk.espSize.
Status CheckEspSize(const std::vector<EspFile>& files, std::uint64_t esp_size, const std::string& profile_file);

// LiveEspSize sizes a live medium's ESP to its files: 4 MiB of room, whole MiB, at
// least 40 MiB.
std::uint64_t LiveEspSize(const std::vector<EspFile>& files);

}  // namespace sprout
