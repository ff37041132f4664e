// `sprout build`, `sprout validate` and `sprout base`: the image pipeline as named steps.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "builder/cluster.h"
#include "builder/commands.h"
#include "builder/images.h"
#include "builder/media.h"
#include "image/base.h"
#include "image/disk.h"
#include "image/fsimages.h"
#include "image/gpt.h"
#include "image/plan.h"
#include "image/rootfs.h"
#include "image/sbom.h"
#include "nodeconfig/nodeconfig.h"
#include "profile/profile.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/progress.h"
#include "util/sha256.h"
#include "util/text.h"

namespace sprout::cli {

namespace {

namespace fs = std::filesystem;

std::optional<Profile> LoadAndReport(const fs::path& path) {
  Diagnostics diags;
  auto profile = LoadProfile(path, diags);
  if (!diags.all().empty()) std::cerr << diags.Render(::isatty(2) != 0);
  if (diags.has_errors()) {
    std::cerr << path.string() << ": " << diags.error_count() << (diags.error_count() == 1 ? " error" : " errors")
              << "\n";
    return std::nullopt;
  }
  return profile;
}

fs::path SelfDir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : exe.parent_path();
}

// FirstbootBinary finds sprout-firstboot: $SPROUT_FIRSTBOOT, else beside sprout.
Result<fs::path> FirstbootBinary() {
  if (const char* p = std::getenv("SPROUT_FIRSTBOOT"); p && *p) return fs::path(p);
  fs::path beside = SelfDir() / "sprout-firstboot";
  std::error_code ec;
  if (fs::is_regular_file(beside, ec)) return beside;
  return Fail("cannot find sprout-firstboot beside " + SelfDir().string() +
              "; build it (cmake --build build) or set SPROUT_FIRSTBOOT to its path");
}

int64_t SourceDateEpoch(const Profile& p) {
  if (const char* s = std::getenv("SOURCE_DATE_EPOCH"); s && *s) {
    try {
      return std::stoll(s);
    } catch (const std::exception&) {
      std::cerr << "sprout: ignoring SOURCE_DATE_EPOCH='" << s << "', which is not a number\n";
    }
  }
  return p.source_date_epoch;
}

// RootAdditions lists everything sprout puts on top of the base.
Result<std::vector<RootEntry>> RootAdditions(const Profile& p, const DiskPlan& plan, const fs::path& firstboot) {
  std::vector<RootEntry> add;
  fs::path data = DataDir();
  std::vector<fs::path> overlays{data / "overlays" / "common", data / "overlays" / RoleName(p.role)};
  overlays.insert(overlays.end(), p.overlays.begin(), p.overlays.end());
  for (const auto& o : overlays) {
    std::error_code ec;
    if (!fs::is_directory(o, ec)) return Fail("overlay " + o.string() + " is missing; is SPROUT_DATA_DIR right?");
    if (auto s = AddTree(o, "", add); !s) return Fail(s.error());
  }
  add.push_back({RootEntry::Kind::kFile, "usr/lib/sprout/sprout-firstboot", "", firstboot, 0755});
  add.push_back({RootEntry::Kind::kSymlink, "usr/bin/sprout-firstboot", "/usr/lib/sprout/sprout-firstboot", {}, 0777});
  add.push_back({RootEntry::Kind::kFile, "usr/lib/systemd/system/sprout-firstboot.service", "",
                 data / "firstboot" / "sprout-firstboot.service", 0644});
  add.push_back({RootEntry::Kind::kSymlink,
                 "etc/systemd/system/multi-user.target.wants/sprout-firstboot.service",
                 "/usr/lib/systemd/system/sprout-firstboot.service",
                 {},
                 0777});
  add.push_back({RootEntry::Kind::kFile, "etc/fstab", plan.fstab, {}, 0644});
  add.push_back(
      {RootEntry::Kind::kFile, "etc/sprout/profile.json", ProfileToJson(p, p.file.parent_path()) + "\n", {}, 0644});
  // "localhost" tells the initrd to make a per-node hostname at first boot.
  add.push_back(
      {RootEntry::Kind::kFile, "etc/hostname", (p.hostname.empty() ? "localhost" : p.hostname) + "\n", {}, 0644});
  for (const auto& f : p.files) {
    RootEntry e;
    e.path = f.path.substr(1);
    e.mode = f.mode;
    if (f.content) {
      e.data = *f.content;
    } else {
      e.source = f.source;
    }
    add.push_back(e);
  }
  if (auto s = AddClusterFiles(p, data, add); !s) return Fail(s.error());
  return add;
}

// Newest returns the captured file with the highest version-sorted name under prefix.
const std::pair<const std::string, std::string>* Newest(const std::map<std::string, std::string>& files,
                                                        const std::string& prefix) {
  const std::pair<const std::string, std::string>* best = nullptr;
  for (const auto& kv : files) {
    if (kv.first.starts_with(prefix) && (!best || kv.first > best->first)) best = &kv;
  }
  return best;
}

}  // namespace

