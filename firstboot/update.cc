#include "firstboot/update.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "fetch/fetch.h"
#include "image/gpt.h"
#include "image/plan.h"
#include "kube/api.h"
#include "kube/node_list.h"
#include "update/build.h"
#include "update/checks.h"
#include "update/entries.h"
#include "update/gpt_patch.h"
#include "update/health.h"
#include "update/plan.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/sha256.h"
#include "util/sign.h"
#include "util/text.h"

namespace sprout::firstboot {

namespace fs = std::filesystem;
using namespace sprout::update;

namespace {

constexpr const char* kLockFile = "/run/sprout-update.lock";

// Options are the update command's flags; the defaults are a real node's.
struct Options {
  std::string cmdline = "/proc/cmdline";
  std::string disk;                           // the disk holding the slots; default: the running root's disk
  std::string esp;                            // a folder holding the ESP's files; default: the disk's ESP, mounted
  std::string key;                            // trusted public key; default: the root's etc/sprout/update.pub
  std::string root = "/";                     // the running root, which holds the trust root
  std::string ca_file;                        // CA bundle for an https build server; default: the system's
  bool insecure_unsigned = false;             // accept a build nobody signed, on a node without a trust root
  bool allow_downgrade = false;               // accept a build older than the running one
  std::uint64_t min_free = kEtcdFloor;        // bytes the state partition keeps free during the update
  std::string state_dir = "/var/lib/sprout";  // where update.json records the slots
  int tries = 3;
  int timeout = 900;
  bool reboot = false;
};

// Fd is a file descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

Status ReadAt(int fd, std::uint64_t offset, std::vector<std::uint8_t>& out) {
  std::size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Fail(std::string("cannot read: ") + (n == 0 ? "short read" : std::strerror(errno)));
    done += static_cast<std::size_t>(n);
  }
  return Ok{};
}

Status WriteAt(int fd, std::uint64_t offset, const std::uint8_t* data, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Fail(std::string("cannot write: ") + std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
  return Ok{};
}

std::uint64_t SizeOf(int fd) {
  off_t end = ::lseek(fd, 0, SEEK_END);
  return end < 0 ? 0 : static_cast<std::uint64_t>(end);
}

Result<GptLayout> ReadGpt(const std::string& path) {
  Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0) return Fail("cannot open " + path + ": " + std::strerror(errno));
  std::vector<std::uint8_t> head(34 * kSectorSize);
  if (auto s = ReadAt(f.fd, 0, head); !s) return Fail(path + ": " + s.error());
  auto gpt = ParseGpt(head, SizeOf(f.fd));
  if (!gpt) return Fail(path + ": " + gpt.error());
  return gpt;
}

// WriteGptChanges patches both GPT copies of disk: the backup first, then the primary,
// each synced, so a cut between them leaves two valid tables.
Status WriteGptChanges(const std::string& disk, const std::vector<EntryChange>& changes) {
  Fd f(::open(disk.c_str(), O_RDWR | O_CLOEXEC));
  if (f.fd < 0) return Fail("cannot open " + disk + " for writing: " + std::strerror(errno));
  std::vector<std::uint8_t> primary(kSectorSize);
  if (auto s = ReadAt(f.fd, kSectorSize, primary); !s) return Fail(disk + ": " + s.error());
  auto place = ReadGptHeader(primary);
  if (!place) return Fail(disk + ": primary GPT: " + place.error());
  std::vector<std::uint8_t> backup(kSectorSize);
  if (auto s = ReadAt(f.fd, place->alternate_lba * kSectorSize, backup); !s) return Fail(disk + ": " + s.error());
  auto backup_place = ReadGptHeader(backup);
  if (!backup_place) return Fail(disk + ": backup GPT: " + backup_place.error());
  for (auto [header, where, lba] :
       {std::tuple{&backup, *backup_place, place->alternate_lba}, std::tuple{&primary, *place, std::uint64_t{1}}}) {
    std::vector<std::uint8_t> entries(where.entries_bytes);
    if (auto s = ReadAt(f.fd, where.entries_lba * kSectorSize, entries); !s) return Fail(disk + ": " + s.error());
    if (auto s = PatchGptCopy(*header, entries, changes); !s) return Fail(disk + ": " + s.error());
    if (auto s = WriteAt(f.fd, where.entries_lba * kSectorSize, entries.data(), entries.size()); !s) {
      return Fail(disk + ": " + s.error());
    }
    if (auto s = WriteAt(f.fd, lba * kSectorSize, header->data(), header->size()); !s) {
      return Fail(disk + ": " + s.error());
    }
    if (::fsync(f.fd) != 0) return Fail("cannot sync " + disk + ": " + std::strerror(errno));
  }
  return Ok{};
}

// CopyRange copies size bytes from src at from to dst at to, then syncs dst.
Status CopyRange(const std::string& src, std::uint64_t from, const std::string& dst, std::uint64_t to,
                 std::uint64_t size) {
  Fd in(::open(src.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.fd < 0) return Fail("cannot open " + src + ": " + std::strerror(errno));
  Fd out(::open(dst.c_str(), O_RDWR | O_CLOEXEC));
  if (out.fd < 0) return Fail("cannot open " + dst + " for writing: " + std::strerror(errno));
  std::vector<std::uint8_t> buf(4 << 20);
  for (std::uint64_t done = 0; done < size;) {
    buf.resize(static_cast<std::size_t>(std::min<std::uint64_t>(4 << 20, size - done)));
    if (auto s = ReadAt(in.fd, from + done, buf); !s) return Fail(src + ": " + s.error());
    if (auto s = WriteAt(out.fd, to + done, buf.data(), buf.size()); !s) return Fail(dst + ": " + s.error());
    done += buf.size();
  }
  if (::fdatasync(out.fd) != 0) return Fail("cannot sync " + dst + ": " + std::strerror(errno));
  return Ok{};
}

// Lock serializes update commands on this node (one ESP mount at a time).
struct Lock {
  int fd = -1;
  Lock() {
    fd = ::open(kLockFile, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) ::flock(fd, LOCK_EX);
  }
  ~Lock() {
    if (fd >= 0) ::close(fd);
  }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;
};

// Mount mounts a vfat file system (a device, or a range of an image through a loop
// device) on a fresh folder under /run, and unmounts it on scope exit.
class Mount {
 public:
  static Result<std::unique_ptr<Mount>> Vfat(const std::string& source, bool read_only, const std::string& loop_opts) {
    auto m = std::unique_ptr<Mount>(new Mount());
    m->dir_ = std::make_unique<TempDir>("/run", "sprout-esp");
    std::string opts = read_only ? "ro" : "rw";
    if (!loop_opts.empty()) opts += ",loop," + loop_opts;
    auto r = RunChecked({{"mount", "-t", "vfat", "-o", opts, source, m->dir_->path().string()}});
    if (!r) return Fail("cannot mount the ESP " + source + ": " + r.error());
    m->mounted_ = true;
    return m;
  }
  ~Mount() {
    if (!mounted_) return;
    ::sync();
    try {
      auto r = Run({{"umount", dir_->path().string()}});
      if (!r || r->exit_code != 0) dir_->Keep();  // never delete files of a still-mounted ESP
    } catch (...) {
      dir_->Keep();
    }
  }
  Mount(const Mount&) = delete;
  Mount& operator=(const Mount&) = delete;
  fs::path path() const { return dir_->path(); }

 private:
  Mount() = default;
  std::unique_ptr<TempDir> dir_;
  bool mounted_ = false;
};

// Node is what the commands read from this node: its command line, disk and ESP.
struct Node {
  std::string cmdline;
  std::string running_hash;
  std::string disk;
  GptLayout gpt;
  std::unique_ptr<Mount> esp_mount;
  fs::path esp;
  std::vector<Entry> entries;
};

std::string CmdlineValue(const std::string& cmdline, const std::string& key) {
  for (const auto& w : Split(std::string(Trim(cmdline)), ' ')) {
    if (w.starts_with(key)) return w.substr(key.size());
  }
  return "";
}

// DiskOf finds the whole disk holding a partition given as PARTUUID=...
Result<std::string> DiskOf(const std::string& spec) {
  if (!spec.starts_with("PARTUUID=")) return Fail("the kernel command line names no root PARTUUID");
  std::error_code ec;
  std::string uuid = spec.substr(9);
  for (char& c : uuid) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  fs::path part = fs::canonical("/dev/disk/by-partuuid/" + uuid, ec);
  if (ec) return Fail("the running root partition " + spec + " has no device: " + ec.message());
  fs::path sys = fs::canonical("/sys/class/block" / part.filename(), ec);
  if (ec) return Fail("no sysfs entry for " + part.string());
  return "/dev/" + sys.parent_path().filename().string();
}

std::vector<Entry> ReadEntries(const fs::path& esp) {
  std::vector<Entry> out;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(esp / "loader" / "entries", ec)) {
    auto name = ParseEntryName(d.path().filename().string());
    if (!name) continue;
    auto text = ReadFile(d.path());
    if (text) out.push_back({*name, *text});
  }
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.name.file < b.name.file; });
  return out;
}

