// The steps of `sprout build`; build.cc runs them in order.
#include "builder/pipeline.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "builder/cluster.h"
#include "builder/images.h"
#include "builder/publish.h"
#include "fetch/fetch.h"
#include "image/arch.h"
#include "image/disk.h"
#include "image/fsimages.h"
#include "image/gpt.h"
#include "image/inputs.h"
#include "image/manifest.h"
#include "image/sbom.h"
#include "nodeconfig/nodeconfig.h"
#include "update/checks.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/sha256.h"
#include "util/sign.h"
#include "util/text.h"

namespace sprout::cli {

namespace {

namespace fs = std::filesystem;

fs::path SelfDir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : exe.parent_path();
}

// FirstbootBinary finds the sprout-firstboot that goes into an image of arch and checks
// that it is a program of that arch: for the host's arch $SPROUT_FIRSTBOOT, else the one
// beside sprout; for another arch $SPROUT_FIRSTBOOT_<ARCH>, else SELFDIR/<arch>/, where
// scripts/cross-firstboot puts its cross build (docs/arm64.md).
Result<fs::path> FirstbootBinary(Arch arch) {
  const bool native = arch == HostArch();
  std::string var = "SPROUT_FIRSTBOOT";
  if (!native) {
    var += "_";
    for (const char* c = ArchName(arch); *c; ++c)
      var += static_cast<char>(std::toupper(static_cast<unsigned char>(*c)));
  }
  const std::string build_hint = native ? "build it (cmake --build build)"
                                        : std::string("cross-build it with `scripts/cross-firstboot ") +
                                              ArchName(arch) + " " + SelfDir().string() + "`";
  fs::path path;
  if (const char* p = std::getenv(var.c_str()); p && *p) {
    path = p;
  } else {
    path = native ? SelfDir() / "sprout-firstboot" : SelfDir() / ArchName(arch) / "sprout-firstboot";
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      return Fail(std::string("cannot find the ") + ArchName(arch) + " sprout-firstboot at " + path.string() + "; " +
                  build_hint + " or set " + var + " to its path");
    }
  }
  auto elf = ElfArchOfFile(path);
  if (elf && *elf != arch) {
    return Fail(path.string() + " is an " + ArchName(*elf) + " program, but the image is " + ArchName(arch) + "; " +
                build_hint + " or set " + var + " to an " + ArchName(arch) + " build");
  }
  return path;
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

bool Wants(const BuildPlan& plan, Format f) {
  return std::find(plan.in.formats.begin(), plan.in.formats.end(), f) != plan.in.formats.end();
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

Result<BuildInputs> ResolveProfile(Profile profile, const BuildOptions& options) {
  if (auto fetched = FetchProfileFiles(profile, options.cache_dir); !fetched) return Fail(fetched.error());
  auto firstboot = FirstbootBinary(profile.arch);
  if (!firstboot) return Fail(firstboot.error());
  std::vector<Format> formats = options.formats.empty() ? profile.formats : options.formats;
  if (auto s = CheckFormats(profile.arch, formats); !s) return Fail(profile.file.string() + ": " + s.error());
  // A signed build carries its public key as the nodes' update trust root (docs/updates.md).
  std::string update_pub;
  if (!options.sign_key.empty()) {
    auto key = ReadFile(options.sign_key);
    if (!key) return Fail("cannot read the signing key: " + key.error());
    auto pub = PublicKeyOf(*key);
    if (!pub) return Fail(options.sign_key.string() + ": " + pub.error());
    update_pub = std::move(*pub);
    for (const auto& f : profile.files) {
      if (f.path == std::string("/") + update::kUpdateTrustRoot) {
        return Fail(profile.file.string() + ": the profile puts a file at /" + std::string(update::kUpdateTrustRoot) +
                    ", where --sign puts the signing key's public key; drop the file from the profile");
      }
    }
  }
  auto secure_boot = LoadSecureBootKeys(options.secure_boot_key, options.secure_boot_cert);
  if (!secure_boot) return Fail(secure_boot.error());
  if (secure_boot->on() && std::find(formats.begin(), formats.end(), Format::kPxe) != formats.end()) {
    return Fail(
        "--secure-boot-key with the pxe format: the PXE bundle's kernel takes its command line and root from the "
        "iPXE script and initrd, which nothing signs; build raw, iso and qcow2 for Secure Boot (--format raw,iso)");
  }
  return BuildInputs{std::move(profile), std::move(formats), *firstboot, std::move(update_pub),
                     std::move(*secure_boot)};
}

bool CompilesKubelet(const Profile& p) { return p.kubelet.present && !p.kubelet.recipe.empty(); }

Result<CompileLog> CompileHost(BuildInputs& in, const BuildOptions& options, const PhaseFn& watch) {
  return CompileKubelet(in.profile.kubelet, in.profile.arch, options.cache_dir, options.offline, watch);
}

Result<BuildPlan> PlanBuild(BuildInputs in, BaseRef base) {
  BuildPlan plan;
  plan.epoch = SourceDateEpoch(in.profile);
  Profile recorded = in.profile;
  recorded.source_date_epoch = plan.epoch;
  plan.profile_json = ProfileToJson(recorded);
  // The serial is an input like the epoch it defaults to: update.serial (or --serial,
  // which sets it) is in the recorded profile, so in the inputs and the seed.
  plan.identity = IdentityOfBuild(in.profile, plan.epoch);
  auto inputs = InputsJson(in.profile, plan.epoch, base.id, ContentDigest);
  if (!inputs) return Fail(inputs.error());
  plan.inputs_json = std::move(*inputs);
  if (!in.update_pub.empty()) {
    // The trust root is part of the root, so it is an input: by its digest.
    auto j = nlohmann::ordered_json::parse(plan.inputs_json);
    j["updateTrustRoot"] = Sha256Hex(in.update_pub);
    plan.inputs_json = j.dump(2);
  }
  if (in.workloads.present()) {
    // What the root gets of the workloads, by content: helm's output as checked and baked.
    auto j = nlohmann::ordered_json::parse(plan.inputs_json);
    j["workloadsBaked"] = in.workloads.baked.digest;
    plan.inputs_json = j.dump(2);
  }
  plan.seed = SeedOf(plan.inputs_json);
  plan.disk = PlanDisk(in.profile, plan.seed);
  plan.in = std::move(in);
  plan.base = std::move(base);
  return plan;
}

Result<std::vector<RootEntry>> RootAdditions(const BuildPlan& plan) {
  const Profile& p = plan.in.profile;
  std::vector<RootEntry> add;
  fs::path data = DataDir();
  std::vector<fs::path> overlays{data / "overlays" / "common", data / "overlays" / RoleName(p.role)};
  overlays.insert(overlays.end(), p.overlays.begin(), p.overlays.end());
  for (const auto& o : overlays) {
    std::error_code ec;
    if (!fs::is_directory(o, ec)) return Fail("overlay " + o.string() + " is missing; is SPROUT_DATA_DIR right?");
    if (auto s = AddTree(o, "", add); !s) return Fail(s.error());
  }
  add.push_back({RootEntry::Kind::kFile, "usr/lib/sprout/sprout-firstboot", "", plan.in.firstboot, 0755});
  add.push_back({RootEntry::Kind::kSymlink, "usr/bin/sprout-firstboot", "/usr/lib/sprout/sprout-firstboot", {}, 0777});
  // A unit of firstboot/, enabled by a link in TARGET.wants.
  const auto unit = [&](const std::string& name, const std::string& target) {
    const std::string path = "usr/lib/systemd/system/" + name;
    add.push_back({RootEntry::Kind::kFile, path, "", data / "firstboot" / name, 0644});
    add.push_back({RootEntry::Kind::kSymlink, "etc/systemd/system/" + target + ".wants/" + name, "/" + path, {}, 0777});
  };
  unit("sprout-firstboot.service", "multi-user.target");
  // In a VM, early: the TSC's rate checked against another clock (docs/design.md).
  unit("sprout-clock.service", "sysinit.target");
  add.push_back({RootEntry::Kind::kFile, "etc/fstab", plan.disk.fstab, {}, 0644});
  add.push_back({RootEntry::Kind::kFile, "etc/sprout/profile.json", plan.profile_json + "\n", {}, 0644});
  if (!plan.in.update_pub.empty()) {
    add.push_back({RootEntry::Kind::kFile, update::kUpdateTrustRoot, plan.in.update_pub, {}, 0644});
  }
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
  AddWorkloadFiles(plan.in.workloads, add);
  return add;
}

Result<RootContents> Preload(const BuildPlan& plan, const BuildOptions& options, std::vector<RootEntry> additions) {
  auto images = PreloadImages(plan.in.profile, options.cache_dir, options.offline, options.ca_bundle, additions);
  if (!images) return Fail(images.error());
  if (auto s = AddClusterRecord(plan.in.profile, *images, additions); !s) return Fail(s.error());
  return RootContents{std::move(additions), std::move(*images)};
}

Result<PackedRoot> PackRoot(const BuildPlan& plan, std::vector<RootEntry> additions, int jobs,
                            const ProgressFn& progress) {
  RootSpec spec;
  spec.base = plan.base.root;
  spec.additions = std::move(additions);
  spec.mtime = plan.epoch;
  spec.capture_prefixes = CapturedPaths(plan.in.profile.arch);
  fs::path image = plan.work / "root.squashfs";
  if (jobs <= 0) jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto packer = Pipe::Start(
      {{"tar2sqfs", "--quiet", "--force", "--no-skip", "--compressor", "zstd", "--num-jobs", std::to_string(jobs),
        "--defaults", "mode=0755,uid=0,gid=0,mtime=" + std::to_string(plan.epoch), image.string()}});
  if (!packer) return Fail(packer.error());
  auto summary = WriteRootTar(spec, packer->fd(), progress);
  auto packed = packer->Finish();
  // A packer that failed explains why the stream broke, so its message comes first.
  if (!packed) return Fail("packing the root failed: " + packed.error());
  if (!summary) return Fail(summary.error());
  return PackedRoot{image, fs::file_size(image), summary->entries, std::move(summary->captured)};
}

Result<VerityTree> BuildVerity(const BuildPlan& plan, const PackedRoot& root) {
  fs::path image = plan.work / "root.verity";
  auto root_hash = MakeVerityHash(root.image, image, plan.disk.verity_salt, plan.disk.verity_uuid_text);
  if (!root_hash) return Fail(root_hash.error());
  return VerityTree{image, fs::file_size(image), *root_hash};
}

Result<BootFiles> MakeInitrd(const BuildPlan& plan, const PackedRoot& root) {
  auto boot = FindBootFiles(root.captured, plan.in.profile.arch);
  if (!boot) return Fail(boot.error());
  if (KernelNeedsGunzip(boot->arch, boot->kernel)) {
    fs::path packed = plan.work / "vmlinuz.gz";
    fs::path unpacked = plan.work / "vmlinuz";
    if (auto s = WriteFileAtomic(packed, boot->kernel); !s) return Fail(s.error());
    Command gunzip{{"gzip", "-dc"}, {}};
    gunzip.stdin_file = packed.string();
    gunzip.stdout_file = unpacked.string();
    auto run = Run(gunzip);
    if (!run || run->exit_code != 0) return Fail("cannot decompress the kernel " + boot->kernel_version + " with gzip");
    auto kernel = ReadFile(unpacked);
    if (!kernel) return Fail(kernel.error());
    boot->kernel = std::move(*kernel);
    std::error_code ec;
    fs::remove(packed, ec);
    fs::remove(unpacked, ec);
  }
  std::vector<RootEntry> stages{{RootEntry::Kind::kDir, "sprout", "", {}, 0755}};
  // The two stages, and the functions they share (sourced, so not executable).
  for (const char* stage : {"local-top", "local-bottom", "functions"}) {
    fs::path script = DataDir() / "images" / "initrd" / stage;
    std::error_code ec;
    if (fs::exists(script, ec))
      stages.push_back({RootEntry::Kind::kFile, std::string("sprout/") + stage, "", script,
                        std::string_view(stage) == "functions" ? 0644u : 0755u});
  }
  auto cpio = MakeCpio(stages, plan.epoch);
  if (!cpio) return Fail(cpio.error());
  boot->initrd = AppendToInitrd(std::move(boot->initrd), *cpio);
  return std::move(*boot);
}

Result<Esp> MakeEsp(const BuildPlan& plan, const BootFiles& boot, const RootContents& contents) {
  const Profile& p = plan.in.profile;
  Esp esp{{plan.work / "esp.vfat", p.esp_size},
          ImageMetadata(plan.profile_json, plan.identity, plan.disk.root_hash, boot.kernel_version, plan.seed,
                        oci::ImagesJson(contents.images),
                        plan.in.workloads.present() ? plan.in.workloads.baked.index_json : "")};
  std::vector<EspFile> files;
  if (plan.in.secure_boot.on()) {
    auto signed_boot = SignedBoot(boot, plan.in.secure_boot, plan.disk.cmdline, "the disk's unified kernel image");
    if (!signed_boot) return Fail(signed_boot.error());
    files = EspFiles(*signed_boot, plan.disk.loader_conf,
                     UkiLoaderEntry("sprout " + p.name, kUkiPath, plan.disk.cmdline), esp.metadata);
  } else {
    files = EspFiles(boot, plan.disk.loader_conf, plan.disk.loader_entry, esp.metadata);
  }
  if (auto s = CheckEspSize(files, p.esp_size, p.file.string()); !s) return Fail(s.error());
  if (auto s =
          MakeFatImage(esp.fs.image, p.esp_size, plan.disk.esp_volume_id, "SPROUT-ESP", files, plan.epoch, plan.work);
      !s) {
    return Fail(s.error());
  }
  return esp;
}

Result<FsImage> MakeState(const BuildPlan& plan) {
  FsImage state{plan.work / "state.ext4", plan.in.profile.state_size};
  if (auto s = MakeExt4Image(state.image, state.size, plan.disk.state_fs_uuid, kStateLabel, plan.epoch); !s) {
    return Fail(s.error());
  }
  return state;
}

Result<RawDisk> WriteRaw(const BuildPlan& plan, const PackedRoot& root, const VerityTree& verity, const Esp& esp,
                         const FsImage& state) {
  const Profile& p = plan.in.profile;
  // "auto" leaves a quarter of headroom, so a later root fits the same A/B slots.
  std::uint64_t root_size = p.root_size ? p.root_size : root.bytes + root.bytes / 4;
  if (root_size < root.bytes) {
    return Fail("the root file system is " + HumanSize(root.bytes) + " but disk.rootSize is " + HumanSize(root_size) +
                "; raise disk.rootSize or set it to auto");
  }
  std::uint64_t verity_size = verity.bytes + verity.bytes / 4 + (1u << 20);
  auto layout =
      PlanGpt(plan.disk.disk_guid, PlanPartitions(plan.disk, p.esp_size, root_size, verity_size, p.state_size));
  if (!layout) return Fail(layout.error());
  RawDisk raw{plan.work / (p.name + ".raw"), layout->disk_size};
  // The config area starts with only a comment: an image holds no secret until it is
  // personalized (sprout personalize), flashed with settings, or booted with them.
  fs::path config = plan.work / "config.txt";
  if (auto s = WriteFileAtomic(config, RenderNodeConfig(NodeConfig{})); !s) return Fail(s.error());
  if (auto s = WriteRawDisk(*layout, {esp.fs.image, root.image, verity.image, {}, {}, config, state.image}, raw.image);
      !s) {
    return Fail(s.error());
  }
  return raw;
}

std::vector<std::string> KeptRaw(const BuildPlan& plan) {
  if (!Wants(plan, Format::kRaw)) return {};
  return {plan.in.profile.name + ".raw"};
}

MediaInputs LiveMedia(const BuildPlan& plan, const PackedRoot& root, const VerityTree& verity, const BootFiles& boot,
                      const Esp& esp) {
  return MediaInputs{&plan.in.profile, &plan.disk, plan.seed,    plan.work,  root.image,
                     verity.image,     &boot,      esp.metadata, plan.epoch, &plan.in.secure_boot};
}

Result<Medium> MakeMedium(BuildStep step, const MediaInputs& media, const RawDisk& raw) {
  Medium made{step, {}, 0};
  if (step == BuildStep::kIso) {
    auto iso = MakeIso(media);
    if (!iso) return Fail(iso.error());
    made.files = {*iso};
    made.shown_bytes = fs::file_size(media.work / *iso);
  } else if (step == BuildStep::kPxe) {
    auto pxe = MakePxe(media);
    if (!pxe) return Fail(pxe.error());
    made.files = *pxe;
    made.shown_bytes = fs::file_size(media.work / "pxe" / "initrd.img");
  } else if (step == BuildStep::kQcow2) {
    fs::path qcow = media.work / (media.profile->name + ".qcow2");
    if (auto r =
            RunChecked({{"qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", raw.image.string(), qcow.string()}});
        !r) {
      return Fail("cannot write the qcow2 image: " + r.error());
    }
    made.files = {qcow.filename().string()};
    made.shown_bytes = fs::file_size(qcow);
  } else {
    return Fail("internal error: '" + std::string(StepName(step)) + "' does not make a medium");
  }
  return made;
}

Result<Manifest> WriteManifest(const BuildPlan& plan, const BuildOptions& options,
                               const std::vector<std::string>& outputs, const PackedRoot& root, const BootFiles& boot,
                               const RootContents& contents) {
  const fs::path& work = plan.work;
  const Profile& p = plan.in.profile;
  auto status = root.captured.find(kDpkgStatusPath);
  std::vector<DebPackage> packages;
  if (status != root.captured.end()) packages = ParseDpkgStatus(status->second);
  // The Go modules of the kubelet recipe's binaries (the 1.36 stack, docs/stack.md).
  std::vector<GoModule> go_modules;
  if (std::error_code ec; !p.kubelet.folder.empty() && fs::exists(p.kubelet.folder / "modules.json", ec)) {
    auto text = ReadFile(p.kubelet.folder / "modules.json");
    if (!text) return Fail(text.error());
    auto parsed = ParseGoModules(*text);
    if (!parsed) return Fail((p.kubelet.folder / "modules.json").string() + ": " + parsed.error());
    go_modules = std::move(*parsed);
  }
  std::string sbom = SpdxJson(packages, p.name, SbomNamespace(p.name, plan.seed), plan.epoch, go_modules);
  if (auto w = WriteFileAtomic(work / "sbom.spdx.json", sbom); !w) return Fail(w.error());

  ManifestInputs m{plan.profile_json,
                   plan.identity,
                   plan.base.id,
                   boot.kernel_version,
                   plan.seed,
                   &plan.disk,
                   oci::ImagesJson(contents.images),
                   "sbom.spdx.json",
                   packages.size() + go_modules.size(),
                   Sha256Hex(sbom),
                   {},
                   plan.inputs_json};
  std::vector<SumLine> sums;
  for (const auto& name : outputs) {
    auto digest = Sha256File(work / name);
    if (!digest) return Fail(digest.error());
    // A raw disk records the data a sparse download of it takes: an updating node checks
    // its free space against that before it downloads (docs/updates.md).
    // Its map of data extents lets the node fetch only them (HTTP range requests).
    SparseMapOf map;
    if (name.ends_with(".raw")) {
      auto got = SparseMap(work / name);
      if (!got) return Fail(got.error());
      map = std::move(*got);
    }
    m.outputs.push_back({name, fs::file_size(work / name), *digest, map.data_bytes, std::move(map.extents)});
    sums.push_back({*digest, name});
  }
  sums.push_back({m.sbom_sha256, m.sbom_file});
  std::string manifest = ManifestJson(m);
  sums.push_back({Sha256Hex(manifest), "manifest.json"});
  if (auto w = WriteFileAtomic(work / "manifest.json", manifest); !w) return Fail(w.error());
  Manifest out{outputs, packages.size(), go_modules.size()};
  out.files.insert(out.files.end(), {"sbom.spdx.json", "manifest.json"});
  if (!options.sign_key.empty()) {
    if (auto s = SignManifest(work, options.sign_key); !s) return Fail(s.error());
    auto sig = Sha256File(work / "manifest.json.sig");
    if (!sig) return Fail(sig.error());
    sums.push_back({*sig, "manifest.json.sig"});
    out.files.emplace_back("manifest.json.sig");
  }
  // sha256sums goes last, so a reader that sees it sees everything it lists.
  out.files.emplace_back("sha256sums");
  if (auto w = WriteFileAtomic(work / "sha256sums", RenderSha256Sums(sums)); !w) return Fail(w.error());
  return out;
}

std::string Summary(const BuildInputs& in) { return in.profile.name; }

std::string Summary(const RootContents& contents) {
  const auto& images = contents.images;
  if (images.empty()) return "none in the profile";
  std::uint64_t bytes = 0;
  for (const auto& i : images) bytes += i.size;
  return std::to_string(images.size()) + (images.size() == 1 ? " image, " : " images, ") + HumanSize(bytes);
}

std::string Summary(const PackedRoot& root) {
  return HumanSize(root.bytes) + " squashfs from " + std::to_string(root.entries) + " entries";
}

std::string Summary(const VerityTree& verity) { return "root hash " + verity.root_hash.substr(0, 16) + "…"; }

std::string Summary(const Esp& esp) { return Summary(esp.fs); }

std::string Summary(const FsImage& image) { return HumanSize(image.size); }

std::string Summary(const RawDisk& raw) { return HumanSize(raw.size); }

std::string Summary(const Medium& medium) {
  return HumanSize(medium.shown_bytes) + (medium.step == BuildStep::kPxe ? " initrd with the root inside" : "");
}

std::string Summary(const Manifest& manifest) {
  return std::to_string(manifest.packages) + " packages" +
         (manifest.go_modules ? " and " + std::to_string(manifest.go_modules) + " Go modules" : "") + " in the SBOM";
}

}  // namespace sprout::cli

namespace sprout {

std::string Summary(const BaseRef& base) { return base.id; }

std::string Summary(const CompileLog& log) { return CompileSummary(log); }

std::string Summary(const BootFiles& boot) {
  return "kernel " + boot.kernel_version + ", " + HumanSize(boot.initrd.size());
}

}  // namespace sprout
