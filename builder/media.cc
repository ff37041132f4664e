// Hybrid ISO, PXE bundle, the output directory's life cycle, keygen, verify, inspect.
#include "builder/media.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "image/fsimages.h"
#include "image/gpt.h"
#include "image/media.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/sha256.h"
#include "util/sign.h"
#include "util/text.h"

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

// LiveEsp lists the ESP files of a live medium: the disk's boot files with a live entry.
std::vector<EspFile> LiveEsp(const MediaInputs& in, std::string_view medium) {
  auto cmdline = LiveCmdline(in.plan->cmdline, medium);
  return {{"EFI/BOOT/BOOTX64.EFI", in.bootloader},
          {"EFI/systemd/systemd-bootx64.efi", in.bootloader},
          {"loader/loader.conf", in.plan->loader_conf},
          {"loader/entries/sprout.conf", LoaderEntry("sprout " + in.profile->name + " (live)", cmdline)},
          {"sprout/vmlinuz", in.kernel},
          {"sprout/initrd.img", in.initrd},
          {kImageMetadataPath, in.metadata}};
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

std::string ImageMetadata(const std::string& profile_json, const std::string& root_hash, const std::string& kernel,
                          const std::string& seed, const std::string& images_json) {
  nlohmann::ordered_json j;
  j["sprout"] = SPROUT_VERSION;
  j["profile"] = nlohmann::json::parse(profile_json);
  j["rootHash"] = root_hash;
  j["kernel"] = kernel;
  j["seed"] = seed;
  j["images"] = nlohmann::json::parse(images_json.empty() ? "[]" : images_json);
  return j.dump(2) + "\n";
}

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
  std::uint64_t need = 0;
  for (const auto& f : files) need += f.data.size();
  constexpr std::uint64_t kMiB = 1 << 20;
  std::uint64_t esp_size = std::max<std::uint64_t>(40 * kMiB, (need + 4 * kMiB + kMiB - 1) / kMiB * kMiB);
  fs::path esp = tree / "esp.img";
  if (auto s = MakeFatImage(esp, esp_size, in.plan->esp_volume_id ^ 0x150u, "SPROUT-LIVE", files, in.epoch, stage);
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
  if (auto s = WriteFileAtomic(dir / "vmlinuz", in.kernel); !s) return Fail(s.error());
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
  out << in.initrd;
  out << std::string(CpioPadding(in.initrd.size()), '\0');
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

// --- the output directory

WorkDirLock::~WorkDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

Result<WorkDirLock> WorkDirLock::Claim(const fs::path& out_dir, const fs::path& work) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out_dir, ec)) {
    std::string name = entry.path().filename().string();
    if (!IsWorkDirName(name) || entry.path() == work || !entry.is_directory()) continue;
    // A work directory is stale when nobody holds its lock. One without a lock file is
    // a build killed before it took the lock, or one starting now: wait a minute for it.
    int fd = ::open((entry.path() / ".lock").c_str(), O_RDONLY | O_CLOEXEC);
    bool stale = false;
    if (fd >= 0) {
      stale = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
      ::close(fd);
    } else {
      auto age = fs::file_time_type::clock::now() - fs::last_write_time(entry.path(), ec);
      stale = !ec && age > std::chrono::minutes(1);
    }
    if (stale) {
      fs::remove_all(entry.path(), ec);
      if (!ec) ++removed;
    }
  }
  int fd = ::open((work / ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (fd >= 0) ::close(fd);
    return Fail("cannot lock the work directory " + work.string() + ": " + std::strerror(errno));
  }
  return WorkDirLock(fd, removed);
}

Status Publish(const fs::path& work, const fs::path& out_dir, const std::vector<std::string>& names) {
  std::error_code ec;
  // A signature left by an earlier signed build would not match the new manifest.
  if (std::find(names.begin(), names.end(), "manifest.json.sig") == names.end()) {
    fs::remove(out_dir / "manifest.json.sig", ec);
  }
  bool pxe_done = false;
  for (const auto& name : names) {
    if (name.starts_with("pxe/")) {
      if (pxe_done) continue;
      pxe_done = true;
      // A directory cannot replace another by rename, so the old one moves aside first.
      if (fs::exists(out_dir / "pxe", ec)) {
        fs::rename(out_dir / "pxe", work / "pxe.old", ec);
        if (ec) return Fail("cannot move the old pxe/ out of " + out_dir.string() + ": " + ec.message());
      }
      fs::rename(work / "pxe", out_dir / "pxe", ec);
      if (ec) return Fail("cannot move pxe/ into " + out_dir.string() + ": " + ec.message());
      continue;
    }
    fs::rename(work / name, out_dir / name, ec);
    if (ec) return Fail("cannot move " + name + " into " + out_dir.string() + ": " + ec.message());
  }
  return Ok{};
}

