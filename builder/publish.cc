// The output directory: work-directory locks, stale-work cleanup, signing, publishing.
#include "builder/publish.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "image/media.h"
#include "util/sign.h"

namespace sprout::cli {

namespace fs = std::filesystem;

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

Result<std::unique_ptr<Workspace>> OpenWorkspace(const fs::path& out_dir, const fs::path& sign_key) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return Fail("cannot create the output directory " + out_dir.string() + ": " + ec.message());
  auto ws = std::make_unique<Workspace>(out_dir);
  auto lock = WorkDirLock::Claim(out_dir, ws->path());
  if (!lock) return Fail(lock.error());
  ws->lock.emplace(std::move(*lock));
  if (!sign_key.empty() && !fs::is_regular_file(sign_key, ec)) {
    return Fail("the signing key " + sign_key.string() + " is missing; make one with `sprout keygen -o PREFIX`");
  }
  return ws;
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

}  // namespace sprout::cli
