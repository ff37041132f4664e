// Lines: walking a text one line at a time without copying it.
#pragma once

#include <string_view>

namespace sprout {

// ForEachLine calls fn with each line of text, without its '\n'; a last line without
// one counts, an empty text has none.
template <typename Fn>
void ForEachLine(std::string_view text, Fn&& fn) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    fn(text.substr(pos, end - pos));
    pos = end + 1;
  }
}

}  // namespace sprout