Status SignManifest(const fs::path& dir, const fs::path& private_key) {
  auto key = ReadFile(private_key);
  if (!key) return Fail("cannot read the signing key: " + key.error());
  auto manifest = ReadFile(dir / "manifest.json");
  if (!manifest) return Fail(manifest.error());
  auto sig = SignEd25519(*key, *manifest);
  if (!sig) return Fail(private_key.string() + ": " + sig.error());
  return WriteFileAtomic(dir / "manifest.json.sig", *sig);
}

// --- keygen

int Keygen(const fs::path& prefix) {
  fs::path priv = prefix.string() + ".key";
  fs::path pub = prefix.string() + ".pub";
  if (auto s = GenerateEd25519(priv, pub); !s) {
    std::cerr << "sprout: " << s.error() << "\n";
    return 1;
  }
  std::cout << "private key: " << priv.string() << " (mode 0600; keep it secret)\n"
            << "public key:  " << pub.string() << "\n"
            << "sign with: sprout build PROFILE -o DIR --sign " << priv.string() << "\n"
            << "check with: sprout verify DIR --key " << pub.string() << "\n";
  return 0;
}

// --- verify

int Verify(const fs::path& dir, const fs::path& public_key) {
  int problems = 0;
  auto bad = [&](const std::string& file, const std::string& why) {
    std::cout << "FAIL " << file << ": " << why << "\n";
    ++problems;
  };
  auto sums_text = ReadFile(dir / "sha256sums");
  auto manifest_text = ReadFile(dir / "manifest.json");
  if (!manifest_text) {
    bad("manifest.json", "cannot be read; is " + dir.string() + " a sprout output directory?");
    return 1;
  }
  std::map<std::string, std::string> listed;  // file -> sha256 from sha256sums
  if (!sums_text) {
    bad("sha256sums", "cannot be read");
  } else if (auto sums = ParseSha256Sums(*sums_text); !sums) {
    bad("sha256sums", sums.error());
  } else {
    for (const auto& s : *sums) listed[s.file] = s.sha256;
  }
  std::map<std::string, std::string> actual;
  auto digest_of = [&](const std::string& file) -> std::string {
    if (auto it = actual.find(file); it != actual.end()) return it->second;
    auto d = Sha256File(dir / file);
    return actual[file] = d ? *d : "";
  };

  // 1. The signature over the manifest, when a key is given.
  if (!public_key.empty()) {
    auto pub = ReadFile(public_key);
    auto sig = ReadFile(dir / "manifest.json.sig");
    if (!pub) {
      bad(public_key.string(), pub.error());
    } else if (!sig) {
      bad("manifest.json.sig", "missing; build with --sign KEY to sign the manifest");
    } else if (auto s = VerifyEd25519(*pub, *manifest_text, *sig); !s) {
      // The sums tell which of the two changed: an unchanged manifest blames the signature.
      bool manifest_as_listed = listed.count("manifest.json") && listed["manifest.json"] == Sha256Hex(*manifest_text);
      bad(manifest_as_listed ? "manifest.json.sig" : "manifest.json", s.error());
    } else {
      std::cout << "ok   manifest.json signature (" << public_key.filename().string() << ")\n";
    }
  } else if (fs::exists(dir / "manifest.json.sig")) {
    std::cout << "note manifest.json.sig not checked: give the public key with --key PUB\n";
  }

  // 2. Every output the manifest names, by size and sha256.
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(*manifest_text);
  } catch (const std::exception& e) {
    bad("manifest.json", std::string("is not JSON: ") + e.what());
    return 1;
  }
  std::map<std::string, std::string> expected;  // file -> sha256 from the manifest
  if (manifest.contains("outputs") && manifest["outputs"].is_array()) {
    for (const auto& o : manifest["outputs"]) {
      if (!o.contains("file") || !o.contains("sha256")) continue;
      expected[o["file"].get<std::string>()] = o["sha256"].get<std::string>();
    }
  }
  if (manifest.contains("sbom") && manifest["sbom"].contains("sha256")) {
    expected[manifest["sbom"]["file"].get<std::string>()] = manifest["sbom"]["sha256"].get<std::string>();
  }
  if (expected.empty()) bad("manifest.json", "lists no outputs");
  for (const auto& [file, want] : expected) {
    std::string got = digest_of(file);
    if (got.empty()) {
      bad(file, "missing or unreadable");
    } else if (got != want) {
      bad(file, "sha256 " + got + " differs from the manifest's " + want);
    } else {
      std::cout << "ok   " << file << "\n";
    }
  }

  // 3. Every sha256sums line: the files the manifest vouches for must agree with it; the
  // others (the manifest and its signature) are checked against their bytes.
  for (const auto& [file, want] : listed) {
    std::string got = digest_of(file);
    if (got.empty()) {
      bad(file, "listed in sha256sums but missing");
    } else if (got != want) {
      if (expected.count(file) && expected[file] == got) {
        bad("sha256sums", "its line for " + file + " is wrong (the file matches the manifest)");
      } else if (!expected.count(file)) {
        bad(file, "sha256 " + got + " differs from sha256sums' " + want);
      }  // else: already reported in step 2
    } else if (!expected.count(file)) {
      std::cout << "ok   " << file << "\n";
    }
  }
  for (const auto& [file, want] : expected) {
    if (!listed.count(file) && sums_text) bad("sha256sums", "does not list " + file);
  }
  if (problems > 0) {
    std::cout << dir.string() << ": " << problems << (problems == 1 ? " problem" : " problems") << "\n";
    return 1;
  }
  std::cout << dir.string() << ": verified " << actual.size() << " files"
            << (public_key.empty() ? " (signature not checked)" : " and the signature") << "\n";
  return 0;
}

