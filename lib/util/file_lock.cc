#include "util/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

namespace sprout {

Result<FileLock> FileLock::Acquire(const std::filesystem::path& path, std::chrono::milliseconds wait,
                                   const std::function<void()>& waiting) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Fail("cannot open the lock file " + path.string() + ": " + std::strerror(errno));
  FileLock lock(fd);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  bool told = false;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR)
      return Fail("cannot lock " + path.string() + ": " + std::strerror(errno));
    if (std::chrono::steady_clock::now() >= deadline) {
      return Fail("another process has held " + path.string() + " for over " +
                  std::to_string(std::chrono::duration_cast<std::chrono::seconds>(wait).count()) +
                  " s; let it finish, or find it with: fuser -v " + path.string());
    }
    if (!told && waiting) waiting();
    told = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return lock;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace sprout
