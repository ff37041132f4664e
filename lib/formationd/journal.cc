#include "formationd/journal.h"

#include <sys/uio.h>
#include <systemd/sd-journal.h>

#include <cstdio>
#include <cstdlib>

namespace sprout::formation {

void Journal(int priority, const std::string& message, const std::vector<Field>& fields) {
  if (std::getenv("JOURNAL_STREAM") != nullptr || std::getenv("INVOCATION_ID") != nullptr) {
    std::vector<std::string> lines = {"MESSAGE=sprout-firstboot: " + message, "PRIORITY=" + std::to_string(priority),
                                      "SYSLOG_IDENTIFIER=sprout-firstboot"};
    for (const auto& [k, v] : fields) lines.push_back("SPROUT_" + k + "=" + v);
    std::vector<iovec> iov;
    iov.reserve(lines.size());
    for (auto& l : lines) iov.push_back(iovec{l.data(), l.size()});
    sd_journal_sendv(iov.data(), static_cast<int>(iov.size()));
    return;
  }
  std::string text = "sprout-firstboot: " + message;
  if (!fields.empty()) {
    text += " (";
    for (std::size_t i = 0; i < fields.size(); ++i) text += (i ? " " : "") + fields[i].first + "=" + fields[i].second;
    text += ")";
  }
  std::fprintf(stderr, "%s\n", text.c_str());
}

}  // namespace sprout::formation
