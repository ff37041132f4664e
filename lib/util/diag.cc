#include "util/diag.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <tuple>

namespace sprout {

void Diagnostics::Error(Location where, std::string message, std::string hint) {
  items_.push_back({Severity::kError, std::move(where), std::move(message), std::move(hint)});
  ++errors_;
}

void Diagnostics::Warning(Location where, std::string message, std::string hint) {
  items_.push_back({Severity::kWarning, std::move(where), std::move(message), std::move(hint)});
}

void Diagnostics::Append(const Diagnostics& other) {
  for (const auto& d : other.items_) {
    items_.push_back(d);
    if (d.severity == Severity::kError) ++errors_;
  }
}

namespace {

// SourceLine returns line n (1-based) of file, caching file contents across calls.
std::string SourceLine(std::map<std::string, std::vector<std::string>>& cache, const std::string& file, int n) {
  auto it = cache.find(file);
  if (it == cache.end()) {
    std::vector<std::string> lines;
    std::ifstream in(file);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    it = cache.emplace(file, std::move(lines)).first;
  }
  if (n < 1 || static_cast<std::size_t>(n) > it->second.size()) return {};
  return it->second[static_cast<std::size_t>(n - 1)];
}

}  // namespace

std::string Diagnostics::Render(bool color) const {
  std::vector<Diagnostic> sorted = items_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.where.file, a.where.line, a.where.column) < std::tie(b.where.file, b.where.line, b.where.column);
  });
  const char* bold = color ? "\033[1m" : "";
  const char* red = color ? "\033[1;31m" : "";
  const char* yellow = color ? "\033[1;33m" : "";
  const char* cyan = color ? "\033[1;36m" : "";
  const char* reset = color ? "\033[0m" : "";
  std::map<std::string, std::vector<std::string>> cache;
  std::string out;
  for (const auto& d : sorted) {
    out += bold + d.where.file;
    if (d.where.line > 0) out += ":" + std::to_string(d.where.line) + ":" + std::to_string(d.where.column);
    out += ": ";
    out += reset;
    out += d.severity == Severity::kError ? std::string(red) + "error: " : std::string(yellow) + "warning: ";
    out += reset + d.message + "\n";
    if (d.where.line > 0) {
      std::string line = SourceLine(cache, d.where.file, d.where.line);
      if (!line.empty()) {
        out += "  " + line + "\n";
        out += "  " + std::string(static_cast<std::size_t>(std::max(0, d.where.column - 1)), ' ') + "^\n";
      }
    }
    if (!d.hint.empty()) out += std::string("  ") + cyan + "hint: " + reset + d.hint + "\n";
  }
  return out;
}

}  // namespace sprout