Result<Node> OpenNode(const Options& o, bool writable_esp) {
  Node n;
  auto cmdline = ReadFile(o.cmdline);
  if (!cmdline) return Fail(cmdline.error());
  n.cmdline = *cmdline;
  n.running_hash = RootHashOfCmdline(n.cmdline);
  if (n.running_hash.empty()) {
    return Fail(o.cmdline + " has no sprout.roothash=; this is not a node booted from a sprout image");
  }
  if (!o.disk.empty()) {
    n.disk = o.disk;
  } else {
    auto disk = DiskOf(CmdlineValue(n.cmdline, "sprout.verity.data="));
    if (!disk) return Fail(disk.error());
    n.disk = *disk;
  }
  auto gpt = ReadGpt(n.disk);
  if (!gpt) return Fail(gpt.error());
  n.gpt = *gpt;
  if (!o.esp.empty()) {
    n.esp = o.esp;
  } else {
    const Partition* esp = nullptr;
    for (const auto& p : n.gpt.partitions) {
      if (p.spec.type == *Guid::Parse(dps::kEsp)) esp = &p;
    }
    if (!esp) return Fail(n.disk + " has no EFI system partition");
    auto m = Mount::Vfat("/dev/disk/by-partuuid/" + esp->spec.uuid.ToString(), !writable_esp, "");
    if (!m) return Fail(m.error());
    n.esp_mount = std::move(*m);
    n.esp = n.esp_mount->path();
  }
  n.entries = ReadEntries(n.esp);
  return n;
}

