#include "util/log_watch.h"

#include <chrono>
#include <utility>

#include "util/fs.h"

namespace sprout {

LogWatcher::LogWatcher(std::filesystem::path log, std::function<void(const std::string& text)> heard)
    : log_(std::move(log)), heard_(std::move(heard)) {
  if (heard_) thread_ = std::thread([this] { Loop(); });
}

LogWatcher::~LogWatcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LogWatcher::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::milliseconds(500), [this] { return done_; })) {
    auto text = ReadFile(log_);
    heard_(text ? *text : std::string());
  }
}

}  // namespace sprout
