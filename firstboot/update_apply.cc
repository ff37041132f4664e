// `sprout-firstboot update apply` as named steps, as `sprout build` runs its own
// (docs/updates.md): verify the build's small files, fetch the private copy of its raw
// image, read that image, plan (pure: update::PlanUpdate), write the slot, write the
// boot entry, report. Each step takes plain inputs and returns its result; Apply only
// runs them in order and stops at the first refusal.
#include <fcntl.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>

#include "fetch/fetch.h"
#include "firstboot/update_node.h"
#include "image/boot_files.h"
#include "image/disk_file.h"
#include "image/plan.h"
#include "update/build.h"
#include "update/checks.h"
#include "update/identity.h"
#include "util/process.h"
#include "util/sha256.h"
#include "util/sign.h"
#include "util/text.h"

namespace sprout::firstboot::update_cmd {

using namespace sprout::update;
using Clock = std::chrono::steady_clock;

namespace {

bool IsUrl(const std::string& source) { return source.rfind("http://", 0) == 0 || source.rfind("https://", 0) == 0; }

// Fetched is the private copy of a build in the state partition: the raw image,
// downloaded or copied from the folder and hashed on the way, so every later step reads
// only the bytes that were checked. Its folder is removed when the update ends,
// whatever the outcome.
struct Fetched {
  fs::path dir;
  Fetched() = default;
  Fetched(const Fetched&) = delete;
  Fetched& operator=(const Fetched&) = delete;
  ~Fetched() {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
};

// BuildFiles are a build's small files, read once into memory and checked there.
struct BuildFiles {
  std::string manifest, sums;
  std::optional<std::string> signature;
};

bool NotFound(const std::string& error) { return error.ends_with("(not found)"); }

// ReadBuildFiles reads manifest.json, sha256sums and manifest.json.sig (missing means
// unsigned) of a build folder or URL. Downloads are bounded, since nothing in them is
// checked yet.
Result<BuildFiles> ReadBuildFiles(const Options& o, const std::string& source, const fs::path& scratch) {
  BuildFiles f;
  const bool url = IsUrl(source);
  const std::string base = url ? (source.back() == '/' ? source : source + "/") : source;
  auto read = [&](const char* name, std::uint64_t limit) -> Result<std::string> {
    if (!url) return ReadFile(fs::path(source) / name);
    DownloadOptions opts;
    opts.max_bytes = limit;
    opts.ca_file = o.ca_file;
    if (auto got = DownloadTo(base + name, scratch / name, opts); !got) return Fail(got.error());
    return ReadFile(scratch / name);
  };
  auto manifest = read("manifest.json", 16 << 20);
  if (!manifest) return Fail(manifest.error() + "; is " + source + " a sprout build?");
  auto sums = read("sha256sums", 1 << 20);
  if (!sums) return Fail(sums.error());
  std::error_code ec;
  if (url || fs::exists(fs::path(source) / "manifest.json.sig", ec)) {
    auto sig = read("manifest.json.sig", 4096);
    if (sig) {
      f.signature = *sig;
    } else if (!NotFound(sig.error())) {
      return Fail(sig.error());
    }
  }
  f.manifest = std::move(*manifest);
  f.sums = std::move(*sums);
  return f;
}

Result<std::uint64_t> FreeBytes(const fs::path& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0)
    return Fail("cannot stat the file system of " + dir.string() + ": " + std::strerror(errno));
  return static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
}

// VerifiedBuild is a build whose small files passed every check, and the room its raw
// image's private copy needs.
struct VerifiedBuild {
  BuildInfo build;
  std::uint64_t need = 0;  // bytes of data the copy takes (the builder's count, or the image's size)
  std::uint64_t room = 0;  // bytes free where it goes
};

// RunningBuild is the running build's identity, read from its image.json on the ESP
// (mounted read-only for the moment), so that the serial and identity rules refuse a
// build before its image is fetched. A damaged record counts as unknown, which the rules
// refuse unless their flags are given.
Result<RecordedIdentity> RunningBuild(const Options& o) {
  auto node = OpenNode(o, false);
  if (!node) return Fail(node.error());
  auto id = RunningIdentity(node->esp, node->running_hash);
  if (id) return *id;
  Warn(id.error() + "; the running build's serial, profile and role count as unknown");
  return RecordedIdentity{};
}

// Verify reads the build's small files once and checks them before anything large is
// fetched: the manifest's line in sha256sums, the signature against this node's trust
// root, the serial and the profile, role and cluster against the running build's, the
// raw image's name and sizes, and the room for its copy above the etcd floor.
Result<VerifiedBuild> Verify(const Options& o, const std::string& source, const RecordedIdentity& running,
                             const fs::path& dir, Clock::time_point t0) {
  auto files = ReadBuildFiles(o, source, dir);
  if (!files) return Fail(files.error());
  auto build = ParseBuild(source, files->manifest, Sha256Hex(files->manifest), files->sums);
  if (!build) return Fail(build.error());
  TrustInputs trust;
  trust.manifest = files->manifest;
  trust.signature = files->signature;
  trust.insecure_unsigned = o.insecure_unsigned;
  trust.source = source;
  trust.trusted_key_name = o.key.empty() ? (fs::path(o.root) / kUpdateTrustRoot).string() : o.key;
  std::error_code ec;
  if (!o.key.empty() || fs::exists(trust.trusted_key_name, ec)) {
    auto pub = ReadFile(trust.trusted_key_name);
    if (!pub) return Fail("the trusted key: " + pub.error());
    trust.trusted_key = *pub;
  }
  auto verdict = CheckTrust(trust);
  if (!verdict) return Fail(verdict.error());
  if (verdict->verified) {
    Step(verdict->note, t0);
  } else {
    Warn(verdict->note);
  }
  auto identity = CheckIdentityRules(running, build->identity, o.allow_downgrade, o.allow_cross_profile);
  if (!identity) return Fail(identity.error());
  Step(identity->nodes, t0);
  Step(identity->serial, t0);
  const std::string& raw_name = build->raw_file;
  if (raw_name.empty() || raw_name.find('/') != std::string::npos || raw_name[0] == '.') {
    return Fail(source + "/manifest.json names the raw image '" + raw_name + "', which is not a plain file name");
  }
  if (build->raw_size == 0) return Fail(source + "/manifest.json gives no size for " + raw_name);
  if (auto s =
          CheckExtents(build->raw_extents, build->raw_size, source + "/manifest.json: the dataExtents of " + raw_name);
      !s) {
    return Fail(s.error() + "; build it again with sprout build");
  }
  VerifiedBuild v;
  // The copy is sparse: it takes the image's data (recorded by the builder), or at most its size.
  v.need = build->raw_data_bytes != 0 ? build->raw_data_bytes : build->raw_size;
  auto room = FreeBytes(dir);
  if (!room) return Fail(room.error());
  if (auto s = CheckRoom(*room, v.need, o.min_free, o.state_dir); !s) return Fail(s.error());
  v.room = *room;
  v.build = std::move(*build);
  return v;
}

// Fetch takes the private copy of the raw image into dir, hashed on the way and bounded
// by the manifest's sizes, and checks its sha256; every later step reads that copy alone.
Result<std::string> Fetch(const Options& o, const std::string& source, const VerifiedBuild& v, const fs::path& dir,
                          Clock::time_point t0) {
  const BuildInfo& build = v.build;
  const std::string raw = (dir / build.raw_file).string();
  DownloadOptions opts;
  opts.sparse = true;
  opts.max_bytes = build.raw_size;
  opts.max_data_bytes = build.raw_data_bytes;
  opts.ca_file = o.ca_file;
  const bool url = IsUrl(source);
  // Over HTTP only the extents that hold data are fetched, when the manifest maps them.
  if (url) opts.extents = build.raw_extents;
  const std::string from = url ? (source.back() == '/' ? source : source + "/") + build.raw_file
                               : (fs::path(source) / build.raw_file).string();
  Step(std::string(url ? "downloading " : "copying ") + from + " into " + dir.string() + " (" + HumanSize(v.need) +
           " of data; " + HumanSize(v.room) + " free)",
       t0);
  auto got = url ? DownloadTo(from, raw, opts) : CopyTo(from, raw, opts);
  if (!got) {
    return Fail(got.error() + "; the copy needs room for the image's data (its root, verity and ESP) in " +
                o.state_dir + ": free space there");
  }
  if (got->ranges != 0) {
    Step("downloaded " + std::to_string(got->fetched >> 20) + " MiB in " + std::to_string(got->ranges) +
             " range requests, the extents of the " + std::to_string(got->bytes >> 20) + " MiB image that hold data (" +
             std::to_string(got->data_bytes >> 20) + " MiB of data)",
         t0);
  } else {
    Step(std::string(url ? "downloaded " : "copied ") + std::to_string(got->bytes >> 20) + " MiB (" +
             std::to_string(got->data_bytes >> 20) + " MiB of data)" +
             (url && !build.raw_extents.empty() ? ", whole: the server does not answer range requests" : ""),
         t0);
  }
  if (got->sha256 != build.raw_sha256) {
    return Fail(from + ": sha256 " + got->sha256 + " differs from the manifest's " + build.raw_sha256 +
                "; copy the build again");
  }
  Step("sha256 of manifest.json and " + build.raw_file + " checked", t0);
  return raw;
}

// BuildImage is what the later steps need of the build's raw image.
struct BuildImage {
  GptLayout gpt;
  VerityGeometry verity;  // its slot a's verity superblock
  std::string kernel, initrd, metadata;
  std::string uki;    // a Secure Boot build's signed unified kernel image (then no kernel and initrd)
  std::string entry;  // its one loader entry's text
};

// ReadBuildImage reads the copy's GPT, its verity superblock and the boot files on its
// ESP (mounted through a loop device, or read with mtools where the kernel has no vfat).
Result<BuildImage> ReadBuildImage(const std::string& raw, const BuildInfo& build) {
  BuildImage image;
  auto disk = DiskFile::Open(raw, false);
  if (!disk) return Fail(disk.error());
  auto gpt = disk->Gpt();
  if (!gpt) return Fail(gpt.error());
  image.gpt = *gpt;
  auto slots = FindSlots(image.gpt, build.root_hash);
  if (!slots) return Fail(raw + ": " + slots.error());
  auto sb = ReadPartition(*disk, slots->running.verity, 0, 512);
  if (!sb) return Fail(sb.error());
  auto geometry = ParseVeritySuperblock(*sb);
  if (!geometry) return Fail(raw + ": " + geometry.error());
  image.verity = *geometry;
  const Partition* esp = FindPartitionByType(image.gpt.partitions, *Guid::Parse(dps::kEsp));
  if (!esp) return Fail(raw + " has no EFI system partition");
  auto mounted =
      Mount::Vfat(raw, true, "offset=" + std::to_string(esp->offset()) + ",sizelimit=" + std::to_string(esp->size()));
  fs::path files;
  std::unique_ptr<TempDir> extracted;
  if (mounted) {
    files = (*mounted)->path();
  } else {
    // A kernel without vfat (a build host's VM): mtools reads the FAT image instead.
    extracted = std::make_unique<TempDir>(fs::temp_directory_path(), "sprout-update-esp");
    auto r = RunChecked({{"mcopy", "-s", "-n", "-i", raw + "@@" + std::to_string(esp->offset()), "::/loader",
                          "::/sprout", extracted->path().string()},
                         {{"MTOOLS_SKIP_CHECK", "1"}}});
    if (!r) return Fail(mounted.error() + "; mtools cannot read it either: " + r.error());
    files = extracted->path();
  }
  auto metadata = ReadFile(files / "sprout" / "image.json");
  auto entries = ReadEntries(files);
  std::error_code ec;
  if (fs::exists(files / kUkiPath, ec)) {
    // A Secure Boot build: one signed file, copied as it is (a node cannot re-sign it).
    // Its command line names the state and config partitions by name, so it fits this
    // node; its key unlocks through the signed PCR policy it carries (docs/secure-boot.md).
    auto uki = ReadFile(files / kUkiPath);
    if (!uki || !metadata || entries.size() != 1) {
      return Fail(raw + ": its ESP lacks " + kUkiPath + ", sprout/image.json or its one loader entry");
    }
    image.uki = std::move(*uki);
  } else {
    auto kernel = ReadFile(files / "sprout" / "vmlinuz");
    auto initrd = ReadFile(files / "sprout" / "initrd.img");
    if (!kernel || !initrd || !metadata || entries.size() != 1) {
      return Fail(raw + ": its ESP lacks sprout/vmlinuz, sprout/initrd.img, sprout/image.json or its one loader entry");
    }
    image.kernel = std::move(*kernel);
    image.initrd = std::move(*initrd);
  }
  image.metadata = std::move(*metadata);
  image.entry = entries.front().text;
  return image;
}

// Plan gathers the node's and the build's facts for the pure planner and says what it
// will write.
Result<UpdatePlan> Plan(const Options& o, const Node& node, const RecordedIdentity& running, const BuildInfo& build,
                        const BuildImage& image, Clock::time_point t0) {
  UpdateInputs in;
  in.cmdline = node.cmdline;
  in.disk = node.gpt;
  in.entries = node.entries;
  auto loader_conf = ReadFile(node.esp / "loader" / "loader.conf");
  in.loader_conf = loader_conf ? *loader_conf : std::string();
  in.running_etcd = RunningEtcd(node.esp, node.running_hash);
  in.running = running;  // as Verify checked it (RunningBuild)
  in.allow_downgrade = o.allow_downgrade;
  in.allow_cross_profile = o.allow_cross_profile;
  in.build = build;
  in.build_disk = image.gpt;
  in.build_verity = image.verity;
  in.build_entry = image.entry;
  in.tries = o.tries;
  auto plan = PlanUpdate(in);
  if (!plan) return Fail(plan.error());
  const Slot& target = plan->slots.inactive;
  Step("running slot " + std::string(1, plan->slots.running.letter) + " (root hash " +
           plan->running_hash.substr(0, 12) + "...), writing slot " + std::string(1, target.letter) + " (partitions " +
           std::to_string(target.root.entry + 1) + " and " + std::to_string(target.verity.entry + 1) + " of " +
           node.disk + ") with " + build.profile + " root hash " + build.root_hash.substr(0, 12) + "...; etcd " +
           (in.running_etcd.empty() ? "-" : in.running_etcd) + " -> " +
           (build.etcd_version.empty() ? "-" : build.etcd_version),
       t0);
  return plan;
}

// WriteSlot writes the inactive slot in the order docs/updates.md gives: the stale
// entries go, the slot is labelled _empty, its root and verity are copied and synced,
// then it gets its new PARTUUIDs and label.
Status WriteSlot(const Node& node, const std::string& raw, const UpdatePlan& plan, Clock::time_point t0) {
  const char letter = plan.slots.inactive.letter;
  std::error_code ec;
  for (const auto& e : plan.remove_entries) {
    fs::remove(node.esp / "loader" / "entries" / e, ec);
    if (ec) return Fail("cannot remove the stale entry " + e + ": " + ec.message());
    Step("removed the stale entry " + e, t0);
  }
  for (const auto& f : plan.remove_files) fs::remove(node.esp / f, ec);
  if (auto s = SyncPath(node.esp / "loader" / "entries"); !s) return s;
  if (auto s = WriteGptChanges(node.disk, plan.mark_empty); !s) return s;
  Step("slot " + std::string(1, letter) + " labelled _empty while it is written", t0);
  auto src = DiskFile::Open(raw, false);
  if (!src) return Fail(src.error());
  auto dst = DiskFile::Open(node.disk, true);
  if (!dst) return Fail(dst.error());
  const Slot& target = plan.slots.inactive;
  if (auto s = CopyRange(*src, plan.source_root_offset, *dst, target.root.offset(), plan.copy.data_bytes); !s) return s;
  if (auto s = CopyRange(*src, plan.source_verity_offset, *dst, target.verity.offset(), plan.copy.hash_bytes); !s) {
    return s;
  }
  Step("wrote the root (" + HumanSize(plan.copy.data_bytes) + ") and verity (" + HumanSize(plan.copy.hash_bytes) +
           ") of slot " + std::string(1, letter) + ", synced",
       t0);
  if (auto s = WriteGptChanges(node.disk, plan.mark_new); !s) return s;
  Step("slot " + std::string(1, letter) + " labelled " + plan.mark_new[0].label + " with PARTUUID " +
           plan.mark_new[0].uuid.ToString(),
       t0);
  return Ok{};
}

// WriteBootEntry writes the build's kernel, initrd and metadata for the slot, then the
// loader entry that makes the next boot try it.
Status WriteBootEntry(const Node& node, const UpdatePlan& plan, const BuildImage& image, int tries,
                      Clock::time_point t0) {
  const fs::path kdir = node.esp / plan.kernel_dir;
  std::error_code ec;
  fs::create_directories(kdir, ec);
  std::vector<std::pair<const char*, const std::string*>> files;
  if (image.uki.empty()) {
    files = {{"vmlinuz", &image.kernel}, {"initrd.img", &image.initrd}};
  } else {
    files = {{kUkiFile, &image.uki}};
  }
  files.emplace_back("image.json", &image.metadata);
  for (auto [name, data] : files) {
    if (auto s = WriteFileAtomic(kdir / name, *data); !s) return s;
  }
  if (auto s = SyncPath(node.esp / "sprout"); !s) return s;
  Step(std::string(image.uki.empty() ? "kernel and initrd" : "signed unified kernel image") + " written to /" +
           plan.kernel_dir,
       t0);
  if (auto s = WriteFileAtomic(node.esp / "loader" / "entries" / plan.entry_file, plan.entry_text); !s) return s;
  Step("loader entry " + plan.entry_file + " written: the next boot tries slot " +
           std::string(1, plan.slots.inactive.letter) + " up to " + std::to_string(tries) + " times",
       t0);
  return Ok{};
}

// Report records the slots for `sprout-firstboot status`, and reboots when asked.
Status Report(const Options& o, Clock::time_point t0) {
  ::sync();
  Record(o, "update apply");
  if (!o.reboot) return Ok{};
  Step("rebooting", t0);
  auto r = Run({{"systemctl", "reboot"}});
  if (!r || r->exit_code != 0) return Fail("systemctl reboot failed; reboot the node to try the new slot");
  return Ok{};
}

}  // namespace

int Apply(const Options& o, const std::string& source) {
  const auto t0 = Clock::now();
  auto fail = [](const std::string& why) {
    std::cerr << "sprout-firstboot update: " << why << "\n";
    return 1;
  };
  if (source.empty()) {
    return fail("apply needs the build: sprout-firstboot update apply DIR or http(s)://HOST/PATH/");
  }
  Lock lock;
  // The private folder in the state partition, readable by root alone (emptied first: a
  // download cut off by a power cut is started again).
  Fetched fetched;
  fetched.dir = fs::path(o.state_dir) / "update-download";
  std::error_code ec;
  fs::remove_all(fetched.dir, ec);
  fs::create_directories(fetched.dir, ec);
  if (ec) return fail("cannot create " + fetched.dir.string() + ": " + ec.message());
  fs::permissions(fetched.dir, fs::perms::owner_all, ec);

  auto running = RunningBuild(o);
  if (!running) return fail(running.error());
  auto verified = Verify(o, source, *running, fetched.dir, t0);
  if (!verified) return fail(verified.error());
  auto raw = Fetch(o, source, *verified, fetched.dir, t0);
  if (!raw) return fail(raw.error());
  auto node = OpenNode(o, true);
  if (!node) return fail(node.error());
  auto image = ReadBuildImage(*raw, verified->build);
  if (!image) return fail(image.error());
  auto plan = Plan(o, *node, *running, verified->build, *image, t0);
  if (!plan) return fail(plan.error());
  if (auto s = WriteSlot(*node, *raw, *plan, t0); !s) return fail(s.error());
  if (auto s = WriteBootEntry(*node, *plan, *image, o.tries, t0); !s) return fail(s.error());
  node->esp_mount.reset();
  if (auto s = Report(o, t0); !s) return fail(s.error());
  return 0;
}

}  // namespace sprout::firstboot::update_cmd
