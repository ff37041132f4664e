// The hybrid ISO and the PXE bundle, made from the build's root and boot files.
#include "builder/live_media.h"

#include <chrono>
#include <fstream>

#include "image/fsimages.h"
#include "image/media.h"
#include "util/fs.h"
#include "util/process.h"

namespace sprout::cli {

namespace {

namespace fs = std::filesystem;

Status SetMtime(const fs::path& path, std::int64_t mtime) {
  std::error_code ec;
  fs::last_write_time(path, fs::file_time_type::clock::from_sys(std::chrono::sys_seconds(std::chrono::seconds(mtime))),
                      ec);
  if (ec) return Fail("cannot set the time of " + path.string() + ": " + ec.message());
  return Ok{};
}

// LiveEsp lists the ESP files of a live medium: the disk's boot files with a live entry,
// or for Secure Boot the signed boot loader and a signed UKI of the live command line.
Result<std::vector<EspFile>> LiveEsp(const MediaInputs& in, std::string_view medium) {
  const std::string title = "sprout " + in.profile->name + " (live)";
  const auto cmdline = LiveCmdline(in.plan->cmdline, medium);
  if (in.secure_boot && in.secure_boot->on()) {
    auto signed_boot = SignedBoot(*in.boot, *in.secure_boot, cmdline, "the live unified kernel image");
    if (!signed_boot) return Fail(signed_boot.error());
    return EspFiles(*signed_boot, in.plan->loader_conf, UkiLoaderEntry(title, kUkiPath, cmdline), in.metadata);
  }
  return EspFiles(*in.boot, in.plan->loader_conf, LoaderEntry(title, cmdline), in.metadata);
}

// CopyInto appends the file at from to out, failing with both names.
Status CopyInto(std::ofstream& out, const fs::path& from, const fs::path& to) {
  std::ifstream in(from, std::ios::binary);
  if (!in) return Fail("cannot read " + from.string());
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    out.write(buf.data(), in.gcount());
  }
  if (!out) return Fail("cannot write " + to.string());
  return Ok{};
}

}  // namespace

Result<std::string> MakeIso(const MediaInputs& in) {
  const fs::path stage = in.work / "iso";
  std::error_code ec;
  fs::create_directories(stage, ec);
  if (ec) return Fail("cannot make " + stage.string() + ": " + ec.message());

  // The ISO 9660 tree: root, hash tree, root hash and metadata, every time stamp fixed
  // (a directory xorriso made up itself would carry the clock's time). The large files
  // are hard links, not copies.
  const fs::path tree = stage / "tree" / "sprout";
  fs::create_directories(tree, ec);
  if (ec) return Fail("cannot make " + tree.string() + ": " + ec.message());
  fs::create_hard_link(in.root_img, tree / "root.squashfs", ec);
  if (!ec) fs::create_hard_link(in.verity_img, tree / "root.verity", ec);
  if (ec) return Fail("cannot link the root into " + tree.string() + ": " + ec.message());
  if (auto s = WriteFileAtomic(tree / "roothash", in.plan->root_hash + "\n"); !s) return Fail(s.error());
  if (auto s = WriteFileAtomic(tree / "image.json", in.metadata); !s) return Fail(s.error());
  // The ESP is one FAT image, sized to its files, inside the ISO 9660 tree: the El Torito
  // UEFI boot image (a CD boot) and GPT partition 2 (a disk boot) both point at it. Its
  // El Torito load size is 0, which UEFI firmware reads as "up to the end of the
  // volume": the 16-bit sector count cannot describe an image over 32 MiB.
  auto files = LiveEsp(in, kLiveIso);
  if (!files) return Fail(files.error());
  fs::path esp = tree / "esp.img";
  if (auto s = MakeFatImage(esp, LiveEspSize(*files), in.plan->esp_volume_id ^ 0x150u, "SPROUT-LIVE", *files, in.epoch,
                            stage);
      !s) {
    return Fail("ISO: " + s.error());
  }

  for (const char* f : {"root.squashfs", "root.verity", "roothash", "image.json", "esp.img"}) {
    if (auto s = SetMtime(tree / f, in.epoch); !s) return Fail(s.error());
  }
  if (auto s = SetMtime(tree, in.epoch); !s) return Fail(s.error());
  std::string name = in.profile->name + ".iso";
  fs::path iso = in.work / name;
  fs::remove(iso, ec);
  // xorriso takes SOURCE_DATE_EPOCH for every volume date, file time stamp and the
  // GPT disk GUID; the volume ID comes from the build seed.
  Command cmd{
      {"xorriso", "-as", "mkisofs", "-quiet", "-o", iso.string(), "-V", IsoVolumeId(in.seed), "-r", "-graft-points",
       "sprout=" + tree.string(), "-e", "sprout/esp.img", "-no-emul-boot", "-efi-boot-part", "--efi-boot-image"},
      {{"SOURCE_DATE_EPOCH", std::to_string(in.epoch)}, {"TZ", "UTC"}, {"LC_ALL", "C"}}};
  if (auto r = RunChecked(cmd); !r) return Fail("cannot write the ISO image: " + r.error());
  fs::remove_all(stage, ec);
  return name;
}

Result<std::vector<std::string>> MakePxe(const MediaInputs& in) {
  const fs::path dir = in.work / "pxe";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Fail("cannot make " + dir.string() + ": " + ec.message());
  auto cmdline = LiveCmdline(in.plan->cmdline, kLiveInitrd);
  if (auto s = WriteFileAtomic(dir / "vmlinuz", in.boot->kernel); !s) return Fail(s.error());
  if (auto s = WriteFileAtomic(dir / "boot.ipxe",
                               IpxeScript("sprout " + in.profile->name, "vmlinuz", "initrd.img", cmdline));
      !s) {
    return Fail(s.error());
  }
  // The initrd: the boot initrd (with sprout's stages), then one more cpio archive that
  // holds the root, its hash tree and its hash, streamed so nothing large sits in memory.
  fs::path initrd = dir / "initrd.img";
  std::ofstream out(initrd, std::ios::binary | std::ios::trunc);
  if (!out) return Fail("cannot create " + initrd.string());
  out << in.boot->initrd;
  out << std::string(CpioPadding(in.boot->initrd.size()), '\0');
  std::uint32_t ino = 1;
  out << CpioNewcHeader("sprout", 0040755, 0, ino++, in.epoch);
  std::string hash_line = in.plan->root_hash + "\n";
  out << CpioNewcHeader(kLiveRootHashPath, 0100644, hash_line.size(), ino++, in.epoch) << hash_line
      << std::string(CpioPadding(hash_line.size()), '\0');
  for (const auto& [name, path] : {std::pair<std::string, fs::path>{kLiveRootPath, in.root_img},
                                   std::pair<std::string, fs::path>{kLiveVerityPath, in.verity_img}}) {
    std::uint64_t size = fs::file_size(path, ec);
    if (ec) return Fail("cannot read " + path.string() + ": " + ec.message());
    if (size > 0xffffffffull)
      return Fail("the root is over 4 GiB, more than a cpio archive can hold; PXE needs it smaller");
    out << CpioNewcHeader(name, 0100644, size, ino++, in.epoch);
    if (auto s = CopyInto(out, path, initrd); !s) return Fail(s.error());
    out << std::string(CpioPadding(size), '\0');
  }
  out << CpioTrailer();
  out.close();
  if (!out) return Fail("cannot write " + initrd.string());
  return std::vector<std::string>{"pxe/boot.ipxe", "pxe/initrd.img", "pxe/vmlinuz"};
}

}  // namespace sprout::cli
