#include "image/compile_log.h"

#include <algorithm>
#include <charconv>

#include "util/lines.h"

namespace sprout {

namespace {

// Word is the first space-separated word of text.
std::string_view Word(std::string_view text) { return text.substr(0, text.find(' ')); }

}  // namespace

CompileLog ParseCompileLog(std::string_view log, std::string_view name) {
  CompileLog out;
  const std::string prefix = std::string(name) + ": ";
  ForEachLine(log, [&](std::string_view line) {
    while (line.ends_with('\r') || line.ends_with(' ')) line.remove_suffix(1);
    if (!line.starts_with(prefix)) return;
    line.remove_prefix(prefix.size());
    // A recipe of several sets (images/stack) names the set next: "stack: etcd: ...".
    if (const std::string_view first = Word(line); first.size() > 1 && first.ends_with(':') && first != "cached:") {
      line.remove_prefix(std::min(line.size(), first.size() + 1));
    }
    if (line.empty()) return;
    out.phase = std::string(line);
    if (line.starts_with("cached: ")) {
      out.cached = out.compiled.empty();
      out.folder = std::string(line.substr(8));
    } else if (line.starts_with("assembled ")) {  // the host folder made from the sets' folders
      out.folder = std::string(line.substr(10));
    } else if (line.starts_with("compiled into ")) {
      out.folder = std::string(line.substr(14));
      out.building.clear();
    } else if (line.starts_with("compiling ")) {
      out.building = std::string(Word(line.substr(10)));
    } else if (line.starts_with("compiled ")) {
      // "compiled NAME in N s"
      std::string_view rest = line.substr(9);
      const std::string_view component = Word(rest);
      rest.remove_prefix(component.size());
      int seconds = 0;
      if (rest.starts_with(" in ")) {
        rest.remove_prefix(4);
        std::from_chars(rest.data(), rest.data() + rest.size(), seconds);
      }
      out.compiled.emplace_back(component, seconds);
      out.cached = false;
      out.building.clear();
    }
  });
  return out;
}

std::string CompilePhase(const CompileLog& log) {
  if (log.cached) return "cache hit";
  if (log.phase.empty()) return "";
  const std::string done = log.compiled.empty() ? "" : ", " + std::to_string(log.compiled.size()) + " compiled";
  if (!log.building.empty()) return "compiling " + log.building + ": cache miss" + done;
  // A phase's own text may hold ": "; the table's row is the text before the first.
  std::string phase = log.phase;
  if (auto colon = phase.find(": "); colon != std::string::npos) phase = phase.substr(0, colon);
  return phase + ": cache miss" + done;
}

std::string CompileSummary(const CompileLog& log) {
  if (log.cached) return "cache hit: " + log.folder;
  std::string out = "cache miss: ";
  if (!log.compiled.empty()) {
    out += std::to_string(log.compiled.size()) + (log.compiled.size() == 1 ? " component" : " components") +
           " compiled into ";
  }
  return out + (log.folder.empty() ? "?" : log.folder);
}

std::string CompileTimes(const CompileLog& log) {
  std::string out;
  for (const auto& [component, seconds] : log.compiled) {
    out += (out.empty() ? "" : ", ") + component + " " + std::to_string(seconds) + " s";
  }
  return out;
}

}  // namespace sprout