// RunningMetadata is the image.json (on the ESP) whose root hash is the running one:
// the running build's metadata; "" when there is none.
std::string RunningMetadata(const fs::path& esp, const std::string& running_hash) {
  for (const char* p : {"sprout/image.json", "sprout/a/image.json", "sprout/b/image.json"}) {
    auto text = ReadFile(esp / p);
    if (!text) continue;
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_object() && j.value("rootHash", "") == running_hash) return *text;
  }
  return "";
}

// RunningEtcd is the etcd version the running build preloads.
std::string RunningEtcd(const fs::path& esp, const std::string& running_hash) {
  auto j = nlohmann::json::parse(RunningMetadata(esp, running_hash), nullptr, false);
  return j.is_object() && j.contains("images") ? EtcdVersionOfImages(j["images"].dump()) : "";
}

// RunningTime is the running build's time (its profile's sourceDateEpoch).
std::optional<std::int64_t> RunningTime(const fs::path& esp, const std::string& running_hash) {
  return BuildTimeOf(RunningMetadata(esp, running_hash));
}

std::string StatusOf(const Node& n);

// Record keeps the slots as this command saw them in STATE/update.json, which
// `sprout-firstboot status` shows without mounting the ESP.
void Record(const Options& o, const std::string& by) {
  Options quiet = o;
  auto node = OpenNode(quiet, false);
  if (!node) return;
  nlohmann::ordered_json j;
  j["recordedBy"] = by;
  j["slots"] = StatusOf(*node);
  std::error_code ec;
  fs::create_directories(o.state_dir, ec);
  (void)WriteFileAtomic(fs::path(o.state_dir) / "update.json", j.dump(2) + "\n");
}

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void Step(const std::string& what, std::chrono::steady_clock::time_point t0) {
  std::printf("update: [%6.1f s] %s\n", Since(t0), what.c_str());
  std::fflush(stdout);
}

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

// Warn says something the operator must not miss: on stderr and in the journal.
void Warn(const std::string& what) {
  std::cerr << "sprout-firstboot update: " << what << "\n";
  ::openlog("sprout-firstboot", LOG_PID, LOG_USER);
  ::syslog(LOG_WARNING, "%s", what.c_str());
  ::closelog();
}

