#include "firstboot/update_node.h"

#include <fcntl.h>
#include <sys/file.h>
#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "image/disk_file.h"
#include "image/plan.h"
#include "update/build.h"
#include "update/checks.h"
#include "util/json_field.h"
#include "util/process.h"
#include "util/text.h"

namespace sprout::firstboot::update_cmd {

using namespace sprout::update;

namespace {

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

// RunningMetadata is the image.json (on the ESP) whose root hash is the running one:
// the running build's metadata; "" when there is none.
std::string RunningMetadata(const fs::path& esp, const std::string& running_hash) {
  for (const char* p : {"sprout/image.json", "sprout/a/image.json", "sprout/b/image.json"}) {
    auto text = ReadFile(esp / p);
    if (!text) continue;
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (JsonString(j, "rootHash").value_or("") == running_hash) return *text;
  }
  return "";
}

}  // namespace

Lock::Lock() {
  fd_ = ::open(kLockFile, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ >= 0) ::flock(fd_, LOCK_EX);
}

Lock::~Lock() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<Mount>> Mount::Vfat(const std::string& source, bool read_only, const std::string& loop_opts) {
  auto m = std::unique_ptr<Mount>(new Mount());
  m->dir_ = std::make_unique<TempDir>("/run", "sprout-esp");
  std::string opts = read_only ? "ro" : "rw";
  if (!loop_opts.empty()) opts += ",loop," + loop_opts;
  auto r = RunChecked({{"mount", "-t", "vfat", "-o", opts, source, m->dir_->path().string()}});
  if (!r) return Fail("cannot mount the ESP " + source + ": " + r.error());
  m->mounted_ = true;
  return m;
}

Mount::~Mount() {
  if (!mounted_) return;
  ::sync();
  try {
    auto r = Run({{"umount", dir_->path().string()}});
    if (!r || r->exit_code != 0) dir_->Keep();  // never delete files of a still-mounted ESP
  } catch (...) {
    dir_->Keep();
  }
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
    auto found = DiskOf(CmdlineValue(n.cmdline, "sprout.verity.data="));
    if (!found) return Fail(found.error());
    n.disk = *found;
  }
  auto disk = DiskFile::Open(n.disk, false);
  if (!disk) return Fail(disk.error());
  auto gpt = disk->Gpt();
  if (!gpt) return Fail(gpt.error());
  n.gpt = *gpt;
  if (!o.esp.empty()) {
    n.esp = o.esp;
  } else {
    const Partition* esp = FindPartitionByType(n.gpt.partitions, *Guid::Parse(dps::kEsp));
    if (!esp) return Fail(n.disk + " has no EFI system partition");
    auto m = Mount::Vfat("/dev/disk/by-partuuid/" + esp->spec.uuid.ToString(), !writable_esp, "");
    if (!m) return Fail(m.error());
    n.esp_mount = std::move(*m);
    n.esp = n.esp_mount->path();
  }
  n.entries = ReadEntries(n.esp);
  return n;
}

// RunningEtcd is the etcd version the running build preloads.
std::string RunningEtcd(const fs::path& esp, const std::string& running_hash) {
  auto j = nlohmann::json::parse(RunningMetadata(esp, running_hash), nullptr, false);
  return j.is_object() && j.contains("images") ? EtcdVersionOfImages(j["images"].dump()) : "";
}

Result<RecordedIdentity> RunningIdentity(const fs::path& esp, const std::string& running_hash) {
  const std::string text = RunningMetadata(esp, running_hash);
  if (text.empty()) return RecordedIdentity{};
  return ReadIdentity(text, "the running build's image.json on the ESP");
}

Status WriteGptChanges(const std::string& path, const std::vector<EntryChange>& changes) {
  auto disk = DiskFile::Open(path, true);
  if (!disk) return Fail(disk.error());
  auto primary = disk->Read(kSectorSize, kSectorSize);
  if (!primary) return Fail(primary.error());
  auto place = ReadGptHeader(*primary);
  if (!place) return Fail(path + ": primary GPT: " + place.error());
  auto backup = disk->Read(place->alternate_lba * kSectorSize, kSectorSize);
  if (!backup) return Fail(backup.error());
  auto backup_place = ReadGptHeader(*backup);
  if (!backup_place) return Fail(path + ": backup GPT: " + backup_place.error());
  for (auto [header, where, lba] :
       {std::tuple{&*backup, *backup_place, place->alternate_lba}, std::tuple{&*primary, *place, std::uint64_t{1}}}) {
    auto entries = disk->Read(where.entries_lba * kSectorSize, where.entries_bytes);
    if (!entries) return Fail(entries.error());
    if (auto s = PatchGptCopy(*header, *entries, changes); !s) return Fail(path + ": " + s.error());
    if (auto s = disk->Write(where.entries_lba * kSectorSize, *entries); !s) return s;
    if (auto s = disk->Write(lba * kSectorSize, *header); !s) return s;
    if (auto s = disk->Sync(); !s) return s;
  }
  return Ok{};
}

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

void Step(const std::string& what, std::chrono::steady_clock::time_point t0) {
  const double since = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("update: [%6.1f s] %s\n", since, what.c_str());
  std::fflush(stdout);
}

void Warn(const std::string& what) {
  std::cerr << "sprout-firstboot update: " << what << "\n";
  ::openlog("sprout-firstboot", LOG_PID, LOG_USER);
  ::syslog(LOG_WARNING, "%s", what.c_str());
  ::closelog();
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

int ShowStatus(const Options& o) {
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

}  // namespace sprout::firstboot::update_cmd
