// File-system images made in user space: the FAT ESP (mkfs.fat + mtools), the ext4
// state partition (mke2fs) and initrd extensions (cpio "newc").
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "image/rootfs.h"
#include "util/result.h"

namespace sprout {

// EspFile is a file to place on the ESP, at a path like "EFI/BOOT/BOOTX64.EFI".
struct EspFile {
  std::string path;
  std::string data;
};

// MakeFatImage creates a FAT32 image of size bytes at out holding files. The volume ID
// is given and every time stamp is mtime, so equal inputs give equal bytes.
Status MakeFatImage(const std::filesystem::path& out, std::uint64_t size, std::uint32_t volume_id,
                    const std::string& label, const std::vector<EspFile>& files, std::int64_t mtime,
                    const std::filesystem::path& workdir);

// MakeExt4Image creates an empty ext4 file system of size bytes at out with a fixed
// UUID, hash seed and time stamps.
Status MakeExt4Image(const std::filesystem::path& out, std::uint64_t size, const std::string& uuid,
                     const std::string& label, std::int64_t mtime);

// MakeCpio renders entries as an uncompressed "newc" cpio archive, the format the
// kernel unpacks into the initramfs; appended to an initrd it adds or replaces files.
Result<std::string> MakeCpio(const std::vector<RootEntry>& entries, std::int64_t mtime);

}  // namespace sprout

namespace sprout {

// MakeVerityHash writes the dm-verity hash tree of data to hash_out (veritysetup,
// 4 KiB blocks, SHA-256) with a fixed salt and superblock UUID, and returns the root
// hash in hex.
Result<std::string> MakeVerityHash(const std::filesystem::path& data, const std::filesystem::path& hash_out,
                                   const std::string& salt_hex, const std::string& uuid);

}  // namespace sprout