int Apply(const Options& o, const std::string& source) {
  const auto t0 = std::chrono::steady_clock::now();
  auto fail = [](const std::string& why) {
    std::cerr << "sprout-firstboot update: " << why << "\n";
    return 1;
  };
  if (source.empty()) {
    return fail("apply needs the build: sprout-firstboot update apply DIR or http(s)://HOST/PATH/");
  }
  Lock lock;
  // 0. The private folder in the state partition (emptied first: a download cut off by
  // a power cut is started again), readable by root alone.
  Fetched fetched;
  fetched.dir = fs::path(o.state_dir) / "update-download";
  std::error_code ec;
  fs::remove_all(fetched.dir, ec);
  fs::create_directories(fetched.dir, ec);
  if (ec) return fail("cannot create " + fetched.dir.string() + ": " + ec.message());
  fs::permissions(fetched.dir, fs::perms::owner_all, ec);

  // 1. Read and check the build, before its image: the manifest's line in sha256sums,
  // the signature against this node's trust root, then the sizes the manifest gives.
  auto files = ReadBuildFiles(o, source, fetched.dir);
  if (!files) return fail(files.error());
  auto build = ParseBuild(source, files->manifest, Sha256Hex(files->manifest), files->sums);
  if (!build) return fail(build.error());
  TrustInputs trust;
  trust.manifest = files->manifest;
  trust.signature = files->signature;
  trust.insecure_unsigned = o.insecure_unsigned;
  trust.source = source;
  trust.trusted_key_name = o.key.empty() ? (fs::path(o.root) / kUpdateTrustRoot).string() : o.key;
  if (!o.key.empty() || fs::exists(trust.trusted_key_name, ec)) {
    auto pub = ReadFile(trust.trusted_key_name);
    if (!pub) return fail("the trusted key: " + pub.error());
    trust.trusted_key = *pub;
  }
  auto verdict = CheckTrust(trust);
  if (!verdict) return fail(verdict.error());
  if (verdict->verified) {
    Step(verdict->note, t0);
  } else {
    Warn(verdict->note);
  }
  const std::string& raw_name = build->raw_file;
  if (raw_name.empty() || raw_name.find('/') != std::string::npos || raw_name[0] == '.') {
    return fail(source + "/manifest.json names the raw image '" + raw_name + "', which is not a plain file name");
  }
  if (build->raw_size == 0) return fail(source + "/manifest.json gives no size for " + raw_name);
  // The copy is sparse: it takes the image's data (recorded by the builder), or at most its size.
  const std::uint64_t need = build->raw_data_bytes != 0 ? build->raw_data_bytes : build->raw_size;
  auto room = FreeBytes(fetched.dir);
  if (!room) return fail(room.error());
  if (auto s = CheckRoom(*room, need, o.min_free, o.state_dir); !s) return fail(s.error());

  // 2. The private copy of the raw image, hashed on the way and bounded by the
  // manifest's sizes; everything after this reads that copy alone.
  const std::string raw = (fetched.dir / raw_name).string();
  DownloadOptions opts;
  opts.sparse = true;
  opts.max_bytes = build->raw_size;
  opts.max_data_bytes = build->raw_data_bytes;
  opts.ca_file = o.ca_file;
  const bool url = IsUrl(source);
  const std::string from =
      url ? (source.back() == '/' ? source : source + "/") + raw_name : (fs::path(source) / raw_name).string();
  Step(std::string(url ? "downloading " : "copying ") + from + " into " + fetched.dir.string() + " (" +
           HumanSize(need) + " of data; " + HumanSize(*room) + " free)",
       t0);
  auto got = url ? DownloadTo(from, raw, opts) : CopyTo(from, raw, opts);
  if (!got) {
    return fail(got.error() + "; the copy needs room for the image's data (its root, verity and ESP) in " +
                o.state_dir + ": free space there");
  }
  Step(std::string(url ? "downloaded " : "copied ") + std::to_string(got->bytes >> 20) + " MiB (" +
           std::to_string(got->data_bytes >> 20) + " MiB of data)",
       t0);
  if (got->sha256 != build->raw_sha256) {
    return fail(from + ": sha256 " + got->sha256 + " differs from the manifest's " + build->raw_sha256 +
                "; copy the build again");
  }
  Step("sha256 of manifest.json and " + raw_name + " checked", t0);

  // 3. The node: its slots and ESP.
  auto node = OpenNode(o, true);
  if (!node) return fail(node.error());

  // 4. The build's raw image (the private copy): its GPT, verity superblock and ESP.
  auto build_gpt = ReadGpt(raw);
  if (!build_gpt) return fail(build_gpt.error());
  auto build_slots = FindSlots(*build_gpt, build->root_hash);
  if (!build_slots) return fail(raw + ": " + build_slots.error());
  UpdateInputs in;
  {
    Fd f(::open(raw.c_str(), O_RDONLY | O_CLOEXEC));
    std::vector<std::uint8_t> sb(512);
    if (f.fd < 0 || !ReadAt(f.fd, build_slots->running.verity.offset(), sb)) return fail("cannot read " + raw);
    auto geometry = ParseVeritySuperblock(sb);
    if (!geometry) return fail(raw + ": " + geometry.error());
    in.build_verity = *geometry;
  }
  const Partition* build_esp = nullptr;
  for (const auto& p : build_gpt->partitions) {
    if (p.spec.type == *Guid::Parse(dps::kEsp)) build_esp = &p;
  }
  if (!build_esp) return fail(raw + " has no EFI system partition");
  auto esp_in = Mount::Vfat(
      raw, true, "offset=" + std::to_string(build_esp->offset()) + ",sizelimit=" + std::to_string(build_esp->size()));
  fs::path bes;
  std::unique_ptr<TempDir> extracted;
  if (esp_in) {
    bes = (*esp_in)->path();
  } else {
    // A kernel without vfat (a build host's VM): mtools reads the FAT image instead.
    extracted = std::make_unique<TempDir>(fs::temp_directory_path(), "sprout-update-esp");
    auto r = RunChecked({{"mcopy", "-s", "-n", "-i", raw + "@@" + std::to_string(build_esp->offset()), "::/loader",
                          "::/sprout", extracted->path().string()},
                         {{"MTOOLS_SKIP_CHECK", "1"}}});
    if (!r) return fail(esp_in.error() + "; mtools cannot read it either: " + r.error());
    bes = extracted->path();
  }
  auto kernel = ReadFile(bes / "sprout" / "vmlinuz");
  auto initrd = ReadFile(bes / "sprout" / "initrd.img");
  auto metadata = ReadFile(bes / "sprout" / "image.json");
  auto build_entries = ReadEntries(bes);
  if (!kernel || !initrd || !metadata || build_entries.size() != 1) {
    return fail(raw + ": its ESP lacks sprout/vmlinuz, sprout/initrd.img, sprout/image.json or its one loader entry");
  }

  // 5. Plan.
  in.cmdline = node->cmdline;
  in.disk = node->gpt;
  in.entries = node->entries;
  auto loader_conf = ReadFile(node->esp / "loader" / "loader.conf");
  in.loader_conf = loader_conf ? *loader_conf : std::string();
  in.running_etcd = RunningEtcd(node->esp, node->running_hash);
  in.running_time = RunningTime(node->esp, node->running_hash);
  in.allow_downgrade = o.allow_downgrade;
  in.build = *build;
  in.build_disk = *build_gpt;
  in.build_entry = build_entries.front().text;
  in.tries = o.tries;
  auto plan = PlanUpdate(in);
  if (!plan) return fail(plan.error());
  const Slot& target = plan->slots.inactive;
  Step(plan->downgrade_note, t0);
  Step("running slot " + std::string(1, plan->slots.running.letter) + " (root hash " +
           plan->running_hash.substr(0, 12) + "...), writing slot " + std::string(1, target.letter) + " (partitions " +
           std::to_string(target.root.entry + 1) + " and " + std::to_string(target.verity.entry + 1) + " of " +
           node->disk + ") with " + build->profile + " root hash " + build->root_hash.substr(0, 12) + "...; etcd " +
           (in.running_etcd.empty() ? "-" : in.running_etcd) + " -> " +
           (build->etcd_version.empty() ? "-" : build->etcd_version),
       t0);

  // 6. Write, in the order docs/updates.md gives.
  for (const auto& e : plan->remove_entries) {
    fs::remove(node->esp / "loader" / "entries" / e, ec);
    if (ec) return fail("cannot remove the stale entry " + e + ": " + ec.message());
    Step("removed the stale entry " + e, t0);
  }
  for (const auto& f : plan->remove_files) fs::remove(node->esp / f, ec);
  if (auto s = SyncPath(node->esp / "loader" / "entries"); !s) return fail(s.error());
  if (auto s = WriteGptChanges(node->disk, plan->mark_empty); !s) return fail(s.error());
  Step("slot " + std::string(1, target.letter) + " labelled _empty while it is written", t0);
  if (auto s = CopyRange(raw, plan->source_root_offset, node->disk, target.root.offset(), plan->copy.data_bytes); !s) {
    return fail(s.error());
  }
  if (auto s = CopyRange(raw, plan->source_verity_offset, node->disk, target.verity.offset(), plan->copy.hash_bytes);
      !s) {
    return fail(s.error());
  }
  Step("wrote the root (" + HumanSize(plan->copy.data_bytes) + ") and verity (" + HumanSize(plan->copy.hash_bytes) +
           ") of slot " + std::string(1, target.letter) + ", synced",
       t0);
  if (auto s = WriteGptChanges(node->disk, plan->mark_new); !s) return fail(s.error());
  Step("slot " + std::string(1, target.letter) + " labelled " + plan->mark_new[0].label + " with PARTUUID " +
           plan->mark_new[0].uuid.ToString(),
       t0);
  const fs::path kdir = node->esp / plan->kernel_dir;
  fs::create_directories(kdir, ec);
  for (auto [name, data] :
       {std::pair{"vmlinuz", &*kernel}, std::pair{"initrd.img", &*initrd}, std::pair{"image.json", &*metadata}}) {
    if (auto s = WriteFileAtomic(kdir / name, *data); !s) return fail(s.error());
  }
  if (auto s = SyncPath(node->esp / "sprout"); !s) return fail(s.error());
  Step("kernel and initrd written to /" + plan->kernel_dir, t0);
  if (auto s = WriteFileAtomic(node->esp / "loader" / "entries" / plan->entry_file, plan->entry_text); !s) {
    return fail(s.error());
  }
  Step("loader entry " + plan->entry_file + " written: the next boot tries slot " + std::string(1, target.letter) +
           " up to " + std::to_string(o.tries) + " times",
       t0);
  node->esp_mount.reset();
  if (esp_in) esp_in->reset();
  ::sync();
  Record(o, "update apply");
  if (o.reboot) {
    Step("rebooting", t0);
    auto r = Run({{"systemctl", "reboot"}});
    if (!r || r->exit_code != 0) return fail("systemctl reboot failed; reboot the node to try the new slot");
  }
  return 0;
}

