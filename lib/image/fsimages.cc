#include "image/fsimages.h"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>

#include "util/fs.h"
#include "util/process.h"

namespace sprout {

namespace fs = std::filesystem;

Status MakeFatImage(const fs::path& out, std::uint64_t size, std::uint32_t volume_id, const std::string& label,
                    const std::vector<EspFile>& files, std::int64_t mtime, const fs::path& workdir) {
  std::error_code ec;
  fs::remove(out, ec);
  char volid[16];
  std::snprintf(volid, sizeof volid, "%08x", volume_id);
  std::map<std::string, std::string> env{
      {"SOURCE_DATE_EPOCH", std::to_string(mtime)}, {"MTOOLS_SKIP_CHECK", "1"}, {"TZ", "UTC"}};
  if (auto r = RunChecked({{"mkfs.fat", "-C", "-F", "32", "-n", label, "-i", volid, "--invariant", out.string(),
                            std::to_string(size / 1024)},
                           env});
      !r) {
    return Fail("cannot make the ESP file system: " + r.error());
  }
  // Directories first (sorted, parents before children), then files in sorted order.
  std::set<std::string> dirs;
  for (const auto& f : files) {
    for (std::size_t s = f.path.find('/'); s != std::string::npos; s = f.path.find('/', s + 1)) {
      dirs.insert(f.path.substr(0, s));
    }
  }
  for (const auto& d : dirs) {
    if (auto r = RunChecked({{"mmd", "-i", out.string(), "::/" + d}, env}); !r) {
      return Fail("cannot make " + d + " on the ESP: " + r.error());
    }
  }
  std::vector<EspFile> sorted = files;
  std::sort(sorted.begin(), sorted.end(), [](const EspFile& a, const EspFile& b) { return a.path < b.path; });
  fs::create_directories(workdir);
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    fs::path staged = workdir / ("esp-" + std::to_string(i));
    if (auto s = WriteFileAtomic(staged, sorted[i].data); !s) return s;
    // mcopy -m keeps the source's modification time, which we fix here.
    fs::last_write_time(staged,
                        fs::file_time_type::clock::from_sys(std::chrono::sys_seconds(std::chrono::seconds(mtime))), ec);
    if (ec) return Fail("cannot set the time of " + staged.string() + ": " + ec.message());
    if (auto r = RunChecked({{"mcopy", "-m", "-o", "-i", out.string(), staged.string(), "::/" + sorted[i].path}, env});
        !r) {
      return Fail("cannot copy " + sorted[i].path + " onto the ESP: " + r.error());
    }
    fs::remove(staged, ec);
  }
  return Ok{};
}

Status MakeExt4Image(const fs::path& out, std::uint64_t size, const std::string& uuid, const std::string& label,
                     std::int64_t mtime) {
  std::error_code ec;
  fs::remove(out, ec);
  Command cmd{{"mke2fs", "-q", "-F", "-t", "ext4", "-L", label, "-U", uuid, "-E",
               "hash_seed=" + uuid + ",root_owner=0:0,lazy_itable_init=0,nodiscard", "-I", "256", "-b", "4096",
               out.string(), std::to_string(size / 1024) + "k"},
              {{"E2FSPROGS_FAKE_TIME", std::to_string(mtime)}, {"MKE2FS_DETERMINISTIC", "1"}}};
  if (auto r = RunChecked(cmd); !r) return Fail("cannot make the state file system: " + r.error());
  return Ok{};
}

