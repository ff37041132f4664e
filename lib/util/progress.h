// Step-by-step progress for long commands: a bar on a terminal, plain lines otherwise,
// and a table of step times at the end.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace sprout {

// Progress reports named steps to a stream (stderr by default).
class Progress {
 public:
  // Progress draws bars when tty is true; total_steps numbers the steps "[n/N]".
  Progress(bool tty, int total_steps, std::FILE* out = stderr);

  // SetTotal corrects the number of steps once it is known (before the next Begin).
  void SetTotal(int total_steps) { total_ = total_steps; }
  // Begin starts a step.
  void Begin(const std::string& name);
  // Update moves the current step's bar; total 0 means unknown.
  void Update(std::uint64_t done, std::uint64_t total);
  // End finishes the current step with a short result, such as a size.
  void End(const std::string& detail = {});
  // Status shows what the current step is doing now, for a step with no measurable
  // progress: on a terminal it replaces the bar; otherwise it is a line of its own.
  void Status(const std::string& text);
  // Seconds is the time since the current step began.
  double Seconds() const;
  // Note prints a line without disturbing the bar.
  void Note(const std::string& line);

  // StepTime is one finished step.
  struct StepTime {
    std::string name;
    double seconds;
    std::string detail;
  };
  const std::vector<StepTime>& steps() const { return steps_; }
  // Table renders the step times, aligned, with a total.
  std::string Table() const;

 private:
  using Clock = std::chrono::steady_clock;
  bool tty_;
  int total_;
  int index_ = 0;
  std::FILE* out_;
  std::string name_;
  Clock::time_point started_{};
  Clock::time_point last_draw_{};
  int last_percent_ = -1;
  std::vector<StepTime> steps_;
};

}  // namespace sprout
