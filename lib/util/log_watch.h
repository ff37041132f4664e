// Watching a log while the program that writes it runs, for progress displays.
#pragma once

#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace sprout {

// LogWatcher reads a log file twice a second on its own thread and hands its whole text
// to heard ("" while the file cannot be read), until it is destroyed.
class LogWatcher {
 public:
  LogWatcher(std::filesystem::path log, std::function<void(const std::string& text)> heard);
  ~LogWatcher();
  LogWatcher(const LogWatcher&) = delete;
  LogWatcher& operator=(const LogWatcher&) = delete;

 private:
  void Loop();

  std::filesystem::path log_;
  std::function<void(const std::string&)> heard_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace sprout
