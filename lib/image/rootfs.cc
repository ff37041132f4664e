#include "image/rootfs.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>

#include "util/fs.h"

namespace sprout {

namespace {

using ArchivePtr = std::unique_ptr<struct archive, int (*)(struct archive*)>;
using EntryPtr = std::unique_ptr<struct archive_entry, void (*)(struct archive_entry*)>;

// Normalize strips "./" and "/" prefixes and trailing slashes: "./etc/" -> "etc".
std::string Normalize(std::string p) {
  while (p.starts_with("./")) p.erase(0, 2);
  while (p.starts_with("/")) p.erase(0, 1);
  while (!p.empty() && p.back() == '/') p.pop_back();
  if (p == ".") p.clear();
  return p;
}

std::string Relocate(const std::string& p, bool relocate_var) {
  if (!relocate_var) return p;
  if (p == "var") return "usr/share/factory/var";
  if (p.starts_with("var/")) return "usr/share/factory/" + p;
  return p;
}

// Writer wraps the output archive and the rules every entry follows.
class Writer {
 public:
  Writer(int fd, std::int64_t mtime) : a_(archive_write_new(), archive_write_free), mtime_(mtime) {
    archive_write_set_format_pax_restricted(a_.get());
    archive_write_set_bytes_per_block(a_.get(), 10240);
    ok_ = archive_write_open_fd(a_.get(), fd) == ARCHIVE_OK;
  }

  bool ok() const { return ok_; }

  Status Header(struct archive_entry* e) {
    archive_entry_set_mtime(e, mtime_, 0);
    archive_entry_unset_atime(e);
    archive_entry_unset_ctime(e);
    archive_entry_unset_birthtime(e);
    archive_entry_set_uname(e, nullptr);
    archive_entry_set_gname(e, nullptr);
    if (archive_write_header(a_.get(), e) != ARCHIVE_OK) {
      return Fail(std::string("cannot write root entry ") + archive_entry_pathname(e) + ": " +
                  archive_error_string(a_.get()));
    }
    ++entries_;
    return Ok{};
  }

  Status Data(const void* data, std::size_t size) {
    if (size == 0) return Ok{};
    if (archive_write_data(a_.get(), data, size) < 0) {
      return Fail(std::string("cannot write root data: ") + archive_error_string(a_.get()));
    }
    bytes_ += size;
    return Ok{};
  }

  Status Close() {
    if (archive_write_close(a_.get()) != ARCHIVE_OK) {
      return Fail(std::string("cannot finish the root archive: ") + archive_error_string(a_.get()));
    }
    return Ok{};
  }

  std::uint64_t entries() const { return entries_; }
  std::uint64_t bytes() const { return bytes_; }