// --- inspect

namespace {

enum class ImageKind { kRaw, kQcow2, kIso };

// The protective MBR, the GPT header and its 128 entries: 34 sectors.
constexpr std::size_t kGptHeadBytes = 34 * kSectorSize;

Result<std::string> ReadAt(const fs::path& path, std::uint64_t offset, std::size_t size) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Fail("cannot open " + path.string());
  f.seekg(static_cast<std::streamoff>(offset));
  std::string buf(size, '\0');
  f.read(buf.data(), static_cast<std::streamsize>(size));
  buf.resize(static_cast<std::size_t>(f.gcount()));
  return buf;
}

// RawExtract copies size bytes at offset of a (qcow2 or raw) image into out.
Status Extract(const fs::path& image, ImageKind kind, std::uint64_t offset, std::uint64_t size, const fs::path& out) {
  if (kind == ImageKind::kQcow2) {
    if (offset % 512 != 0 || size % 512 != 0) return Fail("unaligned read of a qcow2 image");
    auto r =
        RunChecked({{"qemu-img", "dd", "-f", "qcow2", "-O", "raw", "bs=512", "skip=" + std::to_string(offset / 512),
                     "count=" + std::to_string(size / 512), "if=" + image.string(), "of=" + out.string()}});
    if (!r) return Fail("qemu-img cannot read " + image.string() + ": " + r.error());
    return Ok{};
  }
  std::ifstream in(image, std::ios::binary);
  std::ofstream o(out, std::ios::binary | std::ios::trunc);
  if (!in || !o) return Fail("cannot read " + image.string());
  in.seekg(static_cast<std::streamoff>(offset));
  std::vector<char> buf(1 << 20);
  std::uint64_t left = size;
  while (left > 0 && in) {
    in.read(buf.data(), static_cast<std::streamsize>(std::min<std::uint64_t>(left, buf.size())));
    o.write(buf.data(), in.gcount());
    left -= static_cast<std::uint64_t>(in.gcount());
  }
  return Ok{};
}

}  // namespace