// Bless renames the booted, counted entry to its committed name.
int Bless(const Options& o) {
  Lock lock;
  auto node = OpenNode(o, true);
  if (!node) {
    std::cerr << "sprout-firstboot update: " << node.error() << "\n";
    return 1;
  }
  auto booted = BootedEntry(node->entries, node->running_hash);
  if (!booted || !booted->name.counted) {
    std::cout << "update: the booted entry " << (booted ? booted->name.file : std::string("(none)"))
              << " has no boot counter; nothing to commit\n";
    return 0;
  }
  const fs::path dir = node->esp / "loader" / "entries";
  const std::string to = CommittedName(booted->name);
  std::error_code ec;
  fs::rename(dir / booted->name.file, dir / to, ec);
  if (ec) {
    std::cerr << "sprout-firstboot update: cannot commit " << booted->name.file << ": " << ec.message() << "\n";
    return 1;
  }
  if (auto s = SyncPath(dir); !s) std::cerr << "sprout-firstboot update: " << s.error() << "\n";
  node->esp_mount.reset();
  Record(o, "update bless");
  std::cout << "update: committed slot " << booted->name.slot << ": " << booted->name.file << " -> " << to << "\n";
  return 0;
}

std::string FirstbootStatusText() {
  auto r = Run({{"systemctl", "show", "-p", "StatusText", "--value", "sprout-firstboot.service"}});
  return r && r->exit_code == 0 ? std::string(Trim(r->output)) : std::string();
}