 private:
  ArchivePtr a_;
  std::int64_t mtime_;
  bool ok_ = false;
  std::uint64_t entries_ = 0, bytes_ = 0;
};

// KeepSupportedXattrs drops POSIX ACLs and xattr namespaces squashfs cannot store;
// file capabilities (security.*) and user.* attributes stay.
void KeepSupportedXattrs(struct archive_entry* e) {
  archive_entry_acl_clear(e);
  std::vector<std::pair<std::string, std::string>> keep;
  const char* name = nullptr;
  const void* value = nullptr;
  std::size_t size = 0;
  archive_entry_xattr_reset(e);
  while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
    std::string n = name;
    if (n.starts_with("security.") || n.starts_with("user.") || n.starts_with("trusted.")) {
      keep.emplace_back(n, std::string(static_cast<const char*>(value), size));
    }
  }
  archive_entry_xattr_clear(e);
  for (const auto& [n, v] : keep) archive_entry_xattr_add_entry(e, n.c_str(), v.data(), v.size());
}

// EnsureParents writes a 0755 directory for every parent of path not yet written.
Status EnsureParents(Writer& w, const std::string& path, std::set<std::string>& dirs) {
  for (std::size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    std::string parent = path.substr(0, slash);
    if (dirs.count(parent)) continue;
    EntryPtr d(archive_entry_new(), archive_entry_free);
    archive_entry_set_pathname(d.get(), parent.c_str());
    archive_entry_set_filetype(d.get(), AE_IFDIR);
    archive_entry_set_perm(d.get(), 0755);
    if (auto s = w.Header(d.get()); !s) return s;
    dirs.insert(parent);
  }
  return Ok{};
}

bool Captured(const RootSpec& spec, const std::string& path) {
  return std::any_of(spec.capture_prefixes.begin(), spec.capture_prefixes.end(),
                     [&](const std::string& p) { return path.starts_with(p); });
}

// CopyBaseTar streams the base tarball's entries, skipping paths the additions replace.
Status CopyBaseTar(const RootSpec& spec, const std::set<std::string>& replaced, Writer& w,
                   std::set<std::string>& base_dirs, RootSummary& summary, const ProgressFn& progress) {
  ArchivePtr in(archive_read_new(), archive_read_free);
  archive_read_support_filter_all(in.get());
  archive_read_support_format_tar(in.get());
  archive_read_support_format_gnutar(in.get());
  if (archive_read_open_filename(in.get(), spec.base.c_str(), 1 << 20) != ARCHIVE_OK) {
    return Fail("cannot read base " + spec.base.string() + ": " + archive_error_string(in.get()));
  }
  std::error_code ec;
  std::uint64_t total = std::filesystem::file_size(spec.base, ec);
  if (ec) total = 0;
  bool factory_made = false;
  std::vector<char> buf(1 << 20);
  struct archive_entry* e = nullptr;
  for (;;) {
    int r = archive_read_next_header(in.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) {
      return Fail("cannot read base " + spec.base.string() + ": " + archive_error_string(in.get()));
    }
    std::string path = Normalize(archive_entry_pathname(e));
    if (path.empty()) continue;  // the root directory's attributes are the packer's defaults
    std::string original = path;
    path = Relocate(path, spec.relocate_var);
    if (replaced.count(path)) continue;
    if (spec.relocate_var && path != original && !factory_made) {
      // The factory tree needs its parents before its first entry.
      if (auto s = EnsureParents(w, "usr/share/factory/var", base_dirs); !s) return s;
      factory_made = true;
    }
    EntryPtr out(archive_entry_clone(e), archive_entry_free);
    archive_entry_set_pathname(out.get(), path.c_str());
    KeepSupportedXattrs(out.get());
    if (const char* hl = archive_entry_hardlink(e)) {
      archive_entry_set_hardlink(out.get(), Relocate(Normalize(hl), spec.relocate_var).c_str());
    }
    if (archive_entry_filetype(e) == AE_IFDIR) base_dirs.insert(path);
    if (auto s = w.Header(out.get()); !s) return s;
    bool keep = archive_entry_filetype(e) == AE_IFREG && Captured(spec, original);
    std::string kept;
    for (;;) {
      la_ssize_t n = archive_read_data(in.get(), buf.data(), buf.size());
      if (n < 0) return Fail("cannot read " + original + " from base: " + archive_error_string(in.get()));
      if (n == 0) break;
      if (auto s = w.Data(buf.data(), static_cast<std::size_t>(n)); !s) return s;
      if (keep) kept.append(buf.data(), static_cast<std::size_t>(n));
    }
    if (keep) summary.captured[original] = std::move(kept);
    if (progress) {
      la_int64_t pos = archive_filter_bytes(in.get(), -1);
      progress(static_cast<std::uint64_t>(pos), total);
    }
    // The var directory itself stays, empty, as the mount point of the state partition.
    if (spec.relocate_var && original == "var") {
      EntryPtr v(archive_entry_new(), archive_entry_free);
      archive_entry_set_pathname(v.get(), "var");
      archive_entry_set_filetype(v.get(), AE_IFDIR);
      archive_entry_set_perm(v.get(), 0755);
      if (auto s = w.Header(v.get()); !s) return s;
      base_dirs.insert("var");
    }
  }
  return Ok{};
}

// CopyBaseDir walks a base directory in sorted order, as CopyBaseTar does for a tarball.
Status CopyBaseDir(const RootSpec& spec, const std::set<std::string>& replaced, Writer& w,
                   std::set<std::string>& base_dirs, RootSummary& summary) {
  std::vector<RootEntry> entries;
  if (auto s = AddTree(spec.base, "", entries); !s) return s;
  bool factory_made = false;
  for (const auto& re : entries) {
    std::string path = Relocate(re.path, spec.relocate_var);
    if (replaced.count(path)) continue;
    std::filesystem::path host = spec.base / re.path;
    struct stat st {};
    if (::lstat(host.c_str(), &st) != 0) return Fail("cannot stat " + host.string() + ": " + std::strerror(errno));
    if (spec.relocate_var && path != re.path && !factory_made) {
      if (auto s = EnsureParents(w, "usr/share/factory/var", base_dirs); !s) return s;
      factory_made = true;
    }
    EntryPtr e(archive_entry_new(), archive_entry_free);
    archive_entry_copy_stat(e.get(), &st);
    archive_entry_set_pathname(e.get(), path.c_str());
    archive_entry_set_nlink(e.get(), 1);
    archive_entry_set_ino(e.get(), 0);
    archive_entry_set_dev(e.get(), 0);
    if (re.kind == RootEntry::Kind::kSymlink) archive_entry_set_symlink(e.get(), re.data.c_str());
    if (re.kind == RootEntry::Kind::kDir) base_dirs.insert(path);
    if (auto s = w.Header(e.get()); !s) return s;
    if (re.kind == RootEntry::Kind::kFile) {
      auto data = ReadFile(host);
      if (!data) return Fail(data.error());
      if (auto s = w.Data(data->data(), data->size()); !s) return s;
      if (Captured(spec, re.path)) summary.captured[re.path] = *data;
    }
    if (spec.relocate_var && re.path == "var") {
      EntryPtr v(archive_entry_new(), archive_entry_free);
      archive_entry_set_pathname(v.get(), "var");
      archive_entry_set_filetype(v.get(), AE_IFDIR);
      archive_entry_set_perm(v.get(), 0755);
      if (auto s = w.Header(v.get()); !s) return s;
    }
  }
  return Ok{};
}

}  // namespace

