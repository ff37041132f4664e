#include "util/progress.h"

#include <algorithm>

#include "util/text.h"

namespace sprout {

Progress::Progress(bool tty, int total_steps, std::FILE* out) : tty_(tty), total_(total_steps), out_(out) {}

void Progress::Begin(const std::string& name) {
  ++index_;
  name_ = name;
  started_ = Clock::now();
  last_percent_ = -1;
  if (tty_) {
    std::fprintf(out_, "\r\033[K[%d/%d] %s ...", index_, total_, name.c_str());
  } else {
    std::fprintf(out_, "[%d/%d] %s ...\n", index_, total_, name.c_str());
  }
  std::fflush(out_);
}

void Progress::Update(std::uint64_t done, std::uint64_t total) {
  auto now = Clock::now();
  int percent = total ? static_cast<int>(std::min<std::uint64_t>(100, done * 100 / total)) : -1;
  if (tty_) {
    if (now - last_draw_ < std::chrono::milliseconds(100) && percent == last_percent_) return;
    last_draw_ = now;
    last_percent_ = percent;
    constexpr int kWidth = 30;
    std::string bar;
    if (percent >= 0) {
      int filled = percent * kWidth / 100;
      bar = "[" + std::string(static_cast<std::size_t>(filled), '#') +
            std::string(static_cast<std::size_t>(kWidth - filled), '.') + "] " + std::to_string(percent) + "%";
    } else {
      bar = HumanSize(done);
    }
    std::fprintf(out_, "\r\033[K[%d/%d] %s %s", index_, total_, name_.c_str(), bar.c_str());
    std::fflush(out_);
  } else if (percent >= 0 && percent / 25 != last_percent_ / 25) {
    // Plain output: a line at each quarter keeps logs short but alive.
    last_percent_ = percent;
    std::fprintf(out_, "[%d/%d] %s %d%%\n", index_, total_, name_.c_str(), percent);
    std::fflush(out_);
  }
}

void Progress::End(const std::string& detail) {
  double seconds = std::chrono::duration<double>(Clock::now() - started_).count();
  steps_.push_back({name_, seconds, detail});
  if (tty_) std::fprintf(out_, "\r\033[K");
  std::fprintf(out_, "[%d/%d] %s: done in %.1f s%s%s\n", index_, total_, name_.c_str(), seconds,
               detail.empty() ? "" : ", ", detail.c_str());
  std::fflush(out_);
}

void Progress::Status(const std::string& text) {
  if (tty_) {
    std::fprintf(out_, "\r\033[K[%d/%d] %s %s", index_, total_, name_.c_str(), text.c_str());
  } else {
    std::fprintf(out_, "[%d/%d] %s: %s\n", index_, total_, name_.c_str(), text.c_str());
  }
  std::fflush(out_);
}

double Progress::Seconds() const { return std::chrono::duration<double>(Clock::now() - started_).count(); }

void Progress::Note(const std::string& line) {
  if (tty_) std::fprintf(out_, "\r\033[K");
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

std::string Progress::Table() const {
  std::size_t width = 4;
  double total = 0;
  for (const auto& s : steps_) width = std::max(width, s.name.size());
  std::string out;
  char buf[512];
  for (const auto& s : steps_) {
    std::snprintf(buf, sizeof buf, "  %-*s %7.1f s  %s\n", static_cast<int>(width), s.name.c_str(), s.seconds,
                  s.detail.c_str());
    out += buf;
    total += s.seconds;
  }
  std::snprintf(buf, sizeof buf, "  %-*s %7.1f s\n", static_cast<int>(width), "total", total);
  out += buf;
  return out;
}

}  // namespace sprout
