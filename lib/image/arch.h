// What an image's CPU architecture decides: partition types, boot loader, serial
// console, the ELF machine of its programs, and whether this host can run the base
// recipe's package scripts for it (qemu-user through binfmt_misc). Pure, but for
// ReadBinfmt and RegisterBinfmt, which touch /proc.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profile/profile.h"
#include "util/result.h"

namespace sprout {

// ArchTraits are the per-architecture names and numbers an image build needs.
struct ArchTraits {
  std::string_view root_type;         // DPS root partition type
  std::string_view root_verity_type;  // DPS root verity partition type
  const char* efi_boot_path;          // the removable-media boot loader path on the ESP
  const char* systemd_boot;           // systemd-boot's file name in systemd-boot-efi
  const char* efi_stub;               // systemd's EFI stub for unified kernel images, same package
  const char* kernel_package;         // Debian's kernel meta-package
  const char* serial_console;         // the console= value of the first serial port
  std::uint16_t elf_machine;          // e_machine of its ELF programs
  const char* qemu_binfmt;            // the binfmt_misc entry qemu-user-static registers for it
  const char* gnu_name;               // "x86_64", "aarch64"
};

// TraitsOf is the table row of an architecture.
const ArchTraits& TraitsOf(Arch arch);

// HostArch is the architecture this sprout runs on.
Arch HostArch();

// ElfArch reads the architecture of an ELF program from its first bytes; nullopt when
// they are not a 64-bit little-endian ELF header of a known machine.
std::optional<Arch> ElfArch(std::string_view head);

// ElfArchOfFile is ElfArch of a program's first bytes; nullopt when it cannot be read.
std::optional<Arch> ElfArchOfFile(const std::filesystem::path& program);

// PartitionTypeName names a partition type GUID of an image ("root arm64", "esp"); ""
// for a type sprout does not use.
std::string PartitionTypeName(std::string_view type);

// CheckFormats fails, naming the formats and the fix, when arch cannot have one of
// them: arm64 images are raw and qcow2 only (docs/arm64.md says why).
Status CheckFormats(Arch arch, const std::vector<Format>& formats);

// ImageArchOf says which architecture a disk's partition types are for: the
// architecture of its first DPS root partition; nullopt when it has none sprout knows.
std::optional<Arch> ImageArchOf(const std::vector<std::string_view>& partition_types);

// BinfmtState is what the host says about running programs of a foreign architecture.
struct BinfmtState {
  bool mounted = false;     // /proc/sys/fs/binfmt_misc holds its status file
  std::string entry;        // the registered entry's text (/proc/sys/fs/binfmt_misc/NAME); "" if none
  bool rule_file = false;   // the rule qemu-user-static ships (/usr/lib/binfmt.d/NAME.conf) exists
  bool privileged = false;  // we run as root, so we may register the rule ourselves
  bool arch_test = false;   // arch-test is installed (mmdebstrap needs it for a foreign arch)
};

// kBinfmtDir and kBinfmtRules are where the kernel and qemu-user-static keep them.
inline constexpr const char* kBinfmtDir = "/proc/sys/fs/binfmt_misc";
inline constexpr const char* kBinfmtRules = "/usr/lib/binfmt.d";

// BinfmtVerdict is what a base build for a foreign architecture must do first.
enum class BinfmtVerdict { kReady, kRegister, kMissing };

// BinfmtCheck decides from the host's state: ready, register the packaged rule (only
// when privileged), or missing, with problem naming what to install, mount or run.
struct BinfmtCheck {
  BinfmtVerdict verdict = BinfmtVerdict::kReady;
  std::string problem;  // for kMissing
};
BinfmtCheck CheckBinfmt(Arch target, Arch host, const BinfmtState& state);

// ReadBinfmt reads the host's binfmt_misc state for arch's qemu-user entry.
BinfmtState ReadBinfmt(Arch arch);

// RegisterBinfmt writes qemu-user-static's packaged rule for arch into binfmt_misc's
// register file (root only).
Status RegisterBinfmt(Arch arch);

}  // namespace sprout