// KubeStaticPods are the static pods this node runs under a kubelet as part of the
// Kubernetes control plane (the manifests' names); empty on a node without one (the
// etcd-only podman host, a worker), whose gate is sprout-firstboot's status alone.
std::vector<std::string> KubeStaticPods() {
  std::error_code ec;
  std::vector<std::string> pods;
  if (!fs::exists("/usr/lib/sprout/kubelet/config.yaml", ec) || !fs::exists("/etc/kubernetes/admin.conf", ec)) {
    return pods;
  }
  for (const auto& e : fs::directory_iterator("/etc/kubernetes/manifests", ec)) {
    if (e.path().extension() == ".yaml") pods.push_back(e.path().stem().string());
  }
  std::sort(pods.begin(), pods.end());
  return pods;
}

// KubeProblem asks this node's apiserver (over loopback, as the cluster's admin) about
// its readiness, its Node and its mirror pods; "" when all are healthy.
std::string KubeProblem(const std::vector<std::string>& static_pods) {
  auto text = ReadFile("/etc/kubernetes/admin.conf");
  if (!text) return text.error();
  auto k = kube::ParseKubeconfig(*text);
  if (!k) return "/etc/kubernetes/admin.conf: " + k.error();
  k->server = "https://127.0.0.1:6443";
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string node = host;
  update::KubeView view;
  auto readyz = kube::ApiRequest(*k, "GET", "/readyz");
  if (!readyz) {
    view.readyz_body = readyz.error();
  } else {
    view.readyz_status = readyz->status;
    view.readyz_body = readyz->body;
  }
  if (view.readyz_status == 200) {
    auto nodes = kube::ApiRequest(*k, "GET", "/api/v1/nodes?fieldSelector=metadata.name%3D" + node);
    if (nodes && nodes->status == 200) {
      if (auto list = kube::ParseNodeList(nodes->body); list && !list->empty()) {
        view.node_listed = true;
        view.node_ready = list->front().ready;
      }
    }
    auto pods =
        kube::ApiRequest(*k, "GET", "/api/v1/namespaces/kube-system/pods?fieldSelector=spec.nodeName%3D" + node);
    if (pods && pods->status == 200) {
      if (auto list = update::ParsePodList(pods->body)) view.pods = *list;
    }
  }
  return update::KubeHealthProblem(node, static_pods, view);
}