Result<std::string> MakeCpio(const std::vector<RootEntry>& entries, std::int64_t mtime) {
  std::string out;
  std::unique_ptr<struct archive, int (*)(struct archive*)> a(archive_write_new(), archive_write_free);
  archive_write_set_format_cpio_newc(a.get());
  archive_write_set_bytes_per_block(a.get(), 0);
  auto writer = [](struct archive*, void* client, const void* buf, size_t n) -> la_ssize_t {
    static_cast<std::string*>(client)->append(static_cast<const char*>(buf), n);
    return static_cast<la_ssize_t>(n);
  };
  if (archive_write_open(a.get(), &out, nullptr, writer, nullptr) != ARCHIVE_OK) {
    return Fail(std::string("cannot start a cpio archive: ") + archive_error_string(a.get()));
  }
  std::vector<RootEntry> sorted = entries;
  std::sort(sorted.begin(), sorted.end(), [](const RootEntry& x, const RootEntry& y) { return x.path < y.path; });
  la_int64_t ino = 1;
  for (const auto& e : sorted) {
    std::unique_ptr<struct archive_entry, void (*)(struct archive_entry*)> ae(archive_entry_new(), archive_entry_free);
    archive_entry_set_pathname(ae.get(), e.path.c_str());
    archive_entry_set_mtime(ae.get(), mtime, 0);
    archive_entry_set_ino(ae.get(), ino++);
    archive_entry_set_uid(ae.get(), 0);
    archive_entry_set_gid(ae.get(), 0);
    std::string data = e.data;
    if (e.kind == RootEntry::Kind::kFile && !e.source.empty()) {
      auto r = ReadFile(e.source);
      if (!r) return Fail(r.error());
      data = std::move(*r);
    }
    switch (e.kind) {
      case RootEntry::Kind::kDir:
        archive_entry_set_filetype(ae.get(), AE_IFDIR);
        archive_entry_set_perm(ae.get(), e.mode);
        archive_entry_set_nlink(ae.get(), 2);
        archive_entry_set_size(ae.get(), 0);
        data.clear();
        break;
      case RootEntry::Kind::kSymlink:
        archive_entry_set_filetype(ae.get(), AE_IFLNK);
        archive_entry_set_perm(ae.get(), 0777);
        archive_entry_set_symlink(ae.get(), e.data.c_str());
        archive_entry_set_size(ae.get(), 0);
        data.clear();
        break;
      case RootEntry::Kind::kFile:
        archive_entry_set_filetype(ae.get(), AE_IFREG);
        archive_entry_set_perm(ae.get(), e.mode);
        archive_entry_set_nlink(ae.get(), 1);
        archive_entry_set_size(ae.get(), static_cast<la_int64_t>(data.size()));
        break;
    }
    if (archive_write_header(a.get(), ae.get()) != ARCHIVE_OK ||
        (!data.empty() && archive_write_data(a.get(), data.data(), data.size()) < 0)) {
      return Fail("cannot add " + e.path + " to the cpio archive: " + archive_error_string(a.get()));
    }
  }
  if (archive_write_close(a.get()) != ARCHIVE_OK) {
    return Fail(std::string("cannot finish the cpio archive: ") + archive_error_string(a.get()));
  }
  return out;
}

}  // namespace sprout

namespace sprout {

Result<std::string> MakeVerityHash(const fs::path& data, const fs::path& hash_out, const std::string& salt_hex,
                                   const std::string& uuid) {
  std::error_code ec;
  fs::remove(hash_out, ec);
  auto out = RunChecked({{"veritysetup", "format", "--hash=sha256", "--data-block-size=4096", "--hash-block-size=4096",
                          "--salt=" + salt_hex, "--uuid=" + uuid, data.string(), hash_out.string()}});
  if (!out) return Fail("cannot build the verity hash tree: " + out.error());
  // veritysetup prints "Root hash:      <hex>".
  auto pos = out->find("Root hash:");
  if (pos == std::string::npos) return Fail("veritysetup did not print a root hash:\n" + *out);
  std::string rest = out->substr(pos + 10);
  std::size_t start = rest.find_first_not_of(" \t");
  std::size_t end = rest.find_first_of(" \t\r\n", start);
  std::string hash = rest.substr(start, end - start);
  if (hash.size() != 64) return Fail("veritysetup printed an unexpected root hash '" + hash + "'");
  return hash;
}

}  // namespace sprout
