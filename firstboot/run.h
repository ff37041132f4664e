// `sprout-firstboot run`: the node's life at every boot, as a short list of steps.
#pragma once

#include "node/settings.h"

namespace sprout::firstboot {

// Run loads the node's state, resolves its settings, applies the node config (with
// --apply-system), picks the pod host and forms or joins the cluster, reporting until
// SIGTERM. Returns the process exit code.
int Run(const node::RunFlags& flags);

}  // namespace sprout::firstboot
