// The live media made from a build's root: the hybrid ISO and the PXE bundle. Both carry
// the raw disk's squashfs root and verity tree unchanged, and boot its kernel and initrd
// with a live command line (docs/media.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "builder/boot_signing.h"
#include "image/boot_files.h"
#include "image/plan.h"
#include "profile/profile.h"
#include "util/result.h"

namespace sprout::cli {

// MediaInputs is what every live medium is made of: the one root and its hash tree,
// and the boot files the raw disk's ESP holds.
struct MediaInputs {
  const Profile* profile = nullptr;
  const DiskPlan* plan = nullptr;
  std::string seed;
  std::filesystem::path work;  // the build's work directory; outputs are written here
  std::filesystem::path root_img, verity_img;
  const BootFiles* boot = nullptr;  // kernel, initrd (with sprout's stages), systemd-boot
  std::string metadata;             // sprout/image.json
  std::int64_t epoch = 0;
  const SecureBootKeys* secure_boot = nullptr;  // signs the live ESP's boot files when on
};

// MakeIso writes NAME.iso into the work directory and returns its file name.
Result<std::string> MakeIso(const MediaInputs& in);

// MakePxe writes pxe/{vmlinuz,initrd.img,boot.ipxe} into the work directory and
// returns their names relative to it.
Result<std::vector<std::string>> MakePxe(const MediaInputs& in);

}  // namespace sprout::cli