Status AddTree(const std::filesystem::path& dir, const std::string& prefix, std::vector<RootEntry>& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> children;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    children.push_back(it->path());
  }
  if (ec) return Fail("cannot list " + dir.string() + ": " + ec.message());
  std::sort(children.begin(), children.end());
  for (const auto& child : children) {
    std::string name = child.filename().string();
    std::string path = prefix.empty() ? name : prefix + "/" + name;
    auto st = fs::symlink_status(child, ec);
    if (ec) return Fail("cannot stat " + child.string() + ": " + ec.message());
    RootEntry e;
    e.path = path;
    if (fs::is_symlink(st)) {
      e.kind = RootEntry::Kind::kSymlink;
      e.data = fs::read_symlink(child, ec).string();
      e.mode = 0777;
      out.push_back(e);
    } else if (fs::is_directory(st)) {
      e.kind = RootEntry::Kind::kDir;
      e.mode = 0755;
      out.push_back(e);
      if (auto s = AddTree(child, path, out); !s) return s;
    } else if (fs::is_regular_file(st)) {
      e.kind = RootEntry::Kind::kFile;
      e.source = child;
      e.mode = (st.permissions() & fs::perms::owner_exec) != fs::perms::none ? 0755 : 0644;
      out.push_back(e);
    } else {
      return Fail(child.string() + " is neither a file, a directory nor a symlink; overlays hold only those");
    }
  }
  return Ok{};
}

Result<RootSummary> WriteRootTar(const RootSpec& spec, int out_fd, const ProgressFn& progress) {
  // Later additions win over earlier ones with the same path; keep the last.
  std::map<std::string, const RootEntry*> additions;
  for (const auto& a : spec.additions) additions[Normalize(a.path)] = &a;
  std::set<std::string> replaced;
  for (const auto& [path, e] : additions) {
    if (e->kind != RootEntry::Kind::kDir) replaced.insert(path);
  }

  Writer w(out_fd, spec.mtime);
  if (!w.ok()) return Fail("cannot start the root archive");
  RootSummary summary;
  std::set<std::string> base_dirs;
  std::error_code ec;
  Status copied = std::filesystem::is_directory(spec.base, ec)
                      ? CopyBaseDir(spec, replaced, w, base_dirs, summary)
                      : CopyBaseTar(spec, replaced, w, base_dirs, summary, progress);
  if (!copied) return Fail(copied.error());

  for (const auto& [path, e] : additions) {
    if (e->kind == RootEntry::Kind::kDir && base_dirs.count(path)) continue;  // the base's directory stays
    // Parents that neither the base nor the additions have are made 0755 (sorted order
    // puts an added parent directory before its children, so it is already written).
    if (auto s = EnsureParents(w, path, base_dirs); !s) return Fail(s.error());
    if (e->kind == RootEntry::Kind::kDir) base_dirs.insert(path);
    EntryPtr out(archive_entry_new(), archive_entry_free);
    archive_entry_set_pathname(out.get(), path.c_str());
    archive_entry_set_uid(out.get(), 0);
    archive_entry_set_gid(out.get(), 0);
    std::string contents;
    switch (e->kind) {
      case RootEntry::Kind::kDir:
        archive_entry_set_filetype(out.get(), AE_IFDIR);
        archive_entry_set_perm(out.get(), e->mode);
        break;
      case RootEntry::Kind::kSymlink:
        archive_entry_set_filetype(out.get(), AE_IFLNK);
        archive_entry_set_perm(out.get(), 0777);
        archive_entry_set_symlink(out.get(), e->data.c_str());
        break;
      case RootEntry::Kind::kFile: {
        if (!e->source.empty()) {
          auto data = ReadFile(e->source);
          if (!data) return Fail(data.error());
          contents = std::move(*data);
        } else {
          contents = e->data;
        }
        archive_entry_set_filetype(out.get(), AE_IFREG);
        archive_entry_set_perm(out.get(), e->mode);
        archive_entry_set_size(out.get(), static_cast<la_int64_t>(contents.size()));
        break;
      }
    }
    if (auto s = w.Header(out.get()); !s) return Fail(s.error());
    if (auto s = w.Data(contents.data(), contents.size()); !s) return Fail(s.error());
    if (Captured(spec, path)) summary.captured[path] = contents;
  }
  if (auto s = w.Close(); !s) return Fail(s.error());
  summary.entries = w.entries();
  summary.file_bytes = w.bytes();
  return summary;
}

}  // namespace sprout