int Inspect(const fs::path& image, bool json) {
  auto fail = [&](const std::string& why) {
    std::cerr << "sprout: " << image.string() << ": " << why << "\n";
    return 1;
  };
  std::error_code ec;
  if (!fs::is_regular_file(image, ec)) return fail("not found, or not a file");
  auto head = ReadAt(image, 0, kGptHeadBytes);
  auto iso_magic = ReadAt(image, 32769, 5);
  if (!head || !iso_magic) return fail("cannot be read");
  ImageKind kind = ImageKind::kRaw;
  if (head->starts_with("QFI\xfb")) kind = ImageKind::kQcow2;
  if (*iso_magic == "CD001") kind = ImageKind::kIso;
  const char* kind_name = kind == ImageKind::kQcow2 ? "qcow2" : kind == ImageKind::kIso ? "iso" : "raw";

  std::uint64_t disk_size = fs::file_size(image, ec);
  TempDir tmp(fs::temp_directory_path(), "sprout-inspect");
  if (kind == ImageKind::kQcow2) {
    auto info = RunChecked({{"qemu-img", "info", "--output=json", image.string()}});
    if (!info) return fail("qemu-img cannot read it: " + info.error());
    try {
      disk_size = nlohmann::json::parse(*info)["virtual-size"].get<std::uint64_t>();
    } catch (const std::exception& e) {
      return fail(std::string("qemu-img info gave no virtual size: ") + e.what());
    }
    if (auto s = Extract(image, kind, 0, kGptHeadBytes, tmp.path() / "head"); !s) return fail(s.error());
    head = ReadFile(tmp.path() / "head");
    if (!head) return fail(head.error());
  }
  std::vector<Partition> partitions;
  if (kind == ImageKind::kIso) {
    // xorriso places its GPT entries after the ISO 9660 system area, where sprout's own
    // parser does not look; sfdisk reads any valid GPT.
    auto table = RunChecked({{"sfdisk", "--json", image.string()}});
    if (!table) return fail("sfdisk cannot read its partition table: " + table.error());
    try {
      const auto parsed = nlohmann::json::parse(*table);
      for (const auto& p : parsed["partitiontable"]["partitions"]) {
        Partition part;
        part.spec.label = p.value("name", "");
        part.spec.type = Guid::Parse(p["type"].get<std::string>()).value_or(Guid{});
        part.spec.uuid = Guid::Parse(p.value("uuid", "")).value_or(Guid{});
        part.first_lba = p["start"].get<std::uint64_t>();
        part.last_lba = part.first_lba + p["size"].get<std::uint64_t>() - 1;
        partitions.push_back(part);
      }
    } catch (const std::exception& e) {
      return fail(std::string("sfdisk gave an unexpected table: ") + e.what());
    }
  } else {
    std::vector<std::uint8_t> head_bytes(head->begin(), head->end());
    auto gpt = ParseGpt(head_bytes, disk_size);
    if (!gpt) return fail("no GPT partition table (" + gpt.error() + "); is it a sprout image?");
    partitions = gpt->partitions;
  }

  // The metadata comes from the ESP, which every medium has.
  const Partition* esp = nullptr;
  for (const auto& p : partitions) {
    if (p.spec.type == *Guid::Parse(dps::kEsp)) esp = &p;
  }
  if (!esp) return fail("has no EFI system partition; is it a sprout image?");
  fs::path esp_file = tmp.path() / "esp.vfat";
  if (auto s = Extract(image, kind, esp->offset(), esp->size(), esp_file); !s) return fail(s.error());
  auto mt =
      Run({{"mtype", "-i", esp_file.string(), std::string("::/") + kImageMetadataPath}, {{"MTOOLS_SKIP_CHECK", "1"}}});
  if (!mt || mt->exit_code != 0) {
    return fail(std::string("its ESP holds no ") + kImageMetadataPath + " (built by an older sprout?)");
  }
  nlohmann::ordered_json meta;
  try {
    meta = nlohmann::ordered_json::parse(mt->output);
  } catch (const std::exception& e) {
    return fail(std::string(kImageMetadataPath) + " is not JSON: " + e.what());
  }

  nlohmann::ordered_json out;
  out["image"] = image.string();
  out["format"] = kind_name;
  out["size"] = disk_size;
  if (kind == ImageKind::kIso) {
    auto vol = ReadAt(image, 32768 + 40, 32);
    if (vol) out["volumeId"] = std::string(Trim(*vol));
  }
  out["partitions"] = nlohmann::json::array();
  int number = 0;
  for (const auto& p : partitions) {
    out["partitions"].push_back({{"number", ++number},
                                 {"label", p.spec.label},
                                 {"type", p.spec.type.ToString()},
                                 {"uuid", p.spec.uuid.ToString()},
                                 {"offset", p.offset()},
                                 {"size", p.size()}});
  }
  out["rootHash"] = meta.value("rootHash", "");
  out["kernel"] = meta.value("kernel", "");
  out["profile"] = meta.contains("profile") ? meta["profile"] : nlohmann::ordered_json::object();
  out["images"] = meta.contains("images") ? meta["images"] : nlohmann::ordered_json::array();
  if (json) {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << image.string() << ": " << kind_name << ", " << HumanSize(disk_size) << "\n";
  if (out.contains("volumeId")) std::cout << "volume ID:  " << out["volumeId"].get<std::string>() << "\n";
  std::cout << "partitions:\n";
  for (const auto& p : out["partitions"]) {
    std::printf("  %d  %-22s %10s  type %s  uuid %s\n", p["number"].get<int>(), p["label"].get<std::string>().c_str(),
                HumanSize(p["size"].get<std::uint64_t>()).c_str(), p["type"].get<std::string>().c_str(),
                p["uuid"].get<std::string>().c_str());
  }
  std::cout << std::flush;
  std::cout << "root hash:  " << out["rootHash"].get<std::string>() << "\n";
  std::cout << "kernel:     " << out["kernel"].get<std::string>() << "\n";
  const auto& prof = out["profile"];
  std::cout << "profile:    " << prof.value("name", "?") << " (role " << prof.value("role", "?") << ")\n";
  std::cout << "preloaded images:";
  if (out["images"].empty()) std::cout << " none";
  std::cout << "\n";
  for (const auto& i : out["images"]) std::cout << "  " << i.dump() << "\n";
  return 0;
}

}  // namespace sprout::cli
