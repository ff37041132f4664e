#include "image/boot_files.h"

#include <algorithm>

#include "image/arch.h"
#include "image/media.h"
#include "image/plan.h"
#include "util/text.h"

namespace sprout {

namespace {

const char* const kKernelPrefix = "boot/vmlinuz-";
const char* const kInitrdPrefix = "boot/initrd.img-";
const char* const kBootloaderDir = "usr/lib/systemd/boot/efi/";
const char* const kOsReleasePath = "usr/lib/os-release";

std::string BootloaderPath(Arch arch) { return std::string(kBootloaderDir) + TraitsOf(arch).systemd_boot; }
std::string StubPath(Arch arch) { return std::string(kBootloaderDir) + TraitsOf(arch).efi_stub; }

// Newest returns the captured file with the highest version-sorted name under prefix.
const std::pair<const std::string, std::string>* Newest(const std::map<std::string, std::string>& files,
                                                        const std::string& prefix) {
  const std::pair<const std::string, std::string>* best = nullptr;
  for (const auto& kv : files) {
    if (kv.first.starts_with(prefix) && (!best || kv.first > best->first)) best = &kv;
  }
  return best;
}

std::uint64_t Bytes(const std::vector<EspFile>& files) {
  std::uint64_t n = 0;
  for (const auto& f : files) n += f.data.size();
  return n;
}

}  // namespace

std::vector<std::string> CapturedPaths(Arch arch) {
  return {kKernelPrefix, kInitrdPrefix, BootloaderPath(arch), StubPath(arch), kOsReleasePath, kDpkgStatusPath};
}

Result<BootFiles> FindBootFiles(const std::map<std::string, std::string>& captured, Arch arch) {
  const ArchTraits& t = TraitsOf(arch);
  auto kernel = Newest(captured, kKernelPrefix);
  auto initrd = Newest(captured, kInitrdPrefix);
  auto bootloader = captured.find(BootloaderPath(arch));
  if (!kernel || !initrd || bootloader == captured.end()) {
    return Fail(std::string("the ") + ArchName(arch) +
                " base lacks a kernel, an initrd or systemd-boot (/boot/vmlinuz-*, /boot/initrd.img-*, " +
                t.systemd_boot + "); add " + t.kernel_package +
                ", initramfs-tools and systemd-boot-efi to its packages (is the base built for " + ArchName(arch) +
                "?)");
  }
  BootFiles files{kernel->first.substr(std::string(kKernelPrefix).size()), kernel->second, initrd->second,
                  bootloader->second, arch};
  if (auto stub = captured.find(StubPath(arch)); stub != captured.end()) files.stub = stub->second;
  if (auto osrel = captured.find(kOsReleasePath); osrel != captured.end()) files.os_release = osrel->second;
  return files;
}

bool KernelNeedsGunzip(Arch arch, std::string_view kernel) {
  return arch == Arch::kArm64 && kernel.size() >= 2 && static_cast<unsigned char>(kernel[0]) == 0x1f &&
         static_cast<unsigned char>(kernel[1]) == 0x8b;
}

std::string AppendToInitrd(std::string initrd, const std::string& cpio) {
  initrd.append(CpioPadding(initrd.size()), '\0');
  initrd += cpio;
  return initrd;
}

std::vector<EspFile> EspFiles(const BootFiles& boot, const std::string& loader_conf, const std::string& loader_entry,
                              const std::string& metadata) {
  const ArchTraits& t = TraitsOf(boot.arch);
  std::vector<EspFile> files{{t.efi_boot_path, boot.bootloader},
                             {std::string("EFI/systemd/") + t.systemd_boot, boot.bootloader},
                             {"loader/loader.conf", loader_conf},
                             {std::string("loader/entries/") + kFirstEntryName, loader_entry}};
  if (boot.uki.empty()) {
    files.push_back({"sprout/vmlinuz", boot.kernel});
    files.push_back({"sprout/initrd.img", boot.initrd});
  } else {
    files.push_back({kUkiPath, boot.uki});
  }
  files.push_back({kImageMetadataPath, metadata});
  return files;
}

Status CheckEspSize(const std::vector<EspFile>& files, std::uint64_t esp_size, const std::string& profile_file) {
  std::uint64_t need = Bytes(files) + kEspSlack;
  if (need > esp_size) {
    return Fail("the ESP needs " + HumanSize(need) + " but disk.espSize is " + HumanSize(esp_size) +
                "; raise disk.espSize in " + profile_file);
  }
  return Ok{};
}

std::uint64_t LiveEspSize(const std::vector<EspFile>& files) {
  constexpr std::uint64_t kMiB = 1 << 20;
  return std::max<std::uint64_t>(40 * kMiB, (Bytes(files) + 4 * kMiB + kMiB - 1) / kMiB * kMiB);
}

}  // namespace sprout