// EfiBootCounted says whether systemd-boot booted an entry with a boot counter (its
// LoaderBootCountPath variable); nullopt when the EFI variables do not say (no efivarfs,
// or not booted by systemd-boot).
std::optional<bool> EfiBootCounted() {
  const fs::path vars = "/sys/firmware/efi/efivars";
  const std::string vendor = "-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f";  // systemd-boot's loader variables
  std::error_code ec;
  if (!fs::exists(vars / ("LoaderInfo" + vendor), ec)) return std::nullopt;
  return fs::exists(vars / ("LoaderBootCountPath" + vendor), ec);
}

// Gate succeeds at once on an entry without a counter; on a trial it waits until
// sprout-firstboot reports the node healthy, and fails after the timeout. A boot it
// cannot judge (the disk or ESP unreadable) fails, unless it cannot be a trial
// (UnreadableBoot).
int Gate(const Options& o) {
  std::optional<Entry> booted;
  {
    Lock lock;
    // The ESP may not be mountable the moment this boot reaches the gate; a few tries.
    auto node = OpenNode(o, false);
    for (int attempt = 1; !node && attempt < 3; ++attempt) {
      std::this_thread::sleep_for(std::chrono::seconds(5));
      node = OpenNode(o, false);
    }
    if (!node) {
      auto cmdline = ReadFile(o.cmdline);
      const GateVerdict v = UnreadableBoot(cmdline ? *cmdline : "", EfiBootCounted(), node.error());
      std::cout << "update: " << v.message << "\n";
      return v.pass ? 0 : 1;
    }
    booted = BootedEntry(node->entries, node->running_hash);
  }
  {
    Lock lock;
    Record(o, "update gate");
  }
  if (!booted || !booted->name.counted) {
    std::cout << "update: the booted entry is committed; no health gate\n";
    return 0;
  }
  std::cout << "update: slot " << booted->name.slot << " on trial (" << booted->name.file << "); waiting up to "
            << o.timeout << " s for sprout-firstboot to report this node healthy\n"
            << std::flush;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout);
  const auto static_pods = KubeStaticPods();
  std::string last;
  std::string kube_problem;
  bool member = false;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!member) {
      last = FirstbootStatusText();
      member = HealthyStatus(last);
      if (member && !static_pods.empty()) {
        std::cout << "update: sprout-firstboot: " << last << "; now waiting for the Kubernetes side ("
                  << Join(static_pods, ", ") << ", the kubelet)\n"
                  << std::flush;
      }
    }
    if (member) {
      kube_problem = static_pods.empty() ? "" : KubeProblem(static_pods);
      if (kube_problem.empty()) {
        std::cout << "update: healthy (sprout-firstboot: " << last
                  << (static_pods.empty() ? ""
                                          : "; the apiserver is ready, the Node is Ready, its static pods are Ready")
                  << "); the boot may complete\n";
        return 0;
      }
    }
    std::this_thread::sleep_for(std::chrono::seconds(5));
  }
  std::cout << "update: slot " << booted->name.slot << " not healthy after " << o.timeout
            << " s (sprout-firstboot: " << (last.empty() ? "-" : last)
            << (kube_problem.empty() ? "" : "; " + kube_problem) << "); failing the boot\n";
  return 1;
}

std::string StatusOf(const Node& n) {
  std::ostringstream out;
  auto booted = BootedEntry(n.entries, n.running_hash);
  auto running = SlotOfHash(n.gpt, n.running_hash);
  out << "slots (" << n.disk << "):\n";
  const auto types = DiskRootTypes(n.gpt);
  const Guid root_t = types ? types->root : Guid();
  char letter = 'a';
  for (const auto& p : n.gpt.partitions) {
    if (!(p.spec.type == root_t)) continue;
    out << "  " << letter << ": partition " << (p.entry + 1) << " " << p.spec.label << " "
        << (running && *running == letter ? "(booted)" : "") << "\n";
    for (const auto& e : n.entries) {
      auto slot = SlotOfHash(n.gpt, EntryRootHash(e.text));
      if (e.name.slot != letter) continue;
      out << "     entry " << e.name.file << ": " << DescribeState(e.name)
          << (slot ? "" : " (its root is no longer on the disk)")
          << (booted && booted->name.file == e.name.file ? ", booted" : "") << "\n";
    }
    ++letter;
  }
  out << "booted: root hash " << n.running_hash.substr(0, 12) << "..., entry "
      << (booted ? booted->name.file + " (" + DescribeState(booted->name) + ")" : std::string("unknown")) << "\n";
  return out.str();
}

