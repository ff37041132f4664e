// Pure decisions about the live media (hybrid ISO and PXE bundle) and about a build's
// output directory: live kernel command lines, the iPXE script, ISO identifiers, the
// image metadata that `sprout inspect` reads, cpio "newc" headers for streaming large
// files into an initrd, and sha256sums parsing for `sprout verify`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace sprout {

// Where a live medium's root comes from, as the initrd reads it from sprout.live=.
inline constexpr const char* kLiveIso = "iso";        // a mounted ISO 9660 file system
inline constexpr const char* kLiveInitrd = "initrd";  // files inside the initramfs (PXE)

// Paths of the root, its verity hash tree and its root hash on a live medium (ISO tree
// or initramfs); the initrd stage uses the same names.
inline constexpr const char* kLiveRootPath = "sprout/root.squashfs";
inline constexpr const char* kLiveVerityPath = "sprout/root.verity";
inline constexpr const char* kLiveRootHashPath = "sprout/roothash";
// The image metadata file, on the ESP of every medium and in the ISO tree.
inline constexpr const char* kImageMetadataPath = "sprout/image.json";

// LiveCmdline turns the disk's kernel command line into a live medium's: the partition
// references (verity data/hash, state, config) and the state's encryption words are
// dropped, sprout.live=MEDIUM is added, and fstab=no keeps systemd from waiting for the
// state partition the medium lacks.
std::vector<std::string> LiveCmdline(const std::vector<std::string>& disk_cmdline, std::string_view medium);

// LoaderEntry renders a systemd-boot entry for the kernel and initrd on the ESP.
std::string LoaderEntry(const std::string& title, const std::vector<std::string>& cmdline);

// UkiLoaderEntry renders a systemd-boot entry that starts the unified kernel image at
// uki_path on the ESP. Its options line repeats the image's embedded command line: under
// Secure Boot the stub ignores it (only the signed .cmdline counts), and without Secure
// Boot it replaces the embedded one with the same words; the A/B update code reads the
// root hash from it as from every entry.
std::string UkiLoaderEntry(const std::string& title, const std::string& uki_path,
                           const std::vector<std::string>& cmdline);

// IsoVolumeId is the ISO 9660 volume ID: "SPROUT_" and 16 hex digits of the seed, upper case.
std::string IsoVolumeId(const std::string& seed);

// IpxeScript renders boot.ipxe; kernel and initrd names are relative to the script's URL.
std::string IpxeScript(const std::string& title, const std::string& kernel, const std::string& initrd,
                       const std::vector<std::string>& cmdline);

// CpioNewcHeader renders one "newc" header with its name and padding; file data of
// size bytes follows, then CpioPadding(size) zero bytes.
std::string CpioNewcHeader(const std::string& name, std::uint32_t mode, std::uint64_t size, std::uint32_t ino,
                           std::int64_t mtime);
std::size_t CpioPadding(std::uint64_t size);
// CpioTrailer is the "TRAILER!!!" entry that ends a cpio archive.
std::string CpioTrailer();

// SumLine is one "HEX  NAME" line of a sha256sums file.
struct SumLine {
  std::string sha256;
  std::string file;
};

// ParseSha256Sums reads a sha256sums file; names must be relative, without "..".
Result<std::vector<SumLine>> ParseSha256Sums(std::string_view text);

// IsWorkDirName tells whether a directory entry of an output directory is a build's
// work directory (.sprout-build-XXXXXX).
bool IsWorkDirName(std::string_view name);

}  // namespace sprout