fs::path DataDir() {
  if (const char* d = std::getenv("SPROUT_DATA_DIR"); d && *d) return d;
  // An installed sprout keeps its data in ../share/sprout; a build tree uses the sources.
  fs::path installed = SelfDir().parent_path() / "share" / "sprout";
  std::error_code ec;
  if (fs::is_directory(installed / "overlays", ec)) return installed;
  return SPROUT_DATA_DIR;
}

int Validate(const fs::path& path, bool print) {
  auto p = LoadAndReport(path);
  if (!p) return 1;
  if (print) {
    std::cout << ProfileToJson(*p, fs::current_path()) << "\n";
  } else {
    std::cout << path.string() << ": ok (name " << p->name << ", role " << RoleName(p->role);
    for (std::size_t i = p->chain.size() - 1; i-- > 0;) std::cout << ", extends " << p->chain[i].filename().string();
    std::cout << ")\n";
  }
  return 0;
}

int Base(const fs::path& what, const fs::path& cache_dir, bool force) {
  fs::path recipe = what;
  if (!IsRecipe(what)) {
    auto p = LoadAndReport(what);
    if (!p) return 1;
    recipe = p->base;
    if (!IsRecipe(recipe)) {
      std::cout << "the profile's base " << recipe.string() << " is a ready root; nothing to build\n";
      return 0;
    }
  }
  auto key = RecipeKey(recipe, DefaultAptSources());
  if (!key) {
    std::cerr << "sprout: " << key.error() << "\n";
    return 1;
  }
  fs::path cached = CachedBasePath(cache_dir, *key);
  std::error_code ec;
  if (!force && fs::is_regular_file(cached, ec)) {
    std::cout << "base is cached: " << cached.string() << "\n";
    return 0;
  }
  Progress progress(::isatty(2) != 0, 1);
  progress.Begin("build base OS with mmdebstrap (log: " + (cache_dir / "base" / (*key + ".log")).string() + ")");
  auto built = BuildBase(recipe, cache_dir, *key);
  if (!built) {
    progress.Note("sprout: " + built.error());
    return 1;
  }
  progress.End(HumanSize(fs::file_size(*built, ec)));
  std::cout << "base: " << built->string() << "\n";
  return 0;
}

