// FileLock: flock(2)'s exclusive lock on a file, held while the object lives.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>

#include "util/result.h"

namespace sprout {

// FileLock holds flock(2)'s exclusive lock on a file while it lives. The kernel drops
// the lock when its holder dies, so a crash never leaves a stale one.
class FileLock {
 public:
  // Acquire takes the lock on path (made 0600 if missing), waiting at most `wait` for
  // another holder; `waiting` is called once if it has to wait.
  static Result<FileLock> Acquire(const std::filesystem::path& path, std::chrono::milliseconds wait,
                                  const std::function<void()>& waiting = {});
  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&&) = delete;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace sprout
