#include "util/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace sprout {

Result<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail("cannot read " + path.string() + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
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
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
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

}  // namespace sprout
