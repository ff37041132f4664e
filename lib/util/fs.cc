#include "util/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "util/sha256.h"

namespace sprout {

Result<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail("cannot read " + path.string() + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<std::string> ContentDigest(const fs::path& path) {
  std::error_code ec;
  auto status = fs::symlink_status(path, ec);
  if (ec) return Fail("cannot read " + path.string() + ": " + ec.message());
  Sha256 h;
  // One entry: its kind, whether its owner may run it, and its content. Other mode bits
  // are left out: they follow the umask of whoever checked the tree out, and sprout gives
  // what it copies fixed modes (0755 folders, 0644 or 0755 files).
  auto entry = [&h](const fs::path& p, const std::string& name, const fs::file_status& st) -> Status {
    const bool exec = (st.permissions() & fs::perms::owner_exec) != fs::perms::none;
    std::string content;
    std::string kind = "d";
    if (fs::is_symlink(st)) {
      std::error_code e;
      content = fs::read_symlink(p, e).string();
      if (e) return Fail("cannot read the symlink " + p.string() + ": " + e.message());
      kind = "l";
    } else if (fs::is_regular_file(st)) {
      auto data = ReadFile(p);
      if (!data) return Fail(data.error());
      content = Sha256Hex(*data);
      kind = exec ? "x" : "f";
    } else if (!fs::is_directory(st)) {
      return Fail(p.string() + " is neither a file, a folder nor a symlink");
    }
    h.Update(name + "\n" + kind + " " + content + "\n");
    return Ok{};
  };
  if (!fs::is_directory(status)) {
    if (auto s = entry(path, "", status); !s) return Fail(s.error());
    return "sha256:" + h.HexDigest();
  }
  std::vector<std::pair<std::string, fs::path>> entries;
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    entries.emplace_back(it->path().lexically_relative(path).string(), it->path());
  }
  if (ec) return Fail("cannot list " + path.string() + ": " + ec.message());
  std::sort(entries.begin(), entries.end());
  for (const auto& [name, p] : entries) {
    auto st = fs::symlink_status(p, ec);
    if (ec) return Fail("cannot read " + p.string() + ": " + ec.message());
    if (auto s = entry(p, name, st); !s) return Fail(s.error());
  }
  return "sha256:" + h.HexDigest();
}

Result<std::vector<fs::path>> RegularFilesUnder(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file()) files.push_back(it->path());
  }
  if (ec) return Fail(ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

Status SyncPath(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Fail("cannot open " + path.string() + " to sync it: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return Fail("cannot sync " + path.string() + ": " + std::strerror(err));
  return Ok{};
}

Status WriteFileAtomic(const fs::path& path, std::string_view contents, fs::perms mode) {
  const fs::path tmp = path.parent_path() / ("." + path.filename().string() + ".tmp." + std::to_string(::getpid()));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, static_cast<mode_t>(mode));
  if (fd < 0) return Fail("cannot write " + path.string() + ": " + std::strerror(errno));
  const char* p = contents.data();
  std::size_t left = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string err = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return Fail("cannot write " + path.string() + ": " + err);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  ::fchmod(fd, static_cast<mode_t>(mode));
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return Fail("cannot write " + path.string() + ": " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Fail("cannot rename into " + path.string() + ": " + err);
  }
  // The rename is durable only once the directory entry is: without this a power cut
  // right after can bring back the old file (or none), e.g. a vote already promised.
  return SyncPath(path.parent_path().empty() ? fs::path(".") : path.parent_path());
}

TempDir::TempDir(const fs::path& parent, const std::string& prefix) {
  fs::create_directories(parent);
  std::string tmpl = (parent / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("cannot create a temporary directory in " + parent.string() + ": " + std::strerror(errno));
  }
  path_ = tmpl;
}

TempDir::~TempDir() {
  if (keep_) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

fs::path UserCacheDir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "sprout";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "sprout";
  return fs::temp_directory_path() / "sprout-cache";
}

fs::path SystemCacheDir() { return "/var/cache/sprout"; }

fs::path ChooseCacheDir(const CacheFacts& facts) {
  if (!facts.env.empty()) return facts.env;
  if (facts.root || facts.system_writable) return facts.system;
  return facts.user;
}

fs::path DefaultCacheDir() {
  CacheFacts f;
  if (const char* e = std::getenv("SPROUT_CACHE_DIR"); e && *e) f.env = e;
  f.root = ::geteuid() == 0;
  f.system = SystemCacheDir();
  f.system_writable = ::access(f.system.c_str(), W_OK | X_OK) == 0;
  f.user = UserCacheDir();
  return ChooseCacheDir(f);
}

std::vector<fs::path> SharedCaches(const fs::path& cache_dir) {
  std::error_code ec;
  fs::path system = SystemCacheDir();
  if (!fs::is_directory(system, ec)) return {};
  if (fs::exists(cache_dir, ec) && fs::equivalent(cache_dir, system, ec)) return {};
  if (cache_dir.lexically_normal() == system) return {};
  return {system};
}

}  // namespace sprout
