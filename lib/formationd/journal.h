// The formation daemon's log: one call that writes a structured journal entry under
// systemd and a readable line on stderr elsewhere. Every piece of the daemon (beacons,
// join endpoint, membership tasks, status) logs through it.
#pragma once

#include <syslog.h>

#include <string>
#include <utility>
#include <vector>

namespace sprout::formation {

// Field is one structured journal field (name without the SPROUT_ prefix).
using Field = std::pair<std::string, std::string>;

// Journal logs message with structured fields: to the journal under systemd, else to
// stderr as "sprout-firstboot: message (key=value ...)".
void Journal(int priority, const std::string& message, const std::vector<Field>& fields = {});

}  // namespace sprout::formation