int Build(const BuildOptions& options) {
  // Ten steps always, plus one per medium made from the raw disk; the count is
  // corrected once the profile has said which media it wants.
  auto media_steps = [](const std::vector<Format>& f) {
    return static_cast<int>(f.size() - std::count(f.begin(), f.end(), Format::kRaw));
  };
  Progress progress(::isatty(2) != 0, 10 + (options.formats.empty() ? 1 : media_steps(options.formats)));
  auto fail = [&](const std::string& why) {
    progress.Note("sprout: " + why);
    return 1;
  };

  progress.Begin("resolve profile");
  auto profile = LoadAndReport(options.profile);
  if (!profile) return 1;
  progress.SetTotal(10 + media_steps(options.formats.empty() ? profile->formats : options.formats));
  if (auto fetched = FetchProfileFiles(*profile, options.cache_dir); !fetched) return fail(fetched.error());
  auto firstboot = FirstbootBinary();
  if (!firstboot) return fail(firstboot.error());
  progress.End(profile->name);

  progress.Begin("prepare base OS");
  auto base = ResolveBase(profile->base, options.cache_dir, options.build_base);
  if (!base) return fail(base.error());
  progress.End(base->id);

  const int64_t epoch = SourceDateEpoch(*profile);
  std::vector<Format> formats = options.formats.empty() ? profile->formats : options.formats;
  Profile recorded = *profile;
  recorded.source_date_epoch = epoch;
  const std::string profile_json = ProfileToJson(recorded, profile->file.parent_path());
  const std::string seed = SeedOf(profile_json, base->id);
  DiskPlan plan = PlanDisk(*profile, seed);

  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  if (ec) return fail("cannot create the output directory " + options.out_dir.string() + ": " + ec.message());
  // Everything is made in a work directory inside DIR and moved into place at the end,
  // so a failed build leaves no half-written image behind.
  TempDir work(options.out_dir, ".sprout-build");
  auto work_lock = WorkDirLock::Claim(options.out_dir, work.path());
  if (!work_lock) return fail(work_lock.error());
  if (!options.sign_key.empty() && !fs::is_regular_file(options.sign_key, ec)) {
    return fail("the signing key " + options.sign_key.string() +
                " is missing; make one with `sprout keygen -o PREFIX`");
  }

  auto additions = RootAdditions(*profile, plan, *firstboot);
  if (!additions) return fail(additions.error());
  // Pulls what is not cached yet and builds recipe images (the default profile's etcd
  // image is made from Debian's etcd-server), so it gets its own step and time.
  progress.Begin("preload container images");
  auto images = PreloadImages(*profile, options.cache_dir, options.offline, options.ca_bundle, *additions);
  if (!images) return fail(images.error());
  std::uint64_t image_bytes = 0;
  for (const auto& i : *images) image_bytes += i.size;
  progress.End(images->empty() ? std::string("none in the profile")
                               : std::to_string(images->size()) + (images->size() == 1 ? " image, " : " images, ") +
                                     HumanSize(image_bytes));
  AddClusterRecord(*profile, *images, *additions);

  progress.Begin("assemble root and pack squashfs");
  RootSpec spec;
  spec.base = base->root;
  spec.additions = std::move(*additions);
  spec.mtime = epoch;
  spec.capture_prefixes = {"boot/vmlinuz-", "boot/initrd.img-", "usr/lib/systemd/boot/efi/systemd-bootx64.efi",
                           "var/lib/dpkg/status"};
  fs::path root_img = work.path() / "root.squashfs";
  int jobs = options.jobs > 0 ? options.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto packer = Pipe::Start(
      {{"tar2sqfs", "--quiet", "--force", "--no-skip", "--compressor", "zstd", "--num-jobs", std::to_string(jobs),
        "--defaults", "mode=0755,uid=0,gid=0,mtime=" + std::to_string(epoch), root_img.string()}});
  if (!packer) return fail(packer.error());
  auto summary =
      WriteRootTar(spec, packer->fd(), [&](std::uint64_t done, std::uint64_t total) { progress.Update(done, total); });
  auto packed = packer->Finish();
  // A packer that failed explains why the stream broke, so its message comes first.
  if (!packed) return fail("packing the root failed: " + packed.error());
  if (!summary) return fail(summary.error());
  const std::uint64_t root_bytes = fs::file_size(root_img);
  progress.End(HumanSize(root_bytes) + " squashfs from " + std::to_string(summary->entries) + " entries");

  progress.Begin("build verity hash tree");
  fs::path verity_img = work.path() / "root.verity";
  auto root_hash = MakeVerityHash(root_img, verity_img, plan.verity_salt, plan.verity_uuid_text);
  if (!root_hash) return fail(root_hash.error());
  PlanBoot(plan, *profile, *root_hash);
  const std::uint64_t verity_bytes = fs::file_size(verity_img);
  progress.End("root hash " + root_hash->substr(0, 16) + "…");

  progress.Begin("make initrd");
  auto kernel = Newest(summary->captured, "boot/vmlinuz-");
  auto initrd = Newest(summary->captured, "boot/initrd.img-");
  auto bootloader = summary->captured.find("usr/lib/systemd/boot/efi/systemd-bootx64.efi");
  if (!kernel || !initrd || bootloader == summary->captured.end()) {
    return fail(
        "the base lacks a kernel, an initrd or systemd-boot (/boot/vmlinuz-*, /boot/initrd.img-*, "
        "systemd-bootx64.efi); add linux-image-amd64, initramfs-tools and systemd-boot-efi to its packages");
  }
  std::string kernel_version = kernel->first.substr(std::string("boot/vmlinuz-").size());
  std::vector<RootEntry> stages{{RootEntry::Kind::kDir, "sprout", "", {}, 0755}};
  for (const char* stage : {"local-top", "local-bottom"}) {
    fs::path script = DataDir() / "images" / "initrd" / stage;
    if (fs::exists(script, ec))
      stages.push_back({RootEntry::Kind::kFile, std::string("sprout/") + stage, "", script, 0755});
  }
  auto cpio = MakeCpio(stages, epoch);
  if (!cpio) return fail(cpio.error());
  // The kernel looks for a following uncompressed cpio only at 4-byte-aligned offsets
  // after a compressed one, skipping zeros, so pad the distribution's initrd first.
  std::string initrd_bytes = initrd->second;
  initrd_bytes.append((4 - initrd_bytes.size() % 4) % 4, '\0');
  initrd_bytes += *cpio;
  progress.End("kernel " + kernel_version + ", " + HumanSize(initrd_bytes.size()));

  progress.Begin("make ESP");
  fs::path esp_img = work.path() / "esp.vfat";
  std::vector<EspFile> esp_files{{"EFI/BOOT/BOOTX64.EFI", bootloader->second},
                                 {"EFI/systemd/systemd-bootx64.efi", bootloader->second},
                                 {"loader/loader.conf", plan.loader_conf},
                                 {"loader/entries/sprout.conf", plan.loader_entry},
                                 {"sprout/vmlinuz", kernel->second},
                                 {"sprout/initrd.img", initrd_bytes},
                                 {"sprout/image.json", ImageMetadata(profile_json, plan.root_hash, kernel_version, seed,
                                                                     oci::ImagesJson(*images))}};
  std::uint64_t esp_need = 0;
  for (const auto& f : esp_files) esp_need += f.data.size();
  if (esp_need + (8u << 20) > profile->esp_size) {
    return fail("the ESP needs " + HumanSize(esp_need + (8u << 20)) + " but disk.espSize is " +
                HumanSize(profile->esp_size) + "; raise disk.espSize in " + profile->file.string());
  }
  if (auto s =
          MakeFatImage(esp_img, profile->esp_size, plan.esp_volume_id, "SPROUT-ESP", esp_files, epoch, work.path());
      !s) {
    return fail(s.error());
  }
  progress.End(HumanSize(profile->esp_size));

  progress.Begin("make state partition");
  fs::path state_img = work.path() / "state.ext4";
  if (auto s = MakeExt4Image(state_img, profile->state_size, plan.state_fs_uuid, kStateLabel, epoch); !s) {
    return fail(s.error());
  }
  progress.End(HumanSize(profile->state_size));

  progress.Begin("write raw disk");
  // "auto" leaves a quarter of headroom, so a later root fits the same A/B slots.
  std::uint64_t root_size = profile->root_size ? profile->root_size : root_bytes + root_bytes / 4;
  if (root_size < root_bytes) {
    return fail("the root file system is " + HumanSize(root_bytes) + " but disk.rootSize is " + HumanSize(root_size) +
                "; raise disk.rootSize or set it to auto");
  }
  std::uint64_t verity_size = verity_bytes + verity_bytes / 4 + (1u << 20);
  auto layout =
      PlanGpt(plan.disk_guid, PlanPartitions(plan, profile->esp_size, root_size, verity_size, profile->state_size));
  if (!layout) return fail(layout.error());
  fs::path raw_tmp = work.path() / (profile->name + ".raw");
  // The config area starts with only a comment: an image holds no secret until it is
  // personalized (sprout personalize), flashed with settings, or booted with them.
  fs::path config_img = work.path() / "config.txt";
  if (auto s = WriteFileAtomic(config_img, RenderNodeConfig(NodeConfig{})); !s) return fail(s.error());
  if (auto s = WriteRawDisk(*layout, {esp_img, root_img, verity_img, {}, {}, config_img, state_img}, raw_tmp); !s) {
    return fail(s.error());
  }
  progress.End(HumanSize(layout->disk_size));

  // Other media come from the raw disk, so every one carries the same root.
  std::vector<std::string> outputs;
  auto wants = [&](Format f) { return std::find(formats.begin(), formats.end(), f) != formats.end(); };
  if (wants(Format::kRaw)) outputs.push_back(profile->name + ".raw");
  if (wants(Format::kIso) || wants(Format::kPxe)) {
    MediaInputs media{&*profile,  &plan,          seed,         work.path(),        root_img,
                      verity_img, kernel->second, initrd_bytes, bootloader->second, esp_files.back().data,
                      epoch};
    if (wants(Format::kIso)) {
      progress.Begin("write hybrid ISO");
      auto iso = MakeIso(media);
      if (!iso) return fail(iso.error());
      outputs.push_back(*iso);
      progress.End(HumanSize(fs::file_size(work.path() / *iso)));
    }
    if (wants(Format::kPxe)) {
      progress.Begin("write PXE bundle");
      auto pxe = MakePxe(media);
      if (!pxe) return fail(pxe.error());
      outputs.insert(outputs.end(), pxe->begin(), pxe->end());
      progress.End(HumanSize(fs::file_size(work.path() / "pxe" / "initrd.img")) + " initrd with the root inside");
    }
  }
  if (wants(Format::kQcow2)) {
    progress.Begin("convert to qcow2");
    fs::path qcow = work.path() / (profile->name + ".qcow2");
    if (auto r =
            RunChecked({{"qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", raw_tmp.string(), qcow.string()}});
        !r) {
      return fail("cannot write the qcow2 image: " + r.error());
    }
    outputs.push_back(qcow.filename().string());
    progress.End(HumanSize(fs::file_size(qcow)));
  }

  progress.Begin("write manifest, SBOM and checksums");
  auto status = summary->captured.find("var/lib/dpkg/status");
  std::vector<DebPackage> packages;
  if (status != summary->captured.end()) packages = ParseDpkgStatus(status->second);
  std::string sbom =
      SpdxJson(packages, profile->name, "https://sprout.invalid/spdx/" + profile->name + "/" + seed, epoch);
  if (auto w = WriteFileAtomic(work.path() / "sbom.spdx.json", sbom); !w) return fail(w.error());

  nlohmann::ordered_json manifest;
  manifest["sprout"] = SPROUT_VERSION;
  manifest["profile"] = nlohmann::json::parse(profile_json);
  manifest["base"] = base->id;
  manifest["kernel"] = kernel_version;
  manifest["seed"] = seed;
  manifest["rootHash"] = plan.root_hash;
  manifest["disk"] = {{"diskGuid", plan.disk_guid.ToString()},
                      {"rootPartUuid", plan.root_uuid.ToString()},
                      {"verityPartUuid", plan.verity_uuid.ToString()},
                      {"configPartUuid", plan.config_uuid.ToString()},
                      {"statePartUuid", plan.state_uuid.ToString()}};
  manifest["images"] = nlohmann::json::parse(oci::ImagesJson(*images));
  manifest["sbom"] = {
      {"file", "sbom.spdx.json"}, {"format", "SPDX-2.3"}, {"packages", packages.size()}, {"sha256", Sha256Hex(sbom)}};
  std::string sums;
  for (const auto& name : outputs) {
    auto digest = Sha256File(work.path() / name);
    if (!digest) return fail(digest.error());
    manifest["outputs"].push_back({{"file", name}, {"size", fs::file_size(work.path() / name)}, {"sha256", *digest}});
    sums += *digest + "  " + name + "\n";
  }
  auto sbom_digest = Sha256Hex(sbom);
  sums += sbom_digest + "  sbom.spdx.json\n";
  std::string manifest_text = manifest.dump(2) + "\n";
  sums += Sha256Hex(manifest_text) + "  manifest.json\n";
  if (auto w = WriteFileAtomic(work.path() / "manifest.json", manifest_text); !w) return fail(w.error());
  std::vector<std::string> published = outputs;
  published.insert(published.end(), {"sbom.spdx.json", "manifest.json"});
  if (!options.sign_key.empty()) {
    if (auto s = SignManifest(work.path(), options.sign_key); !s) return fail(s.error());
    auto sig = Sha256File(work.path() / "manifest.json.sig");
    if (!sig) return fail(sig.error());
    sums += *sig + "  manifest.json.sig\n";
    published.emplace_back("manifest.json.sig");
  }
  published.emplace_back("sha256sums");
  if (auto w = WriteFileAtomic(work.path() / "sha256sums", sums); !w) return fail(w.error());
  progress.End(std::to_string(packages.size()) + " packages in the SBOM");

  // Publish: each file is renamed into place; the checksums go last, so a reader that
  // sees them sees everything they list.
  if (auto s = Publish(work.path(), options.out_dir, published); !s) return fail(s.error());
  fs::path raw_out = options.out_dir / (profile->name + (wants(Format::kRaw) ? ".raw" : ".qcow2"));

  struct stat st {};
  std::uint64_t allocated = ::stat(raw_out.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_blocks) * 512 : 0;
  std::fprintf(stderr, "\nbuilt %s (%s, %s allocated on disk)\n", raw_out.c_str(), HumanSize(layout->disk_size).c_str(),
               HumanSize(allocated).c_str());
  for (const auto& name : published) {
    std::fprintf(stderr, "  %-24s %10s\n", name.c_str(), HumanSize(fs::file_size(options.out_dir / name)).c_str());
  }
  std::fprintf(stderr, "steps:\n%s", progress.Table().c_str());
  std::fprintf(stderr, "boot it: sprout boot %s --snapshot\n", raw_out.c_str());
  return 0;
}

}  // namespace sprout::cli
