// `sprout-firstboot run`: the node's life at every boot, as a short list of steps.
#pragma once

#include "firstboot/backup.h"
#include "settings/settings.h"

namespace sprout::firstboot {

// Run loads the node's state, resolves its settings, applies the node config (with
// --apply-system), picks the pod host and forms or joins the cluster, reporting until
// SIGTERM. Returns the process exit code.
// With a backup folder and interval in backup, the node also takes scheduled backups.
int Run(const settings::RunFlags& flags, const BackupFlags& backup = {});

// ResolveQuietly resolves the settings as Run does (flags, node config, cluster record),
// without logging, for the commands that act on a configured node (backup).
settings::Resolved ResolveQuietly(const settings::RunFlags& flags);

}  // namespace sprout::firstboot