int Status(const Options& o) {
  Lock lock;
  auto node = OpenNode(o, false);
  if (!node) {
    std::cerr << "sprout-firstboot update: " << node.error() << "\n";
    return 1;
  }
  std::cout << StatusOf(*node);
  node->esp_mount.reset();
  Record(o, "update status");
  return 0;
}

}  // namespace

std::string SlotStatusText(const std::string& state_dir) {
  auto text = ReadFile(fs::path(state_dir) / "update.json");
  if (!text) return "";
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object()) return "";
  return j.value("slots", "") + "  (as seen by `sprout-firstboot " + j.value("recordedBy", "?") +
         "`; `sprout-firstboot update status` reads the disk now)\n";
}

int UpdateMain(int argc, char** argv) {
  cxxopts::Options options("sprout-firstboot update", "A/B updates of this node (docs/updates.md).\n");
  options.add_options()("command", "apply | status | gate | bless", cxxopts::value<std::string>())(
      "source", "apply: the build: a folder or an http(s) URL holding manifest.json, sha256sums and the raw image",
      cxxopts::value<std::string>()->default_value(""))(
      "key",
      "apply: trusted Ed25519 public key (default: the node's trust root /etc/sprout/update.pub, which an image "
      "built with sprout build --sign carries)",
      cxxopts::value<std::string>()->default_value(""))(
      "insecure-unsigned",
      "apply: on a node without a trust root, install a build without checking who made it (logged as a warning)")(
      "allow-downgrade", "apply: install a build older than the running one (by its recorded build time)")(
      "min-free", "apply: bytes the state partition must keep free for etcd while the build is copied there",
      cxxopts::value<std::uint64_t>()->default_value(std::to_string(kEtcdFloor)))(
      "ca-file", "apply: CA bundle (PEM) an https build server's certificate must chain to (default: the system's)",
      cxxopts::value<std::string>()->default_value(""))(
      "root", "apply: the running root file system, which holds the trust root etc/sprout/update.pub",
      cxxopts::value<std::string>()->default_value("/"))("reboot", "apply: reboot into the new slot at the end")(
      "tries", "apply: boots the new slot gets before it falls back", cxxopts::value<int>()->default_value("3"))(
      "timeout", "gate: seconds to wait for health", cxxopts::value<int>()->default_value("900"))(
      "cmdline", "the kernel command line file", cxxopts::value<std::string>()->default_value("/proc/cmdline"))(
      "disk", "the disk with the slots (default: the running root's disk)",
      cxxopts::value<std::string>()->default_value(""))(
      "esp", "a folder with the ESP's files (default: the disk's ESP, mounted)",
      cxxopts::value<std::string>()->default_value(""))(
      "state-dir", "where update.json records the slots for `sprout-firstboot status`",
      cxxopts::value<std::string>()->default_value("/var/lib/sprout"))("h,help", "show this help");
  options.parse_positional({"command", "source"});
  options.positional_help("apply DIR|URL | status | gate | bless");
  cxxopts::ParseResult args;
  try {
    args = options.parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "sprout-firstboot update: " << e.what() << "\n" << options.help();
    return 2;
  }
  if (args.count("help") || !args.count("command")) {
    std::cout << options.help();
    return args.count("help") ? 0 : 2;
  }
  Options o;
  o.cmdline = args["cmdline"].as<std::string>();
  o.disk = args["disk"].as<std::string>();
  o.esp = args["esp"].as<std::string>();
  o.state_dir = args["state-dir"].as<std::string>();
  o.key = args["key"].as<std::string>();
  o.root = args["root"].as<std::string>();
  o.ca_file = args["ca-file"].as<std::string>();
  o.insecure_unsigned = args.count("insecure-unsigned") > 0;
  o.allow_downgrade = args.count("allow-downgrade") > 0;
  o.min_free = args["min-free"].as<std::uint64_t>();
  o.tries = args["tries"].as<int>();
  o.timeout = args["timeout"].as<int>();
  o.reboot = args.count("reboot") > 0;
  const std::string command = args["command"].as<std::string>();
  if (o.tries < 1 || o.tries > 9) {
    std::cerr << "sprout-firstboot update: --tries must be 1 to 9\n";
    return 2;
  }
  if (command == "apply") return Apply(o, args["source"].as<std::string>());
  if (command == "status") return Status(o);
  if (command == "gate") return Gate(o);
  if (command == "bless") return Bless(o);
  std::cerr << "sprout-firstboot update: unknown command '" << command << "'; use apply, status, gate or bless\n";
  return 2;
}

}  // namespace sprout::firstboot
