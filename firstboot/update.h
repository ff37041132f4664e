// `sprout-firstboot update`: A/B updates on the node (docs/updates.md). apply writes a
// build into the inactive slot; gate and bless are the health gate and the commit that
// systemd runs around boot-complete.target; status shows both slots.
#pragma once

#include <string>

namespace sprout::firstboot {

// UpdateMain runs `sprout-firstboot update ...` with its own arguments (argv[0] is
// "update").
int UpdateMain(int argc, char** argv);

// SlotStatusText is the slots part of `sprout-firstboot status`: what the last update
// command (apply, the health gate at boot, bless, update status) recorded in
// STATE/update.json; "" when none did.
std::string SlotStatusText(const std::string& state_dir);

}  // namespace sprout::firstboot
