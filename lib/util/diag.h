// Diagnostics: errors and warnings that point at a place in an input file.
#pragma once

#include <string>
#include <vector>

namespace sprout {

// Location is a 1-based line and column in a named file; line 0 means "the whole file".
struct Location {
  std::string file;
  int line = 0;
  int column = 0;
};

// Severity orders diagnostics; errors stop a run at the next checkpoint.
enum class Severity { kWarning, kError };

// Diagnostic is one finding: where, what was wrong or expected, and how to fix it.
struct Diagnostic {
  Severity severity = Severity::kError;
  Location where;
  std::string message;
  std::string hint;
};

// Diagnostics collects every finding of a pass so the user sees them all at once.
class Diagnostics {
 public:
  // Error records an error at where.
  void Error(Location where, std::string message, std::string hint = {});
  // Warning records a warning at where.
  void Warning(Location where, std::string message, std::string hint = {});
  // Append adds all findings of another collection.
  void Append(const Diagnostics& other);

  bool has_errors() const { return errors_ > 0; }
  int error_count() const { return errors_; }
  const std::vector<Diagnostic>& all() const { return items_; }

  // Render formats every finding as "file:line:col: error: message", the source line
  // with a caret under the column, and the hint. Findings are sorted by place.
  std::string Render(bool color = false) const;

 private:
  std::vector<Diagnostic> items_;
  int errors_ = 0;
};

}  // namespace sprout
